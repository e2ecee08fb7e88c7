from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.stages.train import train

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    train(snakemake.input, snakemake.output, snakemake.params.spec, int(snakemake.wildcards.seed),
                threads=snakemake.threads, relevant_min=snakemake.params.relevant_min,
                config_seed=snakemake.params.config_seed)

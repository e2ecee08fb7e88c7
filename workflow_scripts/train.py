from curricula.experiments.train import train_stage
from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    spec = dict(snakemake.params.spec, threads=snakemake.threads)
    train_stage(snakemake.input, snakemake.output, spec, int(snakemake.wildcards.seed),
                relevant_min=snakemake.params.relevant_min, config_seed=snakemake.params.config_seed)

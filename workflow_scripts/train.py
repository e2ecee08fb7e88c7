from curricula.experiments.train import train_stage
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]):
    spec = dict(snakemake.params.spec, threads=snakemake.threads)
    train_stage(snakemake.input, snakemake.output, spec, int(snakemake.wildcards.seed),
                relevant_min=snakemake.params.relevant_min, config_seed=snakemake.params.config_seed)

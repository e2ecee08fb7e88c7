from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.stages.dense import dense_biencoder

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    dense_biencoder(snakemake.input, snakemake.output, dense=snakemake.params.dense, seed=snakemake.params.seed,
                    threads=snakemake.threads)

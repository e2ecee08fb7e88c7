from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.stages.dense import dense_encode_shard

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    dense_encode_shard(snakemake.input, snakemake.output, kind=snakemake.wildcards.kind, dense=snakemake.params.dense,
                       threads=snakemake.threads, scatteritem=snakemake.wildcards.scatteritem)

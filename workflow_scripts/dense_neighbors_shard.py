from curricula.plumbing.gpus import planned_job
from curricula.plumbing.logs import logged
from curricula.stages.dense import dense_neighbors_shard

with logged(snakemake.log[0]), planned_job(snakemake.resources, snakemake.config):
    dense_neighbors_shard(snakemake.input, snakemake.output, k=snakemake.params.k,
                          within_split=snakemake.params.within_split, config=snakemake.config,
                          threads=snakemake.threads, scatteritem=snakemake.wildcards.scatteritem)

from curricula.plumbing.logs import logged
from curricula.stages.bm25 import bm25_run_shard

with logged(snakemake.log[0]):
    bm25_run_shard(snakemake.input, snakemake.output, bm25=snakemake.params.bm25, threads=snakemake.threads,
                   scatteritem=snakemake.wildcards.scatteritem)

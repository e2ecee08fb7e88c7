from curricula.plumbing.logs import logged
from curricula.stages.bm25 import bm25_candidate_scores_shard

with logged(snakemake.log[0]):
    bm25_candidate_scores_shard(snakemake.input, snakemake.output, bm25=snakemake.params.bm25,
                                scatteritem=snakemake.wildcards.scatteritem)

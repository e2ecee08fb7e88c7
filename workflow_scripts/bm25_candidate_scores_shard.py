from curricula.plumbing.logs import logged
from curricula.plumbing.shards import parse_scatteritem
from curricula.retrieval.stages import bm25_candidates_stage

with logged(snakemake.log[0]):
    cfg = snakemake.params.bm25
    bm25_candidates_stage(snakemake.input.index, snakemake.input.queries, snakemake.input.candidates,
                          snakemake.output.scores, k1=cfg["k1"], b=cfg["b"], query_turns=cfg["query_turns"],
                          heap=cfg["heap"], shard=parse_scatteritem(snakemake.wildcards.scatteritem))

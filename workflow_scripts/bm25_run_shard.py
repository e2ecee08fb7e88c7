from curricula.plumbing.logs import logged
from curricula.plumbing.shards import parse_scatteritem
from curricula.retrieval.stages import bm25_run_stage

with logged(snakemake.log[0]):
    cfg = snakemake.params.bm25
    bm25_run_stage(snakemake.input.index, snakemake.input.queries, snakemake.output.run, None,
                   k=cfg["k"], k1=cfg["k1"], b=cfg["b"], query_turns=cfg["query_turns"], threads=snakemake.threads,
                   heap=cfg["heap"], shard=parse_scatteritem(snakemake.wildcards.scatteritem))

from curricula.plumbing.logs import logged
from curricula.retrieval.stages import bm25_tune_stage

with logged(snakemake.log[0]):
    p = snakemake.params
    bm25_tune_stage(snakemake.input.index, snakemake.input, snakemake.output.grid, snakemake.output.scores,
                    tune=p.tune, k1=p.default["k1"], b=p.default["b"], query_turns=p.bm25["query_turns"],
                    heap=p.bm25["heap"], relevant_min=p.relevant_min, seed=p.seed)

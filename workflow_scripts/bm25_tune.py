from curricula.plumbing.logs import logged
from curricula.stages.bm25 import bm25_tune

with logged(snakemake.log[0]):
    bm25_tune(snakemake.input, snakemake.output, tune=snakemake.params.tune, default=snakemake.params.default,
              bm25=snakemake.params.bm25, relevant_min=snakemake.params.relevant_min, seed=snakemake.params.seed)

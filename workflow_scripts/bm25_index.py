from curricula.plumbing.logs import logged
from curricula.retrieval.stages import bm25_index_stage

with logged(snakemake.log[0]):
    bm25_index_stage(snakemake.input.docs, snakemake.output.index, threads=snakemake.threads,
                     heap=snakemake.params.heap)

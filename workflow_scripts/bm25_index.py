from curricula.plumbing.logs import logged
from curricula.stages.bm25 import bm25_index

with logged(snakemake.log[0]):
    bm25_index(snakemake.input, snakemake.output, threads=snakemake.threads, heap=snakemake.params.heap)

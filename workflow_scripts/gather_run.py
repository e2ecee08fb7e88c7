from curricula.plumbing.logs import logged
from curricula.stages.bm25 import gather_run

with logged(snakemake.log[0]):
    gather_run(snakemake.input, snakemake.output, k=snakemake.params.k)

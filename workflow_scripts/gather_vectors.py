from curricula.plumbing.logs import logged
from curricula.stages.dense import gather_vectors

with logged(snakemake.log[0]):
    gather_vectors(snakemake.input, snakemake.output, kind=snakemake.wildcards.kind)

from curricula.plumbing.logs import logged
from curricula.stages.difficulty import difficulty

with logged(snakemake.log[0]):
    difficulty(snakemake.input, snakemake.output, functions=snakemake.params.functions)

from curricula.difficulty import difficulty_stage
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]):
    difficulty_stage(snakemake.input, snakemake.output.table, snakemake.params.functions)

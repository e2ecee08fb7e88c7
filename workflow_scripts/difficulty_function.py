from curricula.difficulty import difficulty_function_stage
from curricula.logs import logged

with logged(snakemake.log[0]):
    split = "test" if snakemake.rule == "difficulty_test" else "train"
    difficulty_function_stage(snakemake.input, snakemake.output.table, snakemake.wildcards.function,
                              snakemake.params.knobs, snakemake.params.relevant_min, split=split)

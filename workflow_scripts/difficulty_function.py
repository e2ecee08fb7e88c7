from curricula.difficulty import difficulty_function_stage
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]):
    # rule difficulty_test passes split="test"; difficulty_function has no split param (adding one would change its
    # params and so re-run every finished difficulty table and all the training downstream)
    split = snakemake.params.get("split", "train")
    difficulty_function_stage(snakemake.input, snakemake.output.table, snakemake.wildcards.function,
                              snakemake.params.knobs, snakemake.params.relevant_min, split=split)

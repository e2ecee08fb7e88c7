from curricula.plumbing.logs import logged
from curricula.stages.difficulty import difficulty_function

with logged(snakemake.log[0]):
    # rule difficulty_test passes split="test"; difficulty_function has no split param (adding one would change its
    # params and so re-run every finished difficulty table and all the training downstream)
    difficulty_function(snakemake.input, snakemake.output, function=snakemake.wildcards.function,
                        knobs=snakemake.params.knobs, relevant_min=snakemake.params.relevant_min,
                        split=snakemake.params.get("split", "train"))

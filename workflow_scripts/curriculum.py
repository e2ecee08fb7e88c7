from curricula.plumbing.logs import logged
from curricula.stages.curriculum import curriculum

with logged(snakemake.log[0]):
    curriculum(snakemake.input, snakemake.output, scoring=snakemake.wildcards.scoring,
               shard_size=snakemake.params.shard_size, seed=snakemake.params.seed)

from curricula.curriculum.ordering import curriculum_stage
from curricula.plumbing.logs import logged

with logged(snakemake.log[0]):
    curriculum_stage(snakemake.input.table, snakemake.output.shards, snakemake.wildcards.scoring,
                     shard_size=snakemake.params.shard_size, seed=snakemake.params.seed)

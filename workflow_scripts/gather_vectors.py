from curricula.plumbing.logs import logged
from curricula.retrieval.stages import gather_vectors_stage

with logged(snakemake.log[0]):
    gather_vectors_stage(snakemake.wildcards.kind, list(snakemake.input.shards), snakemake.input.table,
                         snakemake.output.vectors)

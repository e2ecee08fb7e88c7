from curricula.plumbing.logs import logged
from curricula.retrieval.stages import gather_stage

with logged(snakemake.log[0]):
    gather_stage(snakemake.params.table, list(snakemake.input.shards), snakemake.output[0],
                 k=snakemake.params.get("k"))

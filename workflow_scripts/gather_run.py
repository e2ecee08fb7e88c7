from curricula.plumbing.logs import logged
from curricula.retrieval.stages import gather_run_stage

with logged(snakemake.log[0]):
    gather_run_stage(list(snakemake.input.shards), snakemake.output.run, snakemake.output.trec, k=snakemake.params.k)

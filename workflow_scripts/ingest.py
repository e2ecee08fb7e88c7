from curricula.plumbing.logs import logged
from curricula.stages.data import ingest

with logged(snakemake.log[0]):
    ingest(snakemake.output, dataset=snakemake.params.dataset, seed=snakemake.params.seed)

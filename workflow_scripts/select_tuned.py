from curricula.plumbing.logs import logged
from curricula.stages.train import select_tuned

with logged(snakemake.log[0]):
    select_tuned(snakemake.input, snakemake.output, snakemake.params.values)

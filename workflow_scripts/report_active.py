from curricula.plumbing.logs import logged
from curricula.stages.active import report_active

with logged(snakemake.log[0]):
    report_active(snakemake.input, snakemake.output, dataset=snakemake.params.dataset)

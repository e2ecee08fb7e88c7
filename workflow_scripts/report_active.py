from curricula.plumbing.logs import logged
from curricula.report.active import report_active_stage

with logged(snakemake.log[0]):
    report_active_stage(snakemake.input, snakemake.output, dataset=snakemake.params.dataset)

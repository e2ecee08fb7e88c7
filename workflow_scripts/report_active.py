from curricula.active_report import report_active_stage
from curricula.logs import logged

with logged(snakemake.log[0]):
    report_active_stage(snakemake.input, snakemake.output, dataset=snakemake.params.dataset)

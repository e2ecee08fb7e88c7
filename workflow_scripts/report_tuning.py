from curricula.plumbing.logs import logged
from curricula.stages.report import report_tuning

with logged(snakemake.log[0]):
    report_tuning(snakemake.input, snakemake.output, dataset=snakemake.params.dataset)

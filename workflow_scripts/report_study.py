from curricula.plumbing.logs import logged
from curricula.stages.study import report_study

with logged(snakemake.log[0]):
    report_study(snakemake.input, snakemake.output, **dict(snakemake.params.items()))

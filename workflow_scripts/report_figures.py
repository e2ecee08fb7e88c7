from curricula.plumbing.logs import logged
from curricula.stages.report import report_figures

with logged(snakemake.log[0]):
    report_figures(snakemake.input, snakemake.output, specs=snakemake.params.specs, measure=snakemake.params.measure,
                   turn_edges=snakemake.params.turn_edges)

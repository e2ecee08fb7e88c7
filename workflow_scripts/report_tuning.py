from pathlib import Path

from curricula.plumbing.logs import logged
from curricula.report.tables import split_inputs
from curricula.report.tuning import tuning_report_stage

with logged(snakemake.log[0]):
    tuning_report_stage(split_inputs(snakemake.input, "selection"), Path(snakemake.output.tuning).with_suffix(""),
                        snakemake.params.dataset)

from curricula.experiments.tuning import select_stage
from curricula.plumbing.logs import logged
from curricula.report.tables import split_inputs

with logged(snakemake.log[0]):
    curves = {run: path for (run,), path in split_inputs(snakemake.input, "curve").items()}
    models = {run: path for (run,), path in split_inputs(snakemake.input, "model").items()}
    select_stage(curves, models, dict(snakemake.params.values), snakemake.output)

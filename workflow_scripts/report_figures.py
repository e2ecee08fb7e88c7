from curricula.plumbing.logs import logged
from curricula.report.figures import figures_stage
from curricula.report.tables import split_inputs

with logged(snakemake.log[0]):
    figures_stage(specs=snakemake.params.specs, curve_paths=split_inputs(snakemake.input, "curve"),
                  metric_paths=split_inputs(snakemake.input, "metrics"), queries_path=snakemake.input.queries,
                  difficulty_paths={f: p for (f,), p in split_inputs(snakemake.input, "difficulty").items()},
                  out_dir=snakemake.output.figures, measure=snakemake.params.measure,
                  turn_edges=snakemake.params.turn_edges)

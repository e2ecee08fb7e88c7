from curricula.plumbing.logs import logged
from curricula.report.tables import split_inputs
from curricula.study.rounds import study_round_stage

with logged(snakemake.log[0]):
    study_round_stage(split_inputs(snakemake.input, "metrics"),
                      snakemake.input.previous if "previous" in snakemake.input.keys() else None, snakemake.output[0],
                      claims=snakemake.params.claims, looks=snakemake.params.looks, kind=snakemake.params.kind,
                      alpha=snakemake.params.alpha, seeds=snakemake.params.seeds, round_=snakemake.params.round_,
                      measure=snakemake.params.measure, margin=snakemake.params.margin,
                      multiplicity=snakemake.params.multiplicity)

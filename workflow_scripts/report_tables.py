from curricula.plumbing.logs import logged
from curricula.report.tables import split_inputs, tables_stage

with logged(snakemake.log[0]):
    runs, refs = split_inputs(snakemake.input, "metrics"), split_inputs(snakemake.input, "reference")
    tables_stage(runs, {name: path for (name,), path in refs.items()}, snakemake.output,
                 measure=snakemake.params.measure, measures=snakemake.params.measures,
                 use_holm=snakemake.params.holm, dataset=snakemake.params.dataset, test=snakemake.params.test,
                 permutations=snakemake.params.permutations, seed=snakemake.params.seed,
                 inference=snakemake.params.inference, plan_max_queries=snakemake.params.plan_max_queries)

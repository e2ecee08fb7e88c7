from curricula.plumbing.logs import logged
from curricula.stages.report import report_tables

with logged(snakemake.log[0]):
    report_tables(snakemake.input, snakemake.output, measure=snakemake.params.measure,
                  measures=snakemake.params.measures, holm=snakemake.params.holm, dataset=snakemake.params.dataset,
                  test=snakemake.params.test, permutations=snakemake.params.permutations, seed=snakemake.params.seed,
                  inference=snakemake.params.inference, plan_max_queries=snakemake.params.plan_max_queries)

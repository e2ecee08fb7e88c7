from curricula.plumbing.logs import logged
from curricula.report.tables import split_inputs
from curricula.study.findings import findings_stage

with logged(snakemake.log[0]):
    findings_stage(split_inputs(snakemake.input, "metrics"), snakemake.params.claims, snakemake.output,
                   measure=snakemake.params.measure, alpha=snakemake.params.alpha, power=snakemake.params.power,
                   active_paths=split_inputs(snakemake.input, "active"), inference=snakemake.params.inference,
                   margin=snakemake.params.margin, multiplicity=snakemake.params.multiplicity,
                   plan_max_queries=snakemake.params.plan_max_queries,
                   differing_keys=snakemake.params.differing_keys,
                   rounds=snakemake.input.rounds if "rounds" in snakemake.input.keys() else None,
                   seeds=snakemake.params.get("seeds"), benchmarks=snakemake.params.get("benchmarks"),
                   previous=snakemake.input.previous if "previous" in snakemake.input.keys() else None)

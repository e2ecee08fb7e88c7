from curricula.plumbing.logs import logged
from curricula.study.findings import findings_stage
from curricula.study.ledger_runs import claim_runs

with logged(snakemake.log[0]):
    settings = {k: v for k, v in snakemake.params.items() if k not in ("ledger", "claims")}
    findings_stage(claim_runs(snakemake.input), snakemake.params.claims, snakemake.output,
                   ledger=snakemake.params.ledger, **settings,
                   rounds=snakemake.input.rounds if "rounds" in snakemake.input.keys() else None,
                   previous=snakemake.input.previous if "previous" in snakemake.input.keys() else None)

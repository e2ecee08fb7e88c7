from curricula.plumbing.logs import logged
from curricula.study.ledger_runs import claim_runs
from curricula.study.rounds import study_round_stage

with logged(snakemake.log[0]):
    settings = {k: v for k, v in snakemake.params.items() if k != "ledger"}
    study_round_stage(claim_runs(snakemake.input),
                      snakemake.input.previous if "previous" in snakemake.input.keys() else None, snakemake.output[0],
                      ledger=snakemake.params.ledger, **settings)

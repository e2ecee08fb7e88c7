from curricula.plumbing.logs import logged
from curricula.stages.study import study_ledger_entry

with logged(snakemake.log[0]):
    study_ledger_entry(snakemake.input, snakemake.output[0], dataset=snakemake.wildcards.dataset,
                       arm=snakemake.wildcards.arm, seed=snakemake.wildcards.seed,
                       spec_digest=snakemake.params.spec_digest, root=snakemake.params.root,
                       benchmarks=snakemake.params.benchmarks, ledger=snakemake.params.ledger,
                       manifest=snakemake.params.manifest)

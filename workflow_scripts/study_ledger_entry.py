from curricula.plumbing.logs import logged
from curricula.study.entries import ledger_entry_stage

with logged(snakemake.log[0]):
    ledger_entry_stage(snakemake.input, snakemake.output[0], dataset=snakemake.wildcards.dataset,
                       arm=snakemake.wildcards.arm, seed=int(snakemake.wildcards.seed),
                       spec_digest=snakemake.params.spec_digest, root=snakemake.params.root,
                       benchmarks=snakemake.params.benchmarks, ledger=snakemake.params.ledger,
                       manifest=snakemake.params.manifest)

rule ingest:
    """Load the configured dataset into the ingest contract (queries, docs, qrels, candidates)."""
    input:
        dataset_files,
    output:
        **ingest_outputs(),
    params:
        dataset=config["dataset"],
        seed=config["seed"],
    log:
        f"{LOGS}/ingest.log",
    benchmark:
        f"{BENCHMARKS}/ingest.tsv"
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/ingest.py"

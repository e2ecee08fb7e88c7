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
        log_path("ingest"),
    benchmark:
        benchmark_path("ingest")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/ingest.py"

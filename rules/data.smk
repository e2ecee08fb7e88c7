rule ingest:
    """Load the configured dataset into the ingest contract (queries, docs, qrels, candidates)."""
    input:
        dataset_files,
    output:
        **targets.ingest_outputs(PLAN),
    params:
        dataset=config["dataset"],
        seed=config["pipeline_seed"],
    log:
        LAYOUT.log("ingest"),
    benchmark:
        LAYOUT.benchmark("ingest")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/ingest.py"

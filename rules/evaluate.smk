rule evaluate:
    """Re-rank the test candidates with one trained model: TREC run and per-query metrics."""
    input:
        **ingest_outputs(),
        model=train_outputs()["model"],
    output:
        **evaluate_outputs(),
    params:
        knobs=evaluate_knobs,
        measures=config["evaluate"]["measures"],
        relevant_min=config["dataset"]["relevant_min"],
        seed=config["seed"],
    threads: experiment_knob("threads")
    log:
        log_path("evaluate/{experiment}/seed={seed}"),
    benchmark:
        benchmark_path("evaluate/{experiment}/seed={seed}")
    resources:
        mem_mb=4000,
        gpu=experiment_gpus,
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/evaluate.py"


rule evaluate_reference:
    """The reference rankers (BM25's Lucene scores, the teacher) on the same test candidates."""
    input:
        unpack(reference_scores),
    output:
        **reference_outputs(),
    params:
        measures=config["evaluate"]["measures"],
        relevant_min=config["dataset"]["relevant_min"],
        seed=config["seed"],
    log:
        log_path("evaluate/reference_{reference}"),
    benchmark:
        benchmark_path("evaluate/reference_{reference}")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/evaluate.py"

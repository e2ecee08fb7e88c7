rule evaluate:
    """Re-rank the test candidates with one trained model: TREC run and per-query metrics."""
    input:
        **ingest_outputs(),
        model=train_outputs()["model"],
        **additive_input(),
    output:
        **evaluate_outputs(),
    params:
        knobs=evaluate_knobs,
        additivity=additivity_params,
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
    """The BM25 reference rankers (Lucene scores with default k1/b and tuned on dev) on the same test candidates."""
    wildcard_constraints:
        reference=r"bm25|bm25_tuned",
    input:
        unpack(reference_scores),
    output:
        **reference_outputs(additive=False),
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


rule evaluate_reference_additive:
    """The teacher's scores as a reference ranker on the test candidates, alone and with score additivity."""
    wildcard_constraints:
        reference=r"teacher",
    input:
        unpack(reference_scores),
        **additive_input(),
    output:
        **reference_outputs(additive=True),
    params:
        measures=config["evaluate"]["measures"],
        relevant_min=config["dataset"]["relevant_min"],
        seed=config["seed"],
        additivity=additivity_params,
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

rule evaluate:
    """Re-rank the test candidates with one trained model: TREC run and per-query metrics."""
    input:
        **targets.ingest_outputs(PLAN),
        model=LAYOUT.train()["model"],
        **targets.additive_input(PLAN),
    output:
        **targets.evaluate_outputs(PLAN),
    params:
        knobs=evaluate_knobs,
        additivity=additivity_params,
        measures=config["evaluate"]["measures"],
        relevant_min=config["dataset"]["relevant_min"],
        seed=config["pipeline_seed"],
    threads: experiment_threads
    # ahead of the next training: a finished run is evaluated (and, in a study, kept in the ledger) at once
    priority: 10
    log:
        LAYOUT.log("evaluate/{experiment}/seed={seed}"),
    benchmark:
        LAYOUT.benchmark("evaluate/{experiment}/seed={seed}")
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
        **targets.reference_outputs(PLAN, additive=False),
    params:
        measures=config["evaluate"]["measures"],
        relevant_min=config["dataset"]["relevant_min"],
        seed=config["pipeline_seed"],
    log:
        LAYOUT.log("evaluate/reference_{reference}"),
    benchmark:
        LAYOUT.benchmark("evaluate/reference_{reference}")
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
        **targets.additive_input(PLAN),
    output:
        **targets.reference_outputs(PLAN, additive=True),
    params:
        measures=config["evaluate"]["measures"],
        relevant_min=config["dataset"]["relevant_min"],
        seed=config["pipeline_seed"],
        additivity=additivity_params,
    log:
        LAYOUT.log("evaluate/reference_{reference}"),
    benchmark:
        LAYOUT.benchmark("evaluate/reference_{reference}")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/evaluate.py"

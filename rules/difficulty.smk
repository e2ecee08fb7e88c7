rule difficulty_function:
    """One scoring function on the training pairs: raw value and difficulty in [0,1] (1 = hardest)."""
    input:
        unpack(difficulty_function_inputs),
    output:
        table=difficulty_outputs()["function"],
    params:
        knobs=difficulty_function_knobs,
        relevant_min=config["dataset"]["relevant_min"],
    log:
        log_path("difficulty_function/{function}"),
    benchmark:
        benchmark_path("difficulty_function/{function}")
    resources:
        mem_mb=6000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/difficulty_function.py"


rule difficulty:
    """The per-function tables joined into one (one row per training pair); logs their Spearman matrix."""
    input:
        **{f: difficulty_function_path(f) for f in config["difficulty"]["functions"]},
    output:
        table=difficulty_outputs()["table"],
    params:
        functions=config["difficulty"]["functions"],
    log:
        log_path("difficulty"),
    benchmark:
        benchmark_path("difficulty")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/difficulty.py"


rule difficulty_test:
    """One scoring function on the test pairs (for the report's test-effectiveness-by-difficulty figures)."""
    input:
        unpack(difficulty_function_inputs),
    output:
        table=difficulty_test_path("{function}"),
    params:
        knobs=difficulty_function_knobs,
        relevant_min=config["dataset"]["relevant_min"],
        split="test",
    log:
        log_path("difficulty_test/{function}"),
    benchmark:
        benchmark_path("difficulty_test/{function}")
    resources:
        mem_mb=6000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/difficulty_function.py"

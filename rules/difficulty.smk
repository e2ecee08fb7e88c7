rule difficulty_function:
    """One scoring function on the training pairs: raw value and difficulty in [0,1] (1 = hardest)."""
    input:
        unpack(difficulty_function_inputs),
    output:
        table=LAYOUT.difficulty_function(),
    params:
        knobs=difficulty_function_knobs,
        relevant_min=config["dataset"]["relevant_min"],
    log:
        LAYOUT.log("difficulty_function/{function}"),
    benchmark:
        LAYOUT.benchmark("difficulty_function/{function}")
    resources:
        mem_mb=6000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/difficulty_function.py"


if PLAN.difficulty_functions():  # the rule exists only when the joined table holds a function

    rule difficulty:
        """The per-function tables joined into one (one row per training pair); logs their Spearman matrix: config
        difficulty.functions, by default the functions the grid consumes (PLAN.difficulty_functions)."""
        input:
            **{f: LAYOUT.difficulty_function(f) for f in PLAN.difficulty_functions()},
        output:
            table=LAYOUT.difficulty_table,
        params:
            functions=PLAN.difficulty_functions(),
        log:
            LAYOUT.log("difficulty"),
        benchmark:
            LAYOUT.benchmark("difficulty")
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
        table=LAYOUT.difficulty_test(),
    params:
        knobs=difficulty_function_knobs,
        relevant_min=config["dataset"]["relevant_min"],
        split="test",
    log:
        LAYOUT.log("difficulty_test/{function}"),
    benchmark:
        LAYOUT.benchmark("difficulty_test/{function}")
    resources:
        mem_mb=6000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/difficulty_function.py"

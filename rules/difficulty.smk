rule difficulty:
    """Every configured scoring function on the training pairs: raw value and difficulty in [0,1] (1 = hardest)."""
    input:
        unpack(difficulty_inputs),
    output:
        table=difficulty_outputs()["table"],
    params:
        difficulty=config["difficulty"],
        seed=config["seed"],
        relevant_min=config["dataset"]["relevant_min"],
    log:
        f"{LOGS}/difficulty.log",
    benchmark:
        f"{BENCHMARKS}/difficulty.tsv"
    resources:
        mem_mb=6000,
    script:
        "../workflow_scripts/difficulty.py"

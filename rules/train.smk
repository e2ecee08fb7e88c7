rule train:
    """One ranker per (experiment, seed): curriculum sampling, negatives, weighted loss, best-on-dev model."""
    input:
        unpack(train_inputs),
    output:
        model=directory(train_outputs()["model"]),
        dev_curve=train_outputs()["dev_curve"],
        config=train_outputs()["config"],
    params:
        spec=train_params,
        relevant_min=config["dataset"]["relevant_min"],
        config_seed=config["seed"],
    threads: experiment_knob("threads")
    log:
        f"{LOGS}/train/{{experiment}}/seed={{seed}}.log",
    benchmark:
        f"{BENCHMARKS}/train/{{experiment}}/seed={{seed}}.tsv"
    resources:
        mem_mb=6000,
        gpu=lambda wildcards: 1 if EXPERIMENTS[wildcards.experiment]["device"] == "cuda" else 0,
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/train.py"

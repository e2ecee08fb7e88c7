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
        log_path("train/{experiment}/seed={seed}"),
    benchmark:
        benchmark_path("train/{experiment}/seed={seed}")
    resources:
        mem_mb=6000,
        gpu=experiment_gpus,
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/train.py"

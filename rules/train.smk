rule train:
    """One ranker per (training run, seed): curriculum sampling, negatives, weighted loss, best-on-dev model."""
    wildcard_constraints:
        experiment=one_of(RUNS),
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


rule select_tuned:
    """A tuned experiment's run that is best on dev, per seed: its model and dev curve, and the selection table."""
    wildcard_constraints:
        experiment=one_of(TUNED),
    input:
        unpack(tuned_inputs),
    output:
        model=directory(train_outputs()["model"]),
        dev_curve=train_outputs()["dev_curve"],
        selection=selection_path(),
    params:
        values=tuned_params,
    log:
        log_path("select_tuned/{experiment}/seed={seed}"),
    benchmark:
        benchmark_path("select_tuned/{experiment}/seed={seed}")
    resources:
        mem_mb=1000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/select_tuned.py"

rule train:
    """One ranker per (training run, seed): curriculum sampling, negatives, weighted loss, best-on-dev model."""
    wildcard_constraints:
        experiment=one_of(PLAN.runs),
    input:
        unpack(train_inputs),
    output:
        model=directory(LAYOUT.train()["model"]),
        dev_curve=LAYOUT.train()["dev_curve"],
        config=LAYOUT.train()["config"],
    params:
        spec=train_params,
        relevant_min=config["dataset"]["relevant_min"],
        config_seed=config["pipeline_seed"],
    threads: experiment_threads
    log:
        LAYOUT.log("train/{experiment}/seed={seed}"),
    benchmark:
        LAYOUT.benchmark("train/{experiment}/seed={seed}")
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
        experiment=one_of(PLAN.tuned),
    input:
        unpack(tuned_inputs),
    output:
        model=directory(LAYOUT.train()["model"]),
        dev_curve=LAYOUT.train()["dev_curve"],
        selection=LAYOUT.selection(),
    params:
        values=tuned_params,
    log:
        LAYOUT.log("select_tuned/{experiment}/seed={seed}"),
    benchmark:
        LAYOUT.benchmark("select_tuned/{experiment}/seed={seed}")
    resources:
        mem_mb=1000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/select_tuned.py"

rule teacher_train:
    """Fine-tune the teacher cross-encoder on the train split (balanced pairs, cross-entropy)."""
    input:
        **ingest_outputs(),
    output:
        model=directory(teacher_outputs()["model"]),
    params:
        teacher=teacher_params("train"),
        seed=config["seed"],
        relevant_min=config["dataset"]["relevant_min"],
    priority: 20  # the teacher is the longest chain before a train job (train -> score -> bert_* curricula): start it first
    threads: config["teacher"]["threads"]
    log:
        log_path("teacher_train"),
    benchmark:
        benchmark_path("teacher_train")
    resources:
        mem_mb=8000,
        gpu=gpus(config["teacher"]["device"]),
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/teacher_train.py"


rule teacher_score_shard:
    """The teacher's logit and loss for one shard's batches of candidates (train cross-fitted when folds > 1)."""
    input:
        **ingest_outputs(),
        model=teacher_outputs()["model"],
    output:
        scores=temp(shard_path("teacher", "scores")),
    params:
        teacher=teacher_params("score"),
        seed=config["seed"],
        relevant_min=config["dataset"]["relevant_min"],
    priority: 20  # the teacher is the longest chain before a train job (train -> score -> bert_* curricula): start it first
    threads: config["teacher"]["threads"]
    log:
        log_path("teacher_score_shard/{scatteritem}"),
    benchmark:
        benchmark_path("teacher_score_shard/{scatteritem}")
    resources:
        mem_mb=8000,
        gpu=gpus(config["teacher"]["device"]),
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/teacher_score_shard.py"


rule teacher_score:
    """The teacher's logit and loss for every candidate, gathered from the shards."""
    input:
        shards=gather.teacher(shard_path("teacher", "scores")),
    output:
        scores=teacher_outputs()["scores"],
    params:
        table="teacher_scores",
    log:
        log_path("teacher_score"),
    benchmark:
        benchmark_path("teacher_score")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/gather_table.py"

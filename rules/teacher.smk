rule teacher_train:
    """Fine-tune the teacher cross-encoder on the train split (balanced pairs, cross-entropy)."""
    input:
        **targets.ingest_outputs(PLAN),
    output:
        model=directory(LAYOUT.teacher()["model"]),
    params:
        teacher=PLAN.teacher_params("train"),
        seed=config["pipeline_seed"],
        relevant_min=config["dataset"]["relevant_min"],
    priority: 20  # the teacher is the longest chain before a train job (train -> score -> bert_*): start it first
    threads: config["teacher"]["threads"]
    log:
        LAYOUT.log("teacher_train"),
    benchmark:
        LAYOUT.benchmark("teacher_train")
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
        **targets.ingest_outputs(PLAN),
        model=LAYOUT.teacher()["model"],
    output:
        scores=temp(LAYOUT.shard("teacher", "scores")),
    params:
        teacher=PLAN.teacher_params("score"),
        seed=config["pipeline_seed"],
        relevant_min=config["dataset"]["relevant_min"],
    priority: 20  # the teacher is the longest chain before a train job (train -> score -> bert_*): start it first
    threads: config["teacher"]["threads"]
    log:
        LAYOUT.log("teacher_score_shard/{scatteritem}"),
    benchmark:
        LAYOUT.benchmark("teacher_score_shard/{scatteritem}")
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
        shards=gather.teacher(LAYOUT.shard("teacher", "scores")),
    output:
        scores=LAYOUT.teacher()["scores"],
    params:
        table="teacher_scores",
    log:
        LAYOUT.log("teacher_score"),
    benchmark:
        LAYOUT.benchmark("teacher_score")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/gather_table.py"

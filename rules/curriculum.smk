rule curriculum:
    """Training instances sorted easy -> hard by one scoring function, in shards (ties by a seeded key)."""
    input:
        table=difficulty_function_path("{scoring}"),
    output:
        shards=directory(curriculum_dir("{scoring}")),
    params:
        shard_size=config["curriculum"]["shard_size"],
        seed=config["seed"],
    log:
        log_path("curriculum/{scoring}"),
    benchmark:
        benchmark_path("curriculum/{scoring}")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/curriculum.py"

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
        f"{LOGS}/curriculum/{{scoring}}.log",
    benchmark:
        f"{BENCHMARKS}/curriculum/{{scoring}}.tsv"
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/curriculum.py"

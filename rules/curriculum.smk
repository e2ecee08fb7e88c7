rule curriculum:
    """Training instances sorted easy -> hard by one scoring function, in shards (ties by a seeded key)."""
    input:
        table=LAYOUT.difficulty_function("{scoring}"),
    output:
        shards=directory(LAYOUT.curriculum()),
    params:
        shard_size=config["curriculum"]["shard_size"],
        seed=config["pipeline_seed"],
    log:
        LAYOUT.log("curriculum/{scoring}"),
    benchmark:
        LAYOUT.benchmark("curriculum/{scoring}")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/curriculum.py"

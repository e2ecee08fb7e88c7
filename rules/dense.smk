rule dense_biencoder:
    """Optional: fine-tune context and response encoders with in-batch negatives on the train split."""
    input:
        queries=ingest_outputs()["queries"],
        docs=ingest_outputs()["docs"],
        qrels=ingest_outputs()["qrels"],
    output:
        biencoder=directory(dense_outputs()["biencoder"]),
    params:
        dense=section("dense", "model", "finetune", "device", "precision", "query_truncation"),
        seed=config["seed"],
    priority: 10  # G gates the encoding, the neighbours and HCL's train jobs: start it before the others
    threads: config["dense"]["threads"]
    log:
        log_path("dense_biencoder"),
    benchmark:
        benchmark_path("dense_biencoder")
    resources:
        mem_mb=8000,
        gpu=gpus(config["dense"]["device"]),
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/dense_biencoder.py"


rule dense_encode_shard:
    """Unit-norm MiniLM embeddings of one shard's batches of queries (contexts) or docs (responses)."""
    input:
        unpack(biencoder_input),
        table=ingest_table("{kind}"),
    output:
        vectors=temp(shard_path("dense", "{kind}")),
    params:
        dense={**section("dense", "model", "layers"), "max_length": DENSE_MAX_LENGTH,  # null resolved
               **section("dense", "query_truncation", "batch_size", "device", "precision")},
    priority: 10  # the neighbours gate HCL's train jobs: start them before the train jobs that need nothing
    threads: config["dense"]["threads"]
    log:
        log_path("dense_encode_shard/{kind}.{scatteritem}"),
    benchmark:
        benchmark_path("dense_encode_shard/{kind}.{scatteritem}")
    resources:
        mem_mb=6000,
        gpu=gpus(config["dense"]["device"]),
    conda:
        CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/dense_encode_shard.py"


rule dense_encode:
    """Unit-norm MiniLM embeddings of every query or doc, gathered from the shards in the ingest table's order."""
    input:
        shards=gather.encode(shard_path("dense", "{{kind}}")),
        table=ingest_table("{kind}"),
    output:
        vectors=dense_vectors("{kind}"),
    log:
        log_path("dense_encode_{kind}"),
    benchmark:
        benchmark_path("dense_encode_{kind}")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/gather_vectors.py"


rule dense_neighbors_shard:
    """Exact top-K responses of one shard's block of contexts by inner product (FAISS), chunked: never N x N."""
    input:
        queries_vectors=dense_outputs()["queries"],
        docs_vectors=dense_outputs()["docs"],
        queries=ingest_outputs()["queries"],
        qrels=ingest_outputs()["qrels"],
        candidates=ingest_outputs()["candidates"],
    output:
        neighbors=temp(shard_path("dense", "neighbors")),
    params:
        k=config["dense"]["neighbors_k"],
        within_split=config["dense"]["neighbors_within_split"],
    priority: 10  # the neighbours gate HCL's train jobs: start them before the train jobs that need nothing
    threads: config["dense"]["threads"]
    log:
        log_path("dense_neighbors_shard/{scatteritem}"),
    benchmark:
        benchmark_path("dense_neighbors_shard/{scatteritem}")
    resources:
        mem_mb=8000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/dense_neighbors_shard.py"


rule dense_neighbors:
    """Exact top-K responses of every context, gathered from the shards."""
    input:
        shards=gather.neighbors(shard_path("dense", "neighbors")),
    output:
        neighbors=dense_outputs()["neighbors"],
    params:
        table="neighbors",
        k=config["dense"]["neighbors_k"],  # cuts the row groups, as in the unsharded table
    log:
        log_path("dense_neighbors"),
    benchmark:
        benchmark_path("dense_neighbors")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/gather_table.py"


rule dense_positive_ranks:
    """Where G ranks each context's true reply among its top-K neighbours, per split (median rank; shares at rank 1,
    in the top 10, 100, K, outside); the neighbours table is read lazily, joined with the relevant pairs only."""
    input:
        neighbors=dense_outputs()["neighbors"],
        queries=ingest_outputs()["queries"],
        qrels=ingest_outputs()["qrels"],
    output:
        summary=dense_outputs()["positive_ranks"],
    params:
        k=config["dense"]["neighbors_k"],
        relevant_min=config["dataset"]["relevant_min"],
    log:
        log_path("dense_positive_ranks"),
    benchmark:
        benchmark_path("dense_positive_ranks")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/dense_positive_ranks.py"

from curricula.retrieval.gpu_search import neighbors_device


rule dense_biencoder:
    """Optional: fine-tune context and response encoders with in-batch negatives on the train split."""
    input:
        queries=LAYOUT.data("queries"),
        docs=LAYOUT.data("docs"),
        qrels=LAYOUT.data("qrels"),
    output:
        biencoder=directory(LAYOUT.dense()["biencoder"]),
    params:
        dense=PLAN.section("dense", "model", "finetune", "device", "precision", "query_truncation"),
        seed=config["pipeline_seed"],
    priority: 10  # G gates the encoding, the neighbours and HCL's train jobs: start it before the others
    threads: config["dense"]["threads"]
    log:
        LAYOUT.log("dense_biencoder"),
    benchmark:
        LAYOUT.benchmark("dense_biencoder")
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
        table=LAYOUT.data("{kind}"),
    output:
        vectors=temp(LAYOUT.shard("dense", "{kind}")),
    params:
        dense=PLAN.dense_encode_params(),  # dense.max_length, null resolved
    priority: 10  # the neighbours gate HCL's train jobs: start them before the train jobs that need nothing
    threads: config["dense"]["threads"]
    log:
        LAYOUT.log("dense_encode_shard/{kind}.{scatteritem}"),
    benchmark:
        LAYOUT.benchmark("dense_encode_shard/{kind}.{scatteritem}")
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
        shards=gather.encode(LAYOUT.shard("dense", "{{kind}}")),
        table=LAYOUT.data("{kind}"),
    output:
        vectors=LAYOUT.dense_vectors("{kind}"),
    log:
        LAYOUT.log("dense_encode_{kind}"),
    benchmark:
        LAYOUT.benchmark("dense_encode_{kind}")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/gather_vectors.py"


rule dense_neighbors_shard:
    """Exact top-K responses of one shard's block of contexts by inner product (FAISS), chunked: never N x N. On a
    GPU only in the CUDA 12 environment (gpus.cuda: "12", faiss-gpu) with a dense device that can use one."""
    input:
        queries_vectors=LAYOUT.dense()["queries"],
        docs_vectors=LAYOUT.dense()["docs"],
        queries=LAYOUT.data("queries"),
        qrels=LAYOUT.data("qrels"),
        candidates=LAYOUT.data("candidates"),
    output:
        neighbors=temp(LAYOUT.shard("dense", "neighbors")),
    params:
        k=config["dense"]["neighbors_k"],
        within_split=config["dense"]["neighbors_within_split"],
    priority: 10  # the neighbours gate HCL's train jobs: start them before the train jobs that need nothing
    threads: config["dense"]["threads"]
    log:
        LAYOUT.log("dense_neighbors_shard/{scatteritem}"),
    benchmark:
        LAYOUT.benchmark("dense_neighbors_shard/{scatteritem}")
    resources:
        mem_mb=8000,
        gpu=gpus(neighbors_device(config)),  # 0 in the CUDA 13 environment, whose FAISS is faiss-cpu
    conda:
        CONDA_ENVS["cpu"] if neighbors_device(config) == "cpu" else CONDA_ENVS["gpu"]
    script:
        "../workflow_scripts/dense_neighbors_shard.py"


rule dense_neighbors:
    """Exact top-K responses of every context, gathered from the shards."""
    input:
        shards=gather.neighbors(LAYOUT.shard("dense", "neighbors")),
    output:
        neighbors=LAYOUT.dense()["neighbors"],
    params:
        table="neighbors",
        k=config["dense"]["neighbors_k"],  # cuts the row groups, as in the unsharded table
    log:
        LAYOUT.log("dense_neighbors"),
    benchmark:
        LAYOUT.benchmark("dense_neighbors")
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
        neighbors=LAYOUT.dense()["neighbors"],
        queries=LAYOUT.data("queries"),
        qrels=LAYOUT.data("qrels"),
    output:
        summary=LAYOUT.dense()["positive_ranks"],
    params:
        k=config["dense"]["neighbors_k"],
        relevant_min=config["dataset"]["relevant_min"],
    log:
        LAYOUT.log("dense_positive_ranks"),
    benchmark:
        LAYOUT.benchmark("dense_positive_ranks")
    resources:
        mem_mb=2000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/dense_positive_ranks.py"

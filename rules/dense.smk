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
    threads: config["dense"]["threads"]
    log:
        f"{LOGS}/dense_biencoder.log",
    benchmark:
        f"{BENCHMARKS}/dense_biencoder.tsv"
    resources:
        mem_mb=8000,
        gpu=1 if config["dense"]["device"] == "cuda" else 0,
    script:
        "../workflow_scripts/dense_biencoder.py"


rule dense_encode:
    """Unit-norm MiniLM embeddings of every query (context) or doc (response)."""
    input:
        unpack(biencoder_input),
        table=f"{RESULTS}/data/{{kind}}.parquet",
    output:
        vectors=f"{RESULTS}/dense/{{kind}}.parquet",
    params:
        dense=section("dense", "model", "layers", "max_length", "query_truncation", "batch_size", "device", "precision"),
    threads: config["dense"]["threads"]
    log:
        f"{LOGS}/dense_encode_{{kind}}.log",
    benchmark:
        f"{BENCHMARKS}/dense_encode_{{kind}}.tsv"
    resources:
        mem_mb=6000,
        gpu=1 if config["dense"]["device"] == "cuda" else 0,
    script:
        "../workflow_scripts/dense_encode.py"


rule dense_neighbors:
    """Exact top-K responses of every context by inner product (FAISS), chunked: never N x N."""
    input:
        queries_vectors=dense_outputs()["queries"],
        docs_vectors=dense_outputs()["docs"],
        queries=ingest_outputs()["queries"],
        qrels=ingest_outputs()["qrels"],
        candidates=ingest_outputs()["candidates"],
    output:
        neighbors=dense_outputs()["neighbors"],
    params:
        k=config["dense"]["neighbors_k"],
        within_split=config["dense"]["neighbors_within_split"],
    threads: config["dense"]["threads"]
    log:
        f"{LOGS}/dense_neighbors.log",
    benchmark:
        f"{BENCHMARKS}/dense_neighbors.tsv"
    resources:
        mem_mb=8000,
    script:
        "../workflow_scripts/dense_neighbors.py"

rule bm25_index:
    """Lucene (Anserini) index of every document, for BM25."""
    input:
        docs=ingest_outputs()["docs"],
    output:
        index=directory(bm25_outputs()["index"]),
    params:
        heap=config["bm25"]["heap"],
    threads: config["bm25"]["threads"]
    log:
        f"{LOGS}/bm25_index.log",
    benchmark:
        f"{BENCHMARKS}/bm25_index.tsv"
    resources:
        mem_mb=6000,
    script:
        "../workflow_scripts/bm25_index.py"


rule bm25_run:
    """BM25 top-k of every query of every split (Parquet and TREC run)."""
    input:
        index=bm25_outputs()["index"],
        queries=ingest_outputs()["queries"],
    output:
        run=bm25_outputs()["run"],
        trec=bm25_outputs()["trec"],
    params:
        bm25=section("bm25", "k", "k1", "b", "query_turns", "heap"),
    threads: config["bm25"]["threads"]
    log:
        f"{LOGS}/bm25_run.log",
    benchmark:
        f"{BENCHMARKS}/bm25_run.tsv"
    resources:
        mem_mb=6000,
    script:
        "../workflow_scripts/bm25_run.py"


rule bm25_candidate_scores:
    """Lucene BM25 score of every (query, candidate) pair, also those outside the top k."""
    input:
        index=bm25_outputs()["index"],
        queries=ingest_outputs()["queries"],
        candidates=ingest_outputs()["candidates"],
    output:
        scores=bm25_outputs()["candidate_scores"],
    params:
        bm25=section("bm25", "k1", "b", "query_turns", "heap"),
    log:
        f"{LOGS}/bm25_candidate_scores.log",
    benchmark:
        f"{BENCHMARKS}/bm25_candidate_scores.tsv"
    resources:
        mem_mb=6000,
    script:
        "../workflow_scripts/bm25_candidate_scores.py"

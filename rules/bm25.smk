rule bm25_index:
    """Lucene (Anserini) index of every document, for BM25."""
    input:
        docs=LAYOUT.data("docs"),
    output:
        index=directory(LAYOUT.bm25()["index"]),
    params:
        heap=config["bm25"]["heap"],
    threads: config["bm25"]["threads"]
    log:
        LAYOUT.log("bm25_index"),
    benchmark:
        LAYOUT.benchmark("bm25_index")
    resources:
        mem_mb=6000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/bm25_index.py"


rule bm25_run_shard:
    """BM25 top-k of one shard's block of queries (scatter; `shards.bm25` shards)."""
    input:
        index=LAYOUT.bm25()["index"],
        queries=LAYOUT.data("queries"),
    output:
        run=temp(LAYOUT.shard("bm25", "run")),
    params:
        bm25=PLAN.section("bm25", "k", "k1", "b", "query_turns", "heap"),
    threads: config["bm25"]["threads"]
    log:
        LAYOUT.log("bm25_run_shard/{scatteritem}"),
    benchmark:
        LAYOUT.benchmark("bm25_run_shard/{scatteritem}")
    resources:
        mem_mb=6000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/bm25_run_shard.py"


rule bm25_run:
    """BM25 top-k of every query of every split (Parquet and TREC run), gathered from the shards."""
    input:
        shards=gather.bm25(LAYOUT.shard("bm25", "run")),
    output:
        run=LAYOUT.bm25()["run"],
        trec=LAYOUT.bm25()["trec"],
    params:
        k=config["bm25"]["k"],  # cuts the row groups, as in the unsharded table
    log:
        LAYOUT.log("bm25_run"),
    benchmark:
        LAYOUT.benchmark("bm25_run")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/gather_run.py"


rule bm25_candidate_scores_shard:
    """Lucene BM25 score of every (query, candidate) pair of one shard's queries, also those outside the top k."""
    input:
        index=LAYOUT.bm25()["index"],
        queries=LAYOUT.data("queries"),
        candidates=LAYOUT.data("candidates"),
    output:
        scores=temp(LAYOUT.shard("bm25", "candidate_scores")),
    params:
        bm25=PLAN.section("bm25", "k1", "b", "query_turns", "heap"),
    log:
        LAYOUT.log("bm25_candidate_scores_shard/{scatteritem}"),
    benchmark:
        LAYOUT.benchmark("bm25_candidate_scores_shard/{scatteritem}")
    resources:
        mem_mb=6000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/bm25_candidate_scores_shard.py"


rule bm25_candidate_scores:
    """Lucene BM25 score of every (query, candidate) pair, gathered from the shards."""
    input:
        shards=gather.bm25(LAYOUT.shard("bm25", "candidate_scores")),
    output:
        scores=LAYOUT.bm25()["candidate_scores"],
    params:
        table="candidate_scores",
    log:
        LAYOUT.log("bm25_candidate_scores"),
    benchmark:
        LAYOUT.benchmark("bm25_candidate_scores")
    resources:
        mem_mb=4000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/gather_table.py"


rule bm25_tune:
    """BM25's (k1, b) tuned on the dev queries over the `bm25.tune` grid (one index, no re-indexing); the dev and
    test candidates scored with the chosen point: the reference ranker `bm25_tuned` (MacAvaney et al. 2020)."""
    input:
        index=LAYOUT.bm25()["index"],
        queries=LAYOUT.data("queries"),
        candidates=LAYOUT.data("candidates"),
        qrels=LAYOUT.data("qrels"),
    output:
        grid=LAYOUT.bm25()["tuned_grid"],
        scores=LAYOUT.bm25()["tuned_scores"],
    params:
        tune={key: config["bm25"]["tune"][key] for key in ("k1", "b", "measure")},
        default=PLAN.section("bm25", "k1", "b"),
        bm25=PLAN.section("bm25", "query_turns", "heap"),
        relevant_min=config["dataset"]["relevant_min"],
        seed=PLAN.bm25_tune_seed(),
    log:
        LAYOUT.log("bm25_tune"),
    benchmark:
        LAYOUT.benchmark("bm25_tune")
    resources:
        mem_mb=6000,
    conda:
        CONDA_ENVS["cpu"]
    script:
        "../workflow_scripts/bm25_tune.py"

"""The first-stage precomputation stages: BM25 (Lucene) and the bi-encoder (MiniLM + FAISS), file to file.

Each function here is one Snakemake rule's whole job: read the ingest tables (checked against their contracts),
call :mod:`curricula.retrieval.bm25` or :mod:`curricula.retrieval.dense`, write the stage's outputs atomically. The
rules in
``rules/bm25.smk`` and ``rules/dense.smk`` pass only their own config section as params, so changing a training
knob never re-runs these stages.

Outputs (paths relative to ``results/<dataset>/``):

* ``bm25/index/``: the Lucene index of ``data/docs.parquet``;
* ``bm25/run.parquet`` (``RUN``: qid, docid, rank, score) and ``bm25/run.trec``: the top ``k`` of every query of every
  split (MacAvaney et al. 2020 §3.3 derive D_recip/D_norm/D_kde from it);
* ``bm25/candidate_scores.parquet`` (``CANDIDATE_SCORES``): the Lucene BM25 score of every (query, candidate) pair,
  also those outside the top k (Penha & Hauff 2020 Table 2's sigma_BM25 needs all of them);
* ``bm25/tuned/grid.parquet`` (``bm25_tuning.GRID``) and ``bm25/tuned/candidate_scores.parquet``
  (``CANDIDATE_SCORES``, dev and test candidates): (k1, b) tuned on dev, the reference ranker ``bm25_tuned``
  (MacAvaney et al. 2020);
* ``dense/biencoder/`` (when G is fine-tuned: ``dense.finetune.enabled``, null = when a curriculum uses G): context
  and response encoders fine-tuned with in-batch negatives on the train split (Su et al. 2021 §3.4 eq. 4);
* ``dense/queries.parquet``, ``dense/docs.parquet`` (``VECTORS``): unit-norm embeddings;
* ``dense/neighbors.parquet`` (``NEIGHBORS``): for every query the top-K docs by inner product, rank 1 = most
  similar; with ``within_split`` a query's pool is the docs its own split references (so a train context's
  neighbours never include a test response);
* ``dense/positive_ranks.parquet`` (``dense.POSITIVE_RANKS``): per split, where G ranks each context's true reply
  among those neighbours (median rank, shares at rank 1 / top 10 / top 100 / top K / outside).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curricula.plumbing.contracts import (
    CANDIDATE_SCORES,
    CANDIDATES,
    DOCS,
    NEIGHBORS,
    QRELS,
    QUERIES,
    RUN,
    SPLITS,
    TEACHER_SCORES,
    VECTORS,
    TableSpec,
    read_table,
    scan_table,
    write_table,
    write_trec_run,
)
from curricula.plumbing.row_groups import group_size, iter_row_groups, write_grouped_table
from curricula.plumbing.shards import WHOLE, Shard, block, gather_tables
from curricula.retrieval import bm25, bm25_tuning
from curricula.retrieval.similarity import vectors_to_numpy

log = logging.getLogger(__name__)

#: Run tag of the BM25 TREC run file.
BM25_TAG = "bm25"
#: queries per BM25 batch search (their hits are written before the next batch is searched; bm25.search_blocks)
SEARCH_BLOCK = 8192


# ------------------------------------------------------------------------------------------------------ BM25
def bm25_index_stage(docs_path: str | Path, index_dir: str | Path, *, threads: int = 1, heap: str = "4g") -> dict:
    """Index ``data/docs.parquet`` with Lucene (Anserini) into ``index_dir``; returns index stats."""
    bm25.start_jvm(heap)
    return bm25.build_index(read_table(docs_path, DOCS), index_dir, threads=threads)


def bm25_query_frame(queries_path: str | Path, query_turns: int | None, shard: Shard = WHOLE) -> pl.DataFrame:
    """(qid, text) BM25 searches with: the whole query/context, or its last ``query_turns`` turns.

    With ``shard`` only that shard's contiguous block of queries (:func:`curricula.plumbing.shards.block`).
    """
    queries = read_table(queries_path, QUERIES)
    return bm25.query_text(queries[block(queries.height, shard)], query_turns)


def bm25_run_stage(
    index_dir: str | Path,
    queries_path: str | Path,
    run_path: str | Path,
    trec_path: str | Path | None,
    *,
    k: int = 100,
    k1: float = 0.9,
    b: float = 0.4,
    query_turns: int | None = None,
    threads: int = 1,
    heap: str = "4g",
    shard: Shard = WHOLE,
) -> dict:
    """BM25 top-``k`` of every query of every split, as ``bm25/run.parquet`` and a TREC run file.

    A query with no terms after analysis (stopwords only) or matching no document has no rows; their count and
    example qids are logged (documented behaviour, not an error). With ``shard`` (rule ``bm25_run_shard``) only
    that shard's queries are searched and ``trec_path`` may be None; :func:`gather_run_stage` joins the shards.
    """
    bm25.start_jvm(heap)
    queries = bm25_query_frame(queries_path, query_turns, shard)
    stats: dict[str, Any] = {}
    blocks = bm25.search_blocks(index_dir, queries, k, k1, b, threads, block=SEARCH_BLOCK, stats=stats)
    write_grouped_table(blocks, run_path, RUN, by="qid", size=group_size(k))
    if stats["n_no_terms"] or stats["n_no_match"]:
        log.warning("BM25: %d queries without terms after analysis (e.g. %s) and %d matching no document "
                    "(e.g. %s) have no run rows", stats["n_no_terms"], stats["no_terms_qids"][:3],
                    stats["n_no_match"], stats["no_match_qids"][:3])
    if trec_path is not None:
        write_trec_run(iter_row_groups(run_path, RUN), trec_path, BM25_TAG)
    return stats


def gather_run_stage(shard_paths: Sequence[str | Path], run_path: str | Path, trec_path: str | Path, *,
                     k: int = 100) -> int:
    """Rule ``bm25_run``: the shards of ``bm25_run_shard`` as ``bm25/run.parquet`` and the TREC run; returns rows.

    Both are written a row group at a time (``k`` is the run's depth, which cuts the row groups)."""
    rows = gather_stage("run", shard_paths, run_path, k=k)
    write_trec_run(iter_row_groups(run_path, RUN), trec_path, BM25_TAG)
    return rows


def bm25_candidates_stage(
    index_dir: str | Path,
    queries_path: str | Path,
    candidates_path: str | Path,
    out_path: str | Path,
    *,
    k1: float = 0.9,
    b: float = 0.4,
    query_turns: int | None = None,
    heap: str = "4g",
    shard: Shard = WHOLE,
) -> int:
    """Lucene's BM25 score of every (query, candidate) pair into ``bm25/candidate_scores.parquet``; returns rows.

    With ``shard`` only the candidates of that shard's block of queries.
    """
    bm25.start_jvm(heap)
    queries = read_table(queries_path, QUERIES)
    mine = block(queries.height, shard)
    # drop the other shards' candidates only: a candidate of an unknown query still fails in score_candidates
    elsewhere = pl.concat([queries[: mine.start], queries[mine.stop :]])["qid"]
    candidates = read_table(candidates_path, CANDIDATES).filter(~pl.col("qid").is_in(elsewhere.implode()))
    scores = bm25.score_candidates(index_dir, bm25.query_text(queries[mine], query_turns), candidates, k1=k1, b=b,
                                   progress=True)
    write_table(scores, out_path, CANDIDATE_SCORES)
    return scores.height


def bm25_tune_stage(
    index_dir: str | Path,
    data: Mapping[str, str | Path],
    grid_path: str | Path,
    scores_path: str | Path,
    *,
    tune: Mapping[str, Any],
    k1: float = 0.9,
    b: float = 0.4,
    query_turns: int | None = None,
    heap: str = "4g",
    relevant_min: int = 1,
    seed: int | None = None,
) -> dict:
    """Rule ``bm25_tune``: BM25's (k1, b) tuned on dev (:func:`curricula.retrieval.bm25_tuning.tune`) into
    ``bm25/tuned/``.

    ``data`` names the ingest queries, candidates and qrels; ``tune`` is the config's ``bm25.tune`` (k1 and b grids,
    measure); ``k1``/``b`` are the untuned defaults (the tie-break's anchor); the query text is built exactly as for
    ``bm25/candidate_scores.parquet`` (``query_turns``). Writes the grid table and the tuned dev+test candidate
    scores; returns the chosen point and its dev value.
    """
    bm25.start_jvm(heap)
    queries = read_table(data["queries"], QUERIES)
    text = bm25.query_text(queries, query_turns).join(queries.select("qid", "split"), on="qid")
    grid, scores = bm25_tuning.tune(
        index_dir, text, read_table(data["candidates"], CANDIDATES), read_table(data["qrels"], QRELS),
        k1_grid=tune["k1"], b_grid=tune["b"], measure=tune.get("measure", "AP"), default_k1=k1, default_b=b,
        relevant_min=relevant_min, seed=seed or 0, progress=True,
    )
    write_table(grid, grid_path, bm25_tuning.GRID)
    write_table(scores, scores_path, CANDIDATE_SCORES)
    chosen = grid.filter(pl.col("chosen")).row(0, named=True)
    return {"k1": chosen["k1"], "b": chosen["b"], "measure": chosen["measure"], "value": chosen["value"],
            "n_scores": scores.height}


# ------------------------------------------------------------------------------------------------ bi-encoder
def positive_pairs(queries: pl.DataFrame, docs: pl.DataFrame, qrels: pl.DataFrame,
                   split: str = "train") -> pl.DataFrame:
    """(qid, docid, context, response) of every relevant (rel > 0) pair of ``split``, sorted by qid, docid."""
    return (
        qrels.filter(pl.col("rel") > 0)
        .join(queries.filter(pl.col("split") == split).select("qid", pl.col("text").alias("context")), on="qid")
        .join(docs.select("docid", pl.col("text").alias("response")), on="docid")
        .select("qid", "docid", "context", "response")
        .sort("qid", "docid")
    )


#: word pieces G encodes a text to when it is used as shipped (all-MiniLM-L6-v2 was trained on 128)
SHIPPED_DENSE_LENGTH = 128
#: word pieces G is fine-tuned on when ``dense.finetune.max_length`` is not given (the schema's default)
FINETUNE_DENSE_LENGTH = 64


def biencoder_stage(data: Mapping[str, str | Path], out_dir: str | Path, cfg: Mapping[str, Any], seed: int) -> dict:
    """Fine-tune context and response encoders on the train split's positive pairs (Su et al. 2021 eq. 4).

    ``data`` names the ingest tables (queries, docs, qrels); ``cfg`` is the config's ``dense`` section.
    """
    from curricula.models.hf import set_threads
    from curricula.retrieval.biencoder import finetune_biencoder

    set_threads(cfg.get("threads"))
    ft = cfg.get("finetune") or {}
    pairs = positive_pairs(read_table(data["queries"], QUERIES), read_table(data["docs"], DOCS),
                           read_table(data["qrels"], QRELS))
    log.info("bi-encoder fine-tuning on %d positive train pairs", pairs.height)
    return finetune_biencoder(
        pairs["context"].to_list(), pairs["response"].to_list(), cfg.get("model", "minilm"), out_dir,
        steps=ft.get("steps", 500), batch_size=ft.get("batch_size", 32), lr=ft.get("lr", 2e-5),
        max_length=ft.get("max_length", FINETUNE_DENSE_LENGTH), layers=ft.get("layers"), seed=seed,
        device=cfg.get("device", "auto"), precision=cfg.get("precision", "auto"),
        context_truncation_side=cfg.get("query_truncation", "left"),
    )


def encoder_dir(cfg: Mapping[str, Any], kind: str, biencoder_dir: str | Path | None) -> str | Path:
    """The model that encodes ``kind`` ('queries' or 'docs'): a fine-tuned half, or the configured model."""
    from curricula.retrieval.biencoder import CONTEXT_DIR, RESPONSE_DIR

    if biencoder_dir:
        return Path(biencoder_dir) / (CONTEXT_DIR if kind == "queries" else RESPONSE_DIR)
    return cfg.get("model", "minilm")


def dense_max_length(config: Mapping[str, Any], finetuned: bool) -> int:
    """Word pieces a text is cut to when G encodes it (config ``dense.max_length``): as set, or, when null, the
    length G was fine-tuned at (``dense.finetune.max_length``) when it is fine-tuned (``finetuned``,
    :func:`curricula.experiments.specs.finetune_dense_model`), so that G encodes texts as it was trained on them, else
    :data:`SHIPPED_DENSE_LENGTH`."""
    dense = config.get("dense") or {}
    if dense.get("max_length") is not None:
        return int(dense["max_length"])
    if finetuned:
        return int((dense.get("finetune") or {}).get("max_length") or FINETUNE_DENSE_LENGTH)
    return SHIPPED_DENSE_LENGTH


def encode_stage(
    kind: str,
    table_path: str | Path,
    out_path: str | Path,
    cfg: Mapping[str, Any],
    biencoder_dir: str | Path | None = None,
    shard: Shard = WHOLE,
) -> int:
    """Encode every query (``kind='queries'``) or doc (``'docs'``) into a ``VECTORS`` table; returns rows.

    With ``shard`` (rule ``dense_encode_shard``) only that shard's batches of texts (:mod:`curricula.plumbing.shards`).

    Queries are dialogue contexts or questions; ``dense.query_truncation`` (default left) decides which end of a
    context longer than ``max_length`` word pieces is kept (null: :func:`dense_max_length`). Layers are cut only
    for a model that was not fine-tuned here (a fine-tuned bi-encoder already has the layers it was trained with).
    """
    from curricula.models.hf import set_threads
    from curricula.retrieval import dense

    if kind not in ("queries", "docs"):
        raise ValueError(f"kind must be 'queries' or 'docs', got {kind!r}")
    set_threads(cfg.get("threads"))
    if kind == "queries":
        table = read_table(table_path, QUERIES, columns=["qid", "text"]).select(pl.col("qid").alias("id"), "text")
        side = cfg.get("query_truncation", "left")
    else:
        table = read_table(table_path, DOCS).select(pl.col("docid").alias("id"), "text")
        side = "right"
    vectors = dense.encode(
        table["text"].to_list(), table["id"].to_list(), encoder_dir(cfg, kind, biencoder_dir),
        max_length=dense_max_length({"dense": cfg}, biencoder_dir is not None), batch_size=cfg.get("batch_size", 64),
        layers=None if biencoder_dir else cfg.get("layers"), device=cfg.get("device", "auto"),
        precision=cfg.get("precision", "auto"), truncation_side=side, progress=True, shard=shard,
    )
    write_table(vectors, out_path, VECTORS)
    return vectors.height


def gather_vectors_stage(kind: str, shard_paths: Sequence[str | Path], table_path: str | Path,
                         out_path: str | Path) -> int:
    """Rule ``dense_encode``: the shards of ``dense_encode_shard`` as one ``VECTORS`` table in the order of the
    ingest table at ``table_path`` (every id exactly once); returns rows."""
    spec, key = (QUERIES, "qid") if kind == "queries" else (DOCS, "docid")
    ids = read_table(table_path, spec).select(pl.col(key).alias("id"))
    parts = gather_tables(shard_paths, VECTORS, ["id"])
    vectors = ids.join(parts, on="id", how="left", maintain_order="left")
    missing = vectors.filter(pl.col("vector").is_null())
    if missing.height or parts.height != ids.height:
        raise ValueError(f"{shard_paths[0]}: the {len(shard_paths)} shards hold {parts.height} vectors for "
                         f"{ids.height} {kind} in {table_path} (e.g. missing {missing['id'][:3].to_list()})")
    write_table(vectors, out_path, VECTORS)
    return vectors.height


def split_doc_pools(queries: pl.DataFrame, qrels: pl.DataFrame, candidates: pl.DataFrame) -> dict[str, pl.Series]:
    """The docids each split references (through its queries' candidates and qrels), sorted, per split."""
    refs = pl.concat([qrels.select("qid", "docid"), candidates.select("qid", "docid")])
    refs = refs.join(queries.select("qid", "split"), on="qid")
    return {s: refs.filter(pl.col("split") == s)["docid"].unique().sort() for s in SPLITS}


def neighbors_stage(
    query_vectors: str | Path,
    doc_vectors: str | Path,
    data: Mapping[str, str | Path],
    out_path: str | Path,
    *,
    k: int = 1000,
    within_split: bool = True,
    chunk_size: int = 1024,
    threads: int | None = None,
    shard: Shard = WHOLE,
    device: str = "cpu",
) -> int:
    """Exact top-``k`` docs by inner product for every query into ``dense/neighbors.parquet``; returns rows.

    With ``within_split`` each split's queries search only the docs that split references (``data`` names the
    ingest queries, qrels and candidates tables); otherwise every query searches every doc. ``k`` is capped at the
    pool size. FAISS ``IndexFlatIP`` on the CPU (fp32 on the card with a CUDA ``device`` and FAISS's GPU build),
    chunked: never an N x N matrix. With ``shard`` (rule ``dense_neighbors_shard``) only that shard's block of queries.

    Streaming: queries are searched ``chunk_size`` at a time in qid order and each chunk's rows go straight to disk
    in row groups of whole queries (:func:`curricula.retrieval.dense.neighbor_chunks`, :func:`write_grouped_table`):
    memory is the vectors and one chunk, not the queries x k table (131M rows for the whole chitchat corpus).
    """
    import faiss

    from curricula.retrieval import dense

    if threads:
        faiss.omp_set_num_threads(int(threads))
    qv = read_table(query_vectors, VECTORS).sort("id")
    qv = qv[block(qv.height, shard)]
    qids, Q = qv["id"], vectors_to_numpy(qv)
    del qv
    dv = read_table(doc_vectors, VECTORS)
    if not within_split:
        pools = [(dv["id"], vectors_to_numpy(dv))]
        pool_of = np.zeros(len(qids), dtype=np.int64)
    else:
        queries = read_table(data["queries"], QUERIES, columns=["qid", "split"])
        refs = split_doc_pools(queries, read_table(data["qrels"], QRELS, columns=["qid", "docid"]),
                               read_table(data["candidates"], CANDIDATES))
        pools = []
        for split in SPLITS:
            d = dv.filter(pl.col("id").is_in(refs[split].implode()))
            pools.append((d["id"], vectors_to_numpy(d)))
        split_of = qids.to_frame("qid").join(queries, on="qid", how="left", maintain_order="left")["split"]
        if split_of.null_count():
            raise ValueError(f"{query_vectors}: {split_of.null_count()} query vector(s) of queries not in "
                             f"{data['queries']}")
        pool_of = split_of.replace_strict(list(SPLITS), list(range(len(SPLITS))), return_dtype=pl.Int64).to_numpy()
        for split, (d, _) in zip(SPLITS, pools):
            n_q = int((pool_of == SPLITS.index(split)).sum())
            if n_q:
                log.info("neighbours of split %s: %d queries among %d docs (k=%d)", split, n_q, d.len(),
                         min(k, d.len()))
    del dv
    chunks = dense.neighbor_chunks(qids, Q, pools, pool_of, k, chunk_size=chunk_size, device=device)
    return write_grouped_table(chunks, out_path, NEIGHBORS, by="qid", size=group_size(k))


def positive_ranks_stage(neighbors_path: str | Path, data: Mapping[str, str | Path], out_path: str | Path, *,
                         k: int, relevant_min: int = 1) -> pl.DataFrame:
    """Rule ``dense_positive_ranks``: where G ranks each context's true reply among its top ``k`` neighbours, one
    row per split (:func:`curricula.retrieval.dense.positive_rank_summary`) written to ``out_path``, each row logged.

    ``data`` names the ingest queries and qrels tables; the neighbours table is scanned lazily and joined with the
    relevant pairs only (:func:`curricula.retrieval.dense.positive_ranks`), never read whole.
    """
    from curricula.retrieval import dense

    queries = read_table(data["queries"], QUERIES, columns=["qid", "split"])
    qrels = read_table(data["qrels"], QRELS)
    ranks = dense.positive_ranks(scan_table(neighbors_path, NEIGHBORS), qrels, queries, relevant_min)
    summary = dense.positive_rank_summary(ranks, k)
    write_table(summary, out_path, dense.POSITIVE_RANKS)
    for row in summary.iter_rows(named=True):
        log.info("G ranks the true reply of %s's %d contexts: at 1 %.1f%%, top 10 %.1f%%, top 100 %.1f%%, top %d "
                 "%.1f%%, outside %.1f%%; median rank %g (rank 1 = best, outside top %d counted as %d)",
                 row["split"], row["queries"], 100 * row["at_1"], 100 * row["top_10"], 100 * row["top_100"], k,
                 100 * row["top_k"], 100 * row["outside_k"], row["median_rank"], k, k + 1)
    return summary


#: The contract and row order of each sharded table gathered whole (the unsharded stage writes the same order).
GATHERED = {
    "candidate_scores": (CANDIDATE_SCORES, ["qid", "docid"]),
    "teacher_scores": (TEACHER_SCORES, ["qid", "docid"]),
}


#: The contract of each table of (query x k) rows whose shards are gathered streaming, in row groups of whole
#: queries (in qid order, then rank, as the unsharded stage writes them).
STREAMED = {
    "run": RUN,
    "neighbors": NEIGHBORS,
}


def gather_stage(table: str, shard_paths: Sequence[str | Path], out_path: str | Path,
                 k: int | None = None) -> int:
    """Rules ``bm25_run``, ``bm25_candidate_scores``, ``dense_neighbors`` and ``teacher_score``: concatenate the
    shard tables of ``table`` (a key of :data:`STREAMED` or :data:`GATHERED`) in the unsharded stage's row order
    and write them; returns the number of rows.

    The query x k tables (:data:`STREAMED`; ``k`` their per-query depth) are copied a row group at a time into
    the unsharded stage's row groups (:func:`gathered_groups`): the shards cut the queries in qid order, so their
    concatenation is in order and is never held whole.
    """
    if table in STREAMED:
        if k is None:
            raise ValueError(f"gathering '{table}' needs k, the per-query depth its row groups are cut by")
        spec = STREAMED[table]
        return write_grouped_table(gathered_groups(shard_paths, spec), out_path, spec, by="qid", size=group_size(k))
    spec, order = GATHERED[table]
    out = gather_tables(shard_paths, spec, order)
    write_table(out, out_path, spec)
    return out.height


def gathered_groups(shard_paths: Sequence[str | Path], spec: TableSpec) -> Iterator[pl.DataFrame]:
    """The row groups of the shard tables in shard order (each checked; a stream for write_grouped_table)."""
    if not shard_paths:
        raise ValueError(f"no shard files to gather for table '{spec.name}'")
    for path in shard_paths:
        yield from iter_row_groups(path, spec)

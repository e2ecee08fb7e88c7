"""The first-stage precomputation: BM25 (Lucene) runs, candidate scores and (k1, b) tuning, and the bi-encoder G
(MiniLM + FAISS): its fine-tuning, the encoding and the neighbours.

The rules of ``rules/bm25.smk`` and ``rules/dense.smk`` call these through their entry points,
:mod:`curricula.stages.bm25` and :mod:`curricula.stages.dense`, which read the ingest tables (checked against their
contracts) and write the outputs atomically; the two tables of (query x k) rows, the BM25 run and the neighbours,
are streamed to disk here a row group at a time, never held whole. The rules pass only their own config section as
params, so changing a training knob never re-runs these stages.

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curricula.plumbing.contracts import (
    CANDIDATES,
    DOCS,
    NEIGHBORS,
    QRELS,
    QUERIES,
    RUN,
    SPLITS,
    VECTORS,
    TableSpec,
    read_table,
)
from curricula.plumbing.row_groups import group_size, write_grouped_table
from curricula.plumbing.shards import WHOLE, Shard, block, gather_tables
from curricula.retrieval import bm25, bm25_tuning
from curricula.retrieval.similarity import vectors_to_numpy
from curricula.training.spec import Runtime

log = logging.getLogger(__name__)

#: Run tag of the BM25 TREC run file.
BM25_TAG = "bm25"
#: queries per BM25 batch search (their hits are written before the next batch is searched; bm25.search_blocks)
SEARCH_BLOCK = 8192


# ------------------------------------------------------------------------------------------------------ BM25
def write_bm25_run(index_dir: str | Path, queries: pl.DataFrame, run_path: str | Path, *, k: int = 100,
                   k1: float = 0.9, b: float = 0.4, query_turns: int | None = None, threads: int = 1,
                   shard: Shard = WHOLE) -> dict:
    """BM25 top-``k`` of ``shard``'s block of ``queries`` (:func:`curricula.plumbing.shards.block`), searched
    :data:`SEARCH_BLOCK` queries at a time and streamed into ``run_path`` (``RUN``); returns the search's stats.

    The JVM must be started (:func:`curricula.retrieval.bm25.start_jvm`). The query text is the whole context or
    its last ``query_turns`` turns. A query with no terms after analysis (stopwords only) or matching no document
    has no rows; their count and example qids are logged (documented behaviour, not an error).
    """
    text = bm25.query_text(queries[block(queries.height, shard)], query_turns)
    stats: dict[str, Any] = {}
    blocks = bm25.search_blocks(index_dir, text, k, k1, b, threads, block=SEARCH_BLOCK, stats=stats)
    write_grouped_table(blocks, run_path, RUN, by="qid", size=group_size(k))
    if stats["n_no_terms"] or stats["n_no_match"]:
        log.warning("BM25: %d queries without terms after analysis (e.g. %s) and %d matching no document "
                    "(e.g. %s) have no run rows", stats["n_no_terms"], stats["no_terms_qids"][:3],
                    stats["n_no_match"], stats["no_match_qids"][:3])
    return stats


def bm25_candidate_scores(index_dir: str | Path, queries: pl.DataFrame, candidates: pl.DataFrame, *,
                          k1: float = 0.9, b: float = 0.4, query_turns: int | None = None,
                          shard: Shard = WHOLE) -> pl.DataFrame:
    """Lucene's BM25 score (``CANDIDATE_SCORES``) of every (query, candidate) pair of ``shard``'s block of
    ``queries``, also those outside the top k. The JVM must be started."""
    mine = block(queries.height, shard)
    # drop the other shards' candidates only: a candidate of an unknown query still fails in score_candidates
    elsewhere = pl.concat([queries[: mine.start], queries[mine.stop :]])["qid"]
    candidates = candidates.filter(~pl.col("qid").is_in(elsewhere.implode()))
    return bm25.score_candidates(index_dir, bm25.query_text(queries[mine], query_turns), candidates, k1=k1, b=b,
                                 progress=True)


def tune_bm25(index_dir: str | Path, queries: pl.DataFrame, candidates: pl.DataFrame, qrels: pl.DataFrame, *,
              tune: Mapping[str, Any], k1: float = 0.9, b: float = 0.4, query_turns: int | None = None,
              relevant_min: int = 1, seed: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """BM25's (k1, b) tuned on dev (:func:`curricula.retrieval.bm25_tuning.tune`): the grid table and the tuned
    dev+test candidate scores. The JVM must be started.

    ``tune`` is the config's ``bm25.tune`` (k1 and b grids, measure); ``k1``/``b`` are the untuned defaults (the
    tie-break's anchor); the query text is built exactly as for ``bm25/candidate_scores.parquet`` (``query_turns``).
    """
    text = bm25.query_text(queries, query_turns).join(queries.select("qid", "split"), on="qid")
    return bm25_tuning.tune(
        index_dir, text, candidates, qrels, k1_grid=tune["k1"], b_grid=tune["b"], measure=tune.get("measure", "AP"),
        default_k1=k1, default_b=b, relevant_min=relevant_min, seed=seed or 0, progress=True,
    )


def tuned_point(grid: pl.DataFrame, scores: pl.DataFrame) -> dict:
    """The (k1, b) a tuning chose, its measure and dev value, and how many candidate scores it wrote."""
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


def finetune_g(queries: pl.DataFrame, docs: pl.DataFrame, qrels: pl.DataFrame, out_dir: str | Path,
               cfg: Mapping[str, Any], seed: int) -> dict:
    """Fine-tune context and response encoders on the train split's positive pairs (Su et al. 2021 eq. 4) into
    ``out_dir``; returns the fine-tuning's stats. ``cfg`` is the config's ``dense`` section (with ``threads``)."""
    from curricula.models.runtime import start_job
    from curricula.retrieval.biencoder import finetune_biencoder

    runtime = start_job(Runtime.of_section(cfg, cfg.get("threads")), True, "fine-tuning G")
    ft = cfg.get("finetune") or {}
    pairs = positive_pairs(queries, docs, qrels)
    log.info("bi-encoder fine-tuning on %d positive train pairs", pairs.height)
    return finetune_biencoder(
        pairs["context"].to_list(), pairs["response"].to_list(), cfg.get("model", "minilm"), out_dir,
        steps=ft.get("steps", 500), batch_size=ft.get("batch_size", 32), lr=ft.get("lr", 2e-5),
        max_length=ft.get("max_length", FINETUNE_DENSE_LENGTH), layers=ft.get("layers"), seed=seed,
        context_truncation_side=cfg.get("query_truncation", "left"), runtime=runtime,
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


def _kind_table(kind: str) -> tuple[TableSpec, str]:
    """The ingest contract and key column of the texts of ``kind`` ('queries' or 'docs'; else a ValueError)."""
    if kind not in ("queries", "docs"):
        raise ValueError(f"kind must be 'queries' or 'docs', got {kind!r}")
    return (QUERIES, "qid") if kind == "queries" else (DOCS, "docid")


def read_texts(kind: str, table_path: str | Path) -> pl.DataFrame:
    """(id, text) of every query (``kind='queries'``: the contexts or questions) or doc (``'docs'``) of the ingest
    table at ``table_path``, in its row order (a query's turns are not read)."""
    spec, key = _kind_table(kind)
    columns = ["qid", "text"] if kind == "queries" else None
    return read_table(table_path, spec, columns=columns).select(pl.col(key).alias("id"), "text")


def encode_texts(kind: str, texts: pl.DataFrame, cfg: Mapping[str, Any], biencoder_dir: str | Path | None = None,
                 shard: Shard = WHOLE) -> pl.DataFrame:
    """The ``VECTORS`` of ``texts`` ((id, text) of ``kind``, :func:`read_texts`) with the configured or fine-tuned
    encoder; ``cfg`` is the config's ``dense`` section (with ``threads``).

    With ``shard`` (rule ``dense_encode_shard``) only that shard's batches of texts (:mod:`curricula.plumbing.shards`).
    Queries are dialogue contexts or questions; ``dense.query_truncation`` (default left) decides which end of a
    context longer than ``max_length`` word pieces is kept (null: :func:`dense_max_length`). Layers are cut only
    for a model that was not fine-tuned here (a fine-tuned bi-encoder already has the layers it was trained with).
    """
    from curricula.models.runtime import start_job
    from curricula.retrieval import dense

    _kind_table(kind)
    runtime = start_job(Runtime.of_section(cfg, cfg.get("threads")), True, "encoding")
    side = cfg.get("query_truncation", "left") if kind == "queries" else "right"
    return dense.encode(
        texts["text"].to_list(), texts["id"].to_list(), encoder_dir(cfg, kind, biencoder_dir),
        max_length=dense_max_length({"dense": cfg}, biencoder_dir is not None), batch_size=cfg.get("batch_size", 64),
        layers=None if biencoder_dir else cfg.get("layers"), truncation_side=side, progress=True, shard=shard,
        runtime=runtime,
    )


def gathered_vectors(kind: str, shard_paths: Sequence[str | Path], table_path: str | Path) -> pl.DataFrame:
    """Rule ``dense_encode``: the shards of ``dense_encode_shard`` as one ``VECTORS`` table in the order of the
    ingest table at ``table_path``, every id exactly once (a lost or extra shard is a ValueError naming them)."""
    spec, key = _kind_table(kind)
    ids = read_table(table_path, spec).select(pl.col(key).alias("id"))
    parts = gather_tables(shard_paths, VECTORS, ["id"])
    vectors = ids.join(parts, on="id", how="left", maintain_order="left")
    missing = vectors.filter(pl.col("vector").is_null())
    if missing.height or parts.height != ids.height:
        raise ValueError(f"{shard_paths[0]}: the {len(shard_paths)} shards hold {parts.height} vectors for "
                         f"{ids.height} {kind} in {table_path} (e.g. missing {missing['id'][:3].to_list()})")
    return vectors


def split_doc_pools(queries: pl.DataFrame, qrels: pl.DataFrame, candidates: pl.DataFrame) -> dict[str, pl.Series]:
    """The docids each split references (through its queries' candidates and qrels), sorted, per split."""
    refs = pl.concat([qrels.select("qid", "docid"), candidates.select("qid", "docid")])
    refs = refs.join(queries.select("qid", "split"), on="qid")
    return {s: refs.filter(pl.col("split") == s)["docid"].unique().sort() for s in SPLITS}


def write_neighbors(
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
    memory is the vectors and one chunk, not the queries x k table (131M rows for the whole chitchat corpus). So this
    reads its tables itself, dropping each one as soon as its vectors are out.
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
    if within_split:
        pools, pool_of = _split_pools(dv, qids, data, str(query_vectors), k)
    else:
        pools, pool_of = [(dv["id"], vectors_to_numpy(dv))], np.zeros(len(qids), dtype=np.int64)
    del dv
    chunks = dense.neighbor_chunks(qids, Q, pools, pool_of, k, chunk_size=chunk_size, device=device)
    return write_grouped_table(chunks, out_path, NEIGHBORS, by="qid", size=group_size(k))


def _split_pools(dv: pl.DataFrame, qids: pl.Series, data: Mapping[str, str | Path], source: str,
                 k: int) -> tuple[list[tuple[pl.Series, np.ndarray]], np.ndarray]:
    """Each split's pool of doc vectors (:func:`split_doc_pools`, in :data:`SPLITS` order) and the pool of each
    query of ``qids`` (its split's index); logs each split's search. ``source`` names the query vectors' file."""
    queries = read_table(data["queries"], QUERIES, columns=["qid", "split"])
    refs = split_doc_pools(queries, read_table(data["qrels"], QRELS, columns=["qid", "docid"]),
                           read_table(data["candidates"], CANDIDATES))
    pools = []
    for split in SPLITS:
        d = dv.filter(pl.col("id").is_in(refs[split].implode()))
        pools.append((d["id"], vectors_to_numpy(d)))
    split_of = qids.to_frame("qid").join(queries, on="qid", how="left", maintain_order="left")["split"]
    if split_of.null_count():
        raise ValueError(f"{source}: {split_of.null_count()} query vector(s) of queries not in {data['queries']}")
    pool_of = split_of.replace_strict(list(SPLITS), list(range(len(SPLITS))), return_dtype=pl.Int64).to_numpy()
    for split, (ids, _) in zip(SPLITS, pools):
        n_q = int((pool_of == SPLITS.index(split)).sum())
        if n_q:
            log.info("neighbours of split %s: %d queries among %d docs (k=%d)", split, n_q, ids.len(),
                     min(k, ids.len()))
    return pools, pool_of


def positive_rank_table(neighbors: pl.LazyFrame, queries: pl.DataFrame, qrels: pl.DataFrame, *, k: int,
                        relevant_min: int = 1) -> pl.DataFrame:
    """Rule ``dense_positive_ranks``: where G ranks each context's true reply among its top ``k`` neighbours, one
    row per split (:func:`curricula.retrieval.dense.positive_rank_summary`), each row logged.

    ``queries`` needs (qid, split); the neighbours table is scanned lazily and joined with the relevant pairs only
    (:func:`curricula.retrieval.dense.positive_ranks`), never read whole.
    """
    from curricula.retrieval import dense

    summary = dense.positive_rank_summary(dense.positive_ranks(neighbors, qrels, queries, relevant_min), k)
    for row in summary.iter_rows(named=True):
        log.info("G ranks the true reply of %s's %d contexts: at 1 %.1f%%, top 10 %.1f%%, top 100 %.1f%%, top %d "
                 "%.1f%%, outside %.1f%%; median rank %g (rank 1 = best, outside top %d counted as %d)",
                 row["split"], row["queries"], 100 * row["at_1"], 100 * row["top_10"], 100 * row["top_100"], k,
                 100 * row["top_k"], 100 * row["outside_k"], row["median_rank"], k, k + 1)
    return summary

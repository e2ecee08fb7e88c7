"""The entry points of rules/dense.smk: the bi-encoder G's fine-tuning, the encoding (sharded, then gathered), the
neighbours (sharded; their gather is :func:`curricula.stages.common.gather_table`) and where G ranks the true
replies. The computation is :mod:`curricula.retrieval.precompute`'s; ``dense`` params are the rule's slice of the
config's ``dense`` section, to which the job's ``threads`` are added."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from curricula.plumbing.contracts import DOCS, NEIGHBORS, QRELS, QUERIES, VECTORS, read_table, scan_table, write_table
from curricula.plumbing.shards import parse_scatteritem
from curricula.retrieval import precompute
from curricula.retrieval.gpu_search import neighbors_device
from curricula.stages import Files


def dense_biencoder(inputs: Files, outputs: Files, *, dense: Mapping[str, Any], seed: int,
                    threads: int | None = None) -> dict[str, Any]:
    """Rule ``dense_biencoder``: context and response encoders fine-tuned on the train split's positive pairs of the
    ingest tables (inputs queries, docs, qrels) into output ``biencoder``; returns the fine-tuning's stats."""
    queries, docs = read_table(inputs["queries"], QUERIES), read_table(inputs["docs"], DOCS)
    return precompute.finetune_g(queries, docs, read_table(inputs["qrels"], QRELS), outputs["biencoder"],
                                 dict(dense, threads=threads), seed)


def dense_encode_shard(inputs: Files, outputs: Files, *, kind: str, dense: Mapping[str, Any],
                       threads: int | None = None, scatteritem: str | None = None) -> int:
    """Rule ``dense_encode_shard``: the vectors of the ``{scatteritem}`` shard's batches of the ``{kind}`` ('queries'
    or 'docs') of input ``table``, by the fine-tuned half of input ``biencoder`` when there is one, into output
    ``vectors``; returns the rows."""
    texts = precompute.read_texts(kind, inputs["table"])
    vectors = precompute.encode_texts(kind, texts, dict(dense, threads=threads), inputs.get("biencoder"),
                                      shard=parse_scatteritem(scatteritem))
    write_table(vectors, outputs["vectors"], VECTORS)
    return vectors.height


def gather_vectors(inputs: Files, outputs: Files, *, kind: str) -> int:
    """Rule ``dense_encode``: the shards of ``dense_encode_shard`` (input ``shards``) as one table of vectors
    (output ``vectors``) in the order of the ingest table (input ``table``), every id exactly once; returns rows."""
    vectors = precompute.gathered_vectors(kind, list(inputs["shards"]), inputs["table"])
    write_table(vectors, outputs["vectors"], VECTORS)
    return vectors.height


def dense_neighbors_shard(inputs: Files, outputs: Files, *, k: int, within_split: bool, config: Mapping[str, Any],
                          threads: int | None = None, scatteritem: str | None = None) -> int:
    """Rule ``dense_neighbors_shard``: the exact top-``k`` docs of each query of the ``{scatteritem}`` shard's block
    (inputs queries_vectors, docs_vectors, and the ingest queries, qrels, candidates) streamed into output
    ``neighbors`` (:func:`curricula.retrieval.precompute.write_neighbors`), on the device the run's ``config`` gives
    the neighbour jobs (:func:`curricula.retrieval.gpu_search.neighbors_device`); returns the rows."""
    return precompute.write_neighbors(inputs["queries_vectors"], inputs["docs_vectors"], inputs, outputs["neighbors"],
                                      k=k, within_split=within_split, threads=threads,
                                      shard=parse_scatteritem(scatteritem), device=neighbors_device(config))


def dense_positive_ranks(inputs: Files, outputs: Files, *, k: int, relevant_min: int = 1) -> pl.DataFrame:
    """Rule ``dense_positive_ranks``: where G ranks each context's true reply among its top ``k`` neighbours (input
    ``neighbors``, scanned lazily), one row per split, into output ``summary``; each row is logged."""
    from curricula.retrieval.dense import POSITIVE_RANKS

    queries = read_table(inputs["queries"], QUERIES, columns=["qid", "split"])
    summary = precompute.positive_rank_table(scan_table(inputs["neighbors"], NEIGHBORS), queries,
                                             read_table(inputs["qrels"], QRELS), k=k, relevant_min=relevant_min)
    write_table(summary, outputs["summary"], POSITIVE_RANKS)
    return summary

"""The entry points of rules/bm25.smk: the Lucene index, the BM25 run and candidate scores (sharded, then gathered;
the candidate scores' gather is :func:`curricula.stages.common.gather_table`) and BM25 tuned on dev. The computation
is :mod:`curricula.retrieval.precompute`'s; ``bm25`` params are the rule's slice of the config's ``bm25`` section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curricula.plumbing.contracts import (
    CANDIDATE_SCORES,
    CANDIDATES,
    DOCS,
    QRELS,
    QUERIES,
    RUN,
    read_table,
    write_table,
    write_trec_run,
)
from curricula.plumbing.gather import gather_shards
from curricula.plumbing.row_groups import iter_row_groups
from curricula.plumbing.shards import parse_scatteritem
from curricula.retrieval import precompute
from curricula.retrieval.bm25 import build_index, start_jvm
from curricula.retrieval.bm25_tuning import GRID
from curricula.stages import Files


def bm25_index(inputs: Files, outputs: Files, *, threads: int = 1, heap: str = "4g") -> dict[str, Any]:
    """Rule ``bm25_index``: index the docs (input ``docs``) with Lucene (Anserini) into output ``index``; returns
    the index stats."""
    start_jvm(heap)
    return build_index(read_table(inputs["docs"], DOCS), outputs["index"], threads=threads)


def bm25_run_shard(inputs: Files, outputs: Files, *, bm25: Mapping[str, Any], threads: int = 1,
                   scatteritem: str | None = None) -> dict[str, Any]:
    """Rule ``bm25_run_shard``: the BM25 top-``k`` of the ``{scatteritem}`` shard's block of queries into output
    ``run`` (:func:`curricula.retrieval.precompute.write_bm25_run`); returns the search's stats."""
    start_jvm(bm25["heap"])
    queries = read_table(inputs["queries"], QUERIES)
    return precompute.write_bm25_run(inputs["index"], queries, outputs["run"], k=bm25["k"], k1=bm25["k1"],
                                     b=bm25["b"], query_turns=bm25["query_turns"], threads=threads,
                                     shard=parse_scatteritem(scatteritem))


def gather_run(inputs: Files, outputs: Files, *, k: int = 100) -> int:
    """Rule ``bm25_run``: the shards of ``bm25_run_shard`` (input ``shards``) as ``bm25/run.parquet`` (output
    ``run``) and the TREC run (``trec``), both written a row group at a time (``k``, the run's depth, cuts the row
    groups); returns the rows."""
    rows = gather_shards("run", list(inputs["shards"]), outputs["run"], k=k)
    write_trec_run(iter_row_groups(outputs["run"], RUN), outputs["trec"], precompute.BM25_TAG)
    return rows


def bm25_candidate_scores_shard(inputs: Files, outputs: Files, *, bm25: Mapping[str, Any],
                                scatteritem: str | None = None) -> int:
    """Rule ``bm25_candidate_scores_shard``: Lucene's BM25 score of every (query, candidate) pair of the
    ``{scatteritem}`` shard's block of queries into output ``scores``; returns the rows."""
    start_jvm(bm25["heap"])
    queries, candidates = read_table(inputs["queries"], QUERIES), read_table(inputs["candidates"], CANDIDATES)
    scores = precompute.bm25_candidate_scores(inputs["index"], queries, candidates, k1=bm25["k1"], b=bm25["b"],
                                              query_turns=bm25["query_turns"], shard=parse_scatteritem(scatteritem))
    write_table(scores, outputs["scores"], CANDIDATE_SCORES)
    return scores.height


def bm25_tune(inputs: Files, outputs: Files, *, tune: Mapping[str, Any], default: Mapping[str, float],
              bm25: Mapping[str, Any], relevant_min: int = 1, seed: int | None = None) -> dict[str, Any]:
    """Rule ``bm25_tune``: BM25's (k1, b) tuned on dev (:func:`curricula.retrieval.precompute.tune_bm25`; ``tune``
    the grids and measure, ``default`` the untuned k1 and b) into outputs ``grid`` and ``scores`` (the tuned dev and
    test candidate scores); returns the chosen point and its dev value."""
    start_jvm(bm25["heap"])
    tables = {name: read_table(inputs[name], spec)
              for name, spec in (("queries", QUERIES), ("candidates", CANDIDATES), ("qrels", QRELS))}
    grid, scores = precompute.tune_bm25(inputs["index"], tables["queries"], tables["candidates"], tables["qrels"],
                                        tune=tune, k1=default["k1"], b=default["b"], query_turns=bm25["query_turns"],
                                        relevant_min=relevant_min, seed=seed)
    write_table(grid, outputs["grid"], GRID)
    write_table(scores, outputs["scores"], CANDIDATE_SCORES)
    return precompute.tuned_point(grid, scores)

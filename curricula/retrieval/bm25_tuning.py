"""BM25's (k1, b) tuned on the dev queries, for the ``bm25_tune`` stage (``docs/pipeline.md``).

MacAvaney et al. (2020) report BM25 both with default parameters and tuned on validation. :func:`tune` scores the
dev candidates at every point of a (k1, b) grid on one index (k1 and b are query-time parameters of Lucene's
BM25Similarity, so nothing is re-indexed), keeps the point with the best mean dev value of a measure
(:func:`choose_point`, ties broken towards the default point) and scores the dev and test candidates with it; the
scoring is :func:`curricula.retrieval.bm25.score_candidates`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import polars as pl
from tqdm.auto import tqdm

from curricula.plumbing.contracts import CANDIDATE_SCORES, TableSpec, check_table
from curricula.retrieval.bm25 import ANSERINI_B, ANSERINI_K1, check_params, score_candidates

log = logging.getLogger(__name__)

#: The tuning grid's table (``bm25/tuned/grid.parquet``): the mean dev value of ``measure`` for every (k1, b), one
#: row per grid point (sorted by k1, b), ``chosen`` true on exactly one row.
GRID = TableSpec(
    "bm25_grid",
    {"k1": pl.Float64, "b": pl.Float64, "measure": pl.String, "value": pl.Float64, "chosen": pl.Boolean},
    key=("k1", "b"),
)
#: Grid values closer than this to the best value count as tied (two rankings with the same value may average to
#: means that differ in the last bits); distances to the default point are rounded to as many decimals.
TIE_TOLERANCE = 1e-12


def check_grid(k1_grid: Sequence[float], b_grid: Sequence[float], key: str = "bm25.tune") -> None:
    """A valid (k1, b) grid: non-empty lists of distinct numbers, k1 >= 0 and b in [0, 1]; else ValueError naming
    the config key (``bm25.tune.k1`` or ``bm25.tune.b``) and the bad value."""
    for name, values, ok, want in (("k1", k1_grid, lambda v: v >= 0, ">= 0"),
                                   ("b", b_grid, lambda v: 0 <= v <= 1, "in [0, 1]")):
        values = list(values)
        if not values:
            raise ValueError(f"{key}.{name}: the grid is empty; give at least one value")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not ok(v):  # NaN fails ok()
                raise ValueError(f"{key}.{name}: every value must be a number {want}, got {v!r}")
        if len(set(values)) != len(values):
            raise ValueError(f"{key}.{name}: duplicate values in {values}")


def check_measure(measure: str, relevant_min: int) -> None:
    """``measure`` is an ir-measures name or R<n>@<k> (:func:`curricula.evaluation.rerank.parse_rnk`); else
    ValueError naming the config key ``bm25.tune.measure``."""
    from curricula.evaluation.metrics import parse_measures
    from curricula.evaluation.rerank import parse_rnk

    if parse_rnk(measure) is None:
        try:
            parse_measures([measure], relevant_min)
        except Exception as exc:  # ir_measures: NameError or ValueError
            raise ValueError(f"bm25.tune.measure: {measure!r} is not an ir-measures name ({exc})") from None


def choose_point(grid: pl.DataFrame, default_k1: float, default_b: float) -> tuple[float, float]:
    """The (k1, b) of the best row of ``grid`` (k1, b, value; higher value is better), ties broken deterministically.

    Rows within :data:`TIE_TOLERANCE` of the best value are tied; among them the point closest to the default
    (``default_k1``, ``default_b``) wins (Euclidean distance in the plain (k1, b) plane, rounded to 12 decimals so
    that 0.6 and 1.2 are equally far from 0.9), then the smaller k1, then the smaller b. So a grid on which the
    measure does not move keeps the default parameters (when they are a grid point).
    """
    if grid.height == 0:
        raise ValueError("choose_point: empty grid")
    nan = grid.filter(pl.col("value").is_nan() | pl.col("value").is_null())
    if nan.height:
        raise ValueError(f"choose_point: no value at k1={nan['k1'][0]}, b={nan['b'][0]}")
    # value is a float column (GRID; is_nan takes floats only) with rows and no null (both checked above): its max
    # is a float
    best = cast(float, grid["value"].max())
    tied = grid.filter(pl.col("value") >= best - TIE_TOLERANCE).with_columns(
        _dist=((pl.col("k1") - default_k1) ** 2 + (pl.col("b") - default_b) ** 2).sqrt().round(12))
    row = tied.sort("_dist", "k1", "b").row(0, named=True)
    return float(row["k1"]), float(row["b"])


def dev_and_test(queries: pl.DataFrame, candidates: pl.DataFrame, qrels: pl.DataFrame,
                 relevant_min: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The dev candidates, the test candidates (qid, docid) and the dev qrels, by the ``split`` of ``queries``;
    ValueError when there is no dev candidate or no relevant dev qrel (rel >= ``relevant_min``) to tune on."""
    split_of = queries.select("qid", "split")
    cands = candidates.select("qid", "docid").join(split_of, on="qid", how="left")
    dev = cands.filter(pl.col("split") == "dev").drop("split")
    test = cands.filter(pl.col("split") == "test").drop("split")
    dev_qids = split_of.filter(pl.col("split") == "dev")["qid"].implode()
    dev_qrels = qrels.filter(pl.col("qid").is_in(dev_qids))
    if dev.height == 0:
        raise ValueError("no dev candidates to tune BM25 on (the dev split is empty)")
    if dev_qrels.filter(pl.col("rel") >= relevant_min).height == 0:
        raise ValueError(f"no relevant dev qrels (rel >= {relevant_min}) to tune BM25 on")
    return dev, test, dev_qrels


def grid_values(index_dir: str | Path, text: pl.DataFrame, dev: pl.DataFrame, dev_qrels: pl.DataFrame,
                points: Sequence[tuple[float, float]], measure: str, relevant_min: int, seed: int,
                progress: bool) -> tuple[pl.DataFrame, dict[tuple[float, float], pl.DataFrame]]:
    """The mean dev value of ``measure`` at every (k1, b) of ``points`` (a frame of :data:`GRID`'s columns but
    ``chosen``, in the order of ``points``) and each point's dev scores
    (:func:`curricula.retrieval.bm25.score_candidates`, evaluated by :func:`curricula.evaluation.rerank.evaluate_run`).
    """
    from curricula.evaluation.rerank import evaluate_run, mean_table

    rows, dev_scores = [], {}
    for k1, b in tqdm(points, disable=not progress, desc="BM25 tuning grid", unit="point"):
        dev_scores[k1, b] = score_candidates(index_dir, text, dev, k1=k1, b=b)
        per_query = evaluate_run(dev_scores[k1, b], dev_qrels, [measure], relevant_min, seed)
        rows.append((k1, b, measure, mean_table(per_query)[measure]))
        log.info("BM25 tuning: k1=%g b=%g dev %s %.4f", k1, b, measure, rows[-1][3])
    grid = pl.DataFrame(rows, schema={name: GRID.columns[name] for name in ("k1", "b", "measure", "value")},
                        orient="row")
    return grid, dev_scores


def tune(
    index_dir: str | Path,
    queries: pl.DataFrame,
    candidates: pl.DataFrame,
    qrels: pl.DataFrame,
    *,
    k1_grid: Sequence[float],
    b_grid: Sequence[float],
    measure: str = "AP",
    default_k1: float = ANSERINI_K1,
    default_b: float = ANSERINI_B,
    relevant_min: int = 1,
    seed: int = 0,
    progress: bool = False,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """BM25's (k1, b) tuned on the dev queries, as in MacAvaney et al. (2020), who report BM25 both with default
    parameters and tuned on validation: returns (the :data:`GRID` table, the tuned ``CANDIDATE_SCORES``).

    ``queries`` needs ``qid``, ``split`` and ``text`` (the text BM25 searches with, see
    :func:`curricula.retrieval.bm25.query_text`); ``candidates`` (qid, docid) and ``qrels`` (qid, docid, rel) are the
    ingest tables. For every point of the grid ``k1_grid`` x ``b_grid`` the dev candidates are scored with
    :func:`curricula.retrieval.bm25.score_candidates` on the one index at ``index_dir`` (no re-indexing: k1 and b are
    query-time parameters of Lucene's BM25Similarity) and the mean of ``measure`` over the dev queries is computed
    with :func:`curricula.evaluation.rerank.evaluate_run` (trec_eval semantics, rel >= ``relevant_min`` is relevant,
    dev queries whose relevant document is not a candidate count 0, ``seed`` only matters for R<n>@<k>). The best
    point is chosen by :func:`choose_point` (ties: closest to (``default_k1``, ``default_b``), then smaller k1, then
    smaller b). Only dev candidates and dev qrels are read to choose; the test candidates are scored once, with the
    chosen point. The tuned scores cover the dev and test candidates (their dev part is the chosen grid point's dev
    scores), sorted by qid, docid; at the default point they equal ``score_candidates``' scores exactly.
    """
    check_grid(k1_grid, b_grid)
    check_params(default_k1, default_b)
    check_measure(measure, relevant_min)
    for col in ("qid", "split", "text"):
        if col not in queries.columns:
            raise ValueError(f"queries lack column {col!r} needed for tuning; they have {queries.columns}")
    dev, test, dev_qrels = dev_and_test(queries, candidates, qrels, relevant_min)
    text = queries.select("qid", "text")
    started = time.perf_counter()
    points = [(float(k1), float(b)) for k1 in sorted(k1_grid) for b in sorted(b_grid)]
    grid, dev_scores = grid_values(index_dir, text, dev, dev_qrels, points, measure, relevant_min, seed, progress)
    k1, b = choose_point(grid, default_k1, default_b)
    grid = grid.with_columns(chosen=(pl.col("k1") == k1) & (pl.col("b") == b))
    parts = [dev_scores[k1, b]]
    if test.height:
        parts.append(score_candidates(index_dir, text, test, k1=k1, b=b))
    scores = pl.concat(parts).sort("qid", "docid")
    log.info("BM25 tuned on %d dev queries over %d grid points in %.1f s: k1=%g b=%g, dev %s %.4f (default "
             "k1=%g b=%g)", dev["qid"].n_unique(), len(points), time.perf_counter() - started, k1, b, measure,
             grid.filter(pl.col("chosen"))["value"][0], default_k1, default_b)
    return check_table(grid, GRID, "bm25 tuning grid"), check_table(scores, CANDIDATE_SCORES, "bm25 tuned scores")

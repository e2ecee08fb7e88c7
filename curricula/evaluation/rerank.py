"""Test-set evaluation (rule ``evaluate``): re-rank the test candidates, write a TREC run and per-query metrics.

Metrics come from ir-measures (trec_eval semantics, :mod:`curricula.evaluation.metrics`): MAP (``AP``), MRR@10
(``RR@10``),
``P@1``, ``Rprec``, ``nDCG@10``, plus the response-selection recalls R_n@k of Su et al. 2021 §5.1 (R10@1, R10@2,
R10@5, R2@1): the recall at k when the query's relevant responses are ranked among n candidates. They are
ir-measures' ``R@k`` on a run cut to n candidates per query: every relevant candidate plus n - #relevant
non-relevant ones. Where a query has more non-relevant candidates than that (e.g. R2@1 on 10 candidates, or WikiQA's
long lists) the kept ones are a seeded choice per query, the same for every ranker, so R_n@k stays a paired
measure. With 1 positive and 9 negatives (the default chitchat lists) R10@k is exactly Success@k.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curricula.data.ingest import candidate_pairs
from curricula.evaluation.metrics import DEFAULT_MEASURES, mean_metrics, measure_means, per_query, trec_order
from curricula.plumbing.contracts import (
    CANDIDATE_SCORES,
    TEACHER_SCORES,
    TableSpec,
    read_table,
    write_table,
    write_trec_run,
)
from curricula.plumbing.keys import with_bm25
from curricula.training.spec import Runtime

log = logging.getLogger(__name__)

METRICS = TableSpec("metrics", {"qid": pl.String, "measure": pl.String, "value": pl.Float64},
                    key=("qid", "measure"))
RESPONSE_SELECTION = ("R10@1", "R10@2", "R10@5", "R2@1")
_RNK = re.compile(r"^R(\d+)@(\d+)$")


def parse_rnk(name: str) -> tuple[int, int] | None:
    """(n, k) of an ``R<n>@<k>`` name, else None (so ``R@10`` stays ir-measures' recall at 10)."""
    m = _RNK.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def cut_candidates(run: pl.DataFrame, qrels: pl.DataFrame, n: int, seed: int, relevant_min: int = 1) -> pl.DataFrame:
    """The run restricted to n candidates per query: all relevant ones plus seeded non-relevant ones.

    The choice depends on (seed, qid, docid) only, not on scores, so every ranker of the same candidates is cut
    the same way.
    """
    rel = qrels.filter(pl.col("rel") >= relevant_min).select("qid", "docid", pl.lit(True).alias("_rel"))
    keyed = run.join(rel, on=["qid", "docid"], how="left").with_columns(pl.col("_rel").fill_null(False))
    keyed = keyed.sort("qid", "docid")
    draw = np.random.default_rng(seed).random(keyed.height)
    keyed = keyed.with_columns(_key=pl.Series(draw)).with_columns(
        _key=pl.when(pl.col("_rel")).then(-1.0).otherwise(pl.col("_key")))
    keyed = keyed.with_columns(_order=pl.col("_key").rank("ordinal").over("qid"))
    return keyed.filter(pl.col("_order") <= n).drop("_rel", "_key", "_order")


def evaluate_run(run: pl.DataFrame, qrels: pl.DataFrame,
                 measures: Sequence[str] = DEFAULT_MEASURES + RESPONSE_SELECTION, relevant_min: int = 1,
                 seed: int = 0) -> pl.DataFrame:
    """Per-query values (qid, measure, value) of a scored run (qid, docid, score) for every measure.

    Queries with a relevant document that the run does not rank are counted with 0 (unlike bare trec_eval),
    so every ranker is averaged over the same queries.
    """
    plain = [m for m in measures if parse_rnk(m) is None]
    parts = [per_query(run, qrels, plain, relevant_min)] if plain else []
    for name in measures:
        nk = parse_rnk(name)
        if nk is None:
            continue
        n, k = nk
        cut = cut_candidates(run, qrels, n, seed, relevant_min)
        parts.append(per_query(cut, qrels, [f"R@{k}"], relevant_min).with_columns(measure=pl.lit(name)))
    values = pl.concat(parts) if parts else pl.DataFrame(schema=METRICS.columns)
    judged = qrels.filter(pl.col("rel") >= relevant_min)["qid"].unique()
    grid = pl.DataFrame({"qid": judged}).join(pl.DataFrame({"measure": list(measures)}), how="cross")
    out = grid.join(values, on=["qid", "measure"], how="left").with_columns(pl.col("value").fill_null(0.0))
    return out.select(list(METRICS.columns)).sort("measure", "qid")


def mean_table(metrics: pl.DataFrame) -> dict[str, float]:
    """Mean value per measure, in the order the measures first appear."""
    means = dict(metrics.group_by("measure", maintain_order=True).agg(pl.col("value").mean()).iter_rows())
    return {m: float(v) for m, v in means.items()}


def ranked(scores: pl.DataFrame) -> pl.DataFrame:
    """A RUN table from (qid, docid, score): rank 1 = highest score; ties as trec_eval orders them (docid desc)."""
    return trec_order(scores).select("qid", "docid", pl.col("_pos").cast(pl.Int32).alias("rank"), "score")


ADDITIVITY = TableSpec("additivity", {"weight": pl.Float64, "measure": pl.String, "value": pl.Float64,
                                       "chosen": pl.Boolean}, key=("weight",))


def minmax_per_query(scores: pl.DataFrame) -> pl.DataFrame:
    """``score`` rescaled to [0, 1] within each query (max -> 1, min -> 0; a query whose scores are all equal -> 0),
    so a neural ranker's logits and BM25's unbounded scores can be interpolated with one weight."""
    low, high = pl.col("score").min().over("qid"), pl.col("score").max().over("qid")
    span = high - low
    return scores.with_columns(score=pl.when(span > 0).then((pl.col("score") - low) / span).otherwise(0.0))


def interpolate(neural: pl.DataFrame, bm25: pl.DataFrame, weight: float) -> pl.DataFrame:
    """Score additivity (Yang et al. 2019, as MacAvaney et al. 2020 §4 use it for ConvKNRM): per candidate
    ``weight * s_neural + (1 - weight) * s_BM25``, each score min-max normalised per query (:func:`minmax_per_query`).

    ``weight`` 1 is the neural ranker alone, 0 is BM25 alone. Both frames hold (qid, docid, score); every neural
    pair must have a BM25 score (ValueError otherwise)."""
    if not 0 <= weight <= 1:
        raise ValueError(f"interpolation weight {weight}: expected a value in [0, 1]")
    joined = minmax_per_query(neural.select("qid", "docid", "score")).join(
        minmax_per_query(bm25.select("qid", "docid", "score")), on=["qid", "docid"], how="left", suffix="_bm25")
    missing = joined["score_bm25"].null_count()
    if missing:
        raise ValueError(f"score additivity: {missing} pair(s) have no BM25 score")
    mixed = weight * pl.col("score") + (1 - weight) * pl.col("score_bm25")
    return joined.select("qid", "docid", mixed.alias("score"))


def additivity_weights(steps: int) -> list[float]:
    """The interpolation weights tried on dev, from 1 (the ranker alone) down to 0 (BM25 alone) in ``steps`` steps."""
    if steps < 1:
        raise ValueError(f"additivity steps={steps}: expected >= 1")
    return [round(1 - i / steps, 10) for i in range(steps + 1)]


def tune_additivity(neural_dev: pl.DataFrame, bm25_dev: pl.DataFrame, qrels: pl.DataFrame, measure: str,
                    weights: list[float], relevant_min: int = 1) -> pl.DataFrame:
    """ADDITIVITY rows: the dev ``measure`` of every interpolation weight and the chosen one (the highest; on ties
    the first in ``weights``' order, i.e. the most neural). Reads dev pairs and dev qrels only."""
    if parse_rnk(measure):
        raise ValueError(f"additivity measure {measure!r}: use an ir-measures name (AP, RR@10, nDCG@10...)")
    values = [mean_metrics(ranked(interpolate(neural_dev, bm25_dev, w)), qrels, [measure], relevant_min)[measure]
              for w in weights]
    best = max(range(len(values)), key=lambda i: (values[i], -i))
    return pl.DataFrame({"weight": weights, "measure": [measure] * len(weights), "value": values,
                         "chosen": [i == best for i in range(len(weights))]}, schema=ADDITIVITY.columns)


def ranker_metrics(ranker, pairs: pl.DataFrame, qrels: pl.DataFrame, measures: Sequence[str], *, batch_size: int,
                   device, precision: str = "auto", relevant_min: int = 1, progress: bool = False,
                   desc: str = "dev") -> dict[str, float]:
    """Mean ``measures`` (ir-measures names, e.g. ``AP``, ``RR``) of a ranker's scores of ``pairs`` (qid, docid,
    context, response), against the qrels of the queries in ``pairs``: dev selection and active learning's curves.
    """
    pq = ranker_per_query(ranker, pairs, qrels, measures, batch_size=batch_size, device=device, precision=precision,
                          relevant_min=relevant_min, progress=progress, desc=desc)
    return measure_means(pq, measures)


def ranker_per_query(ranker, pairs: pl.DataFrame, qrels: pl.DataFrame, measures: Sequence[str], *,
                     batch_size: int, device, precision: str = "auto", relevant_min: int = 1, progress: bool = False,
                     desc: str = "dev") -> pl.DataFrame:
    """Per-query ``measures`` (qid, measure, value; curricula.evaluation.metrics.per_query) of a ranker's scores of
    ``pairs``
    against the qrels of the queries in ``pairs``."""
    from curricula.models import score_pair_frame  # imports torch

    run = score_pair_frame(ranker, pairs, batch_size=batch_size, device=device, precision=precision,
                           progress=progress, desc=desc)
    rel = qrels.filter(pl.col("qid").is_in(pairs["qid"].unique().implode()))
    return per_query(run, rel, list(measures), relevant_min)


def evaluation_pairs(data: Mapping[str, pl.DataFrame], relevant_min: int, additive: bool = False) -> pl.DataFrame:
    """The candidate pairs an evaluation scores (rule ``evaluate``): the test split's of the ingest frames ``data``,
    and the dev split's too when the ranker is also interpolated with BM25 (``additive``: its weight is tuned on dev);
    a ValueError when there is no test candidate."""
    splits = ("dev", "test") if additive else ("test",)
    pairs = candidate_pairs(data, splits=splits, relevant_min=relevant_min)
    if pairs.filter(pl.col("split") == "test").height == 0:
        raise ValueError("no test candidates to evaluate (the test split is empty)")
    return pairs


def model_scores(model_dir: str | Path, pairs: pl.DataFrame, settings: Runtime, score_batch_size: int = 128,
                 max_length: int | None = None) -> pl.DataFrame:
    """A trained ranker's (the folder ``model_dir``) scores of ``pairs``: (qid, docid, score, ...), in a job started
    on ``settings`` (:func:`curricula.models.runtime.start_job`); ``max_length`` is a bare HF checkpoint's pair
    budget."""
    from curricula.models import load_ranker, saved_ranker_class, score_pair_frame
    from curricula.models.runtime import start_job  # imports torch and transformers

    runtime = start_job(settings, saved_ranker_class(model_dir).transformer, "scoring")
    ranker = load_ranker(model_dir, device=runtime.device, max_length=max_length)
    return score_pair_frame(ranker, pairs, batch_size=score_batch_size, device=runtime.device,
                            precision=runtime.precision, desc="/".join(sorted(set(pairs["split"]))))


def write_evaluations(scored: pl.DataFrame, pairs: pl.DataFrame, qrels: pl.DataFrame,
                      outputs: Mapping[str, str | Path], *, tag: str, measures: Sequence[str], relevant_min: int,
                      seed: int, additivity: Mapping | None = None,
                      bm25: pl.DataFrame | None = None) -> pl.DataFrame:
    """The test run (TREC, output ``run``) and per-query ``metrics`` of a ranker's ``scored`` pairs (its scores of
    the :func:`evaluation_pairs` ``pairs``); returns the metrics.

    With ``additivity`` (``{"steps": n, "measure": name}``) and ``bm25`` (BM25's candidate scores of the same pairs,
    :func:`reference_scores`) the ranker is also interpolated with BM25 (:func:`write_additive`).
    """
    split_of = pairs.select("qid", "split").unique()
    scored = scored.select("qid", "docid", "score").join(split_of, on="qid")
    test = scored.filter(pl.col("split") == "test").drop("split")
    metrics = write_evaluation(test, qrels, outputs["run"], outputs["metrics"], tag, measures, relevant_min, seed)
    if additivity:
        if bm25 is None:
            raise ValueError("score additivity interpolates with BM25: no BM25 candidate scores given")
        dev = scored.filter(pl.col("split") == "dev").drop("split")
        write_additive(test, dev, bm25, qrels, outputs, tag=tag, additivity=additivity, measures=measures,
                       relevant_min=relevant_min, seed=seed)
    return metrics


def write_additive(test: pl.DataFrame, dev: pl.DataFrame, bm25: pl.DataFrame, qrels: pl.DataFrame,
                   outputs: Mapping[str, str | Path], *, tag: str, additivity: Mapping, measures: Sequence[str],
                   relevant_min: int, seed: int) -> pl.DataFrame:
    """Score additivity: the ranker's ``test`` scores interpolated with BM25's (``bm25``; :func:`interpolate`) at the
    weight tuned on its ``dev`` scores (:func:`tune_additivity`); writes the dev grid (output ``additivity``) and the
    chosen weight's test run and metrics (``additive_run``, ``additive_metrics``); returns those metrics."""
    if dev.height == 0:
        raise ValueError("score additivity tunes its weight on dev: the dev split has no candidates")
    dev_qrels = qrels.filter(pl.col("qid").is_in(dev["qid"].unique().implode()))
    grid = tune_additivity(dev, bm25, dev_qrels, additivity["measure"], additivity_weights(additivity["steps"]),
                           relevant_min)
    weight = float(grid.filter(pl.col("chosen"))["weight"][0])
    write_table(grid, outputs["additivity"], ADDITIVITY)
    log.info("%s + BM25: weight %.2f chosen on dev (%s %.4f; ranker alone %.4f, BM25 alone %.4f)", tag, weight,
             additivity["measure"], grid.filter(pl.col("chosen"))["value"][0], grid["value"][0],
             grid["value"][-1])
    return write_evaluation(interpolate(test, bm25, weight), qrels, outputs["additive_run"],
                            outputs["additive_metrics"], with_bm25(tag), measures, relevant_min, seed)


def reference_scores(path: str | Path, pairs: pl.DataFrame) -> pl.DataFrame:
    """(qid, docid, score) of ``pairs`` from a reference ranker's table (BM25 candidate scores or the teacher's);
    ValueError naming the file when a pair has no score."""
    # the teacher's table also has per-pair losses; both contracts hold qid, docid, score
    spec = TEACHER_SCORES if "loss" in pl.read_parquet_schema(path) else CANDIDATE_SCORES
    ref = read_table(path, spec).select("qid", "docid", "score")
    scored = pairs.select("qid", "docid").join(ref, on=["qid", "docid"], how="left")
    missing = scored["score"].null_count()
    if missing:
        raise ValueError(f"{path}: {missing} candidate(s) have no score")
    return scored


def write_evaluation(scored: pl.DataFrame, qrels: pl.DataFrame, run_path: str | Path, metrics_path: str | Path,
                     tag: str, measures: Sequence[str], relevant_min: int, seed: int) -> pl.DataFrame:
    """The TREC run and per-query METRICS of scored test pairs (qid, docid, score), written atomically."""
    run = ranked(scored)
    write_trec_run(run, run_path, tag)
    metrics = evaluate_run(run, qrels.filter(pl.col("qid").is_in(scored["qid"].unique().implode())), measures,
                           relevant_min, seed)
    write_table(metrics, metrics_path, METRICS)
    log.info("%s on %d test queries: %s", tag, scored["qid"].n_unique(),
             ", ".join(f"{m} {v:.4f}" for m, v in mean_table(metrics).items()))
    return metrics

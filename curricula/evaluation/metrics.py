"""Ranking metrics with ir-measures (trec_eval semantics): runs and qrels as polars frames, per query and mean.

A run is (qid, docid, score); qrels are (qid, docid, rel). trec_eval ranks by score descending and breaks ties by
docid *descending*; ir-measures follows it, so metrics here equal trec_eval's on the same run file. Graded qrels are
binarised for binary measures with ``relevant_min`` (trec_eval's ``-l``): rel >= relevant_min counts as relevant.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import ir_measures
import polars as pl

#: Names accepted by :func:`parse_measures` (ir-measures syntax), the defaults of the papers' tables.
DEFAULT_MEASURES = ("AP", "RR@10", "P@1", "Rprec", "nDCG@10")


def parse_measures(names: Sequence[str], relevant_min: int = 1) -> list:
    """ir-measures measure objects; binary measures get ``rel=relevant_min`` (nDCG uses the grades)."""
    out = []
    for name in names:
        measure = ir_measures.parse_measure(name)
        if relevant_min != 1 and "rel" in measure.SUPPORTED_PARAMS and not name.startswith("nDCG"):
            measure = measure(rel=relevant_min)
        out.append(measure)
    return out


def trec_order(run: pl.DataFrame) -> pl.DataFrame:
    """The run in trec_eval's evaluation order: score descending, ties by docid descending; adds ``_pos`` (1-based)."""
    return run.sort(["qid", "score", "docid"], descending=[False, True, True]).with_columns(
        _pos=pl.int_range(1, pl.len() + 1).over("qid"))


def _calc(measures: list, qrels_rows: list, run: pl.DataFrame) -> list:
    r = [ir_measures.ScoredDoc(a, b, float(c)) for a, b, c in run.select("qid", "docid", "score").iter_rows()]
    return list(ir_measures.pytrec_eval.iter_calc(measures, qrels_rows, r))


def per_query(run: pl.DataFrame, qrels: pl.DataFrame, measures: Sequence[str] = DEFAULT_MEASURES,
              relevant_min: int = 1) -> pl.DataFrame:
    """One row per (qid, measure) with the value, for the queries of ``qrels`` that appear in ``run``.

    Every measure is computed by trec_eval itself (ir-measures' pytrec_eval provider), so ties are ordered as
    trec_eval orders them. trec_eval has no rank cut-off for the reciprocal rank, and ir-measures would hand
    ``RR@k`` to another provider with another tie order; here ``RR@k`` is trec_eval's ``recip_rank`` on the run cut
    to its top k in trec_eval's order. Queries of the qrels that the run does not rank are left out (as trec_eval
    does without ``-c``); callers that need them counted as 0 add them explicitly.
    """
    q = [ir_measures.Qrel(a, b, int(c)) for a, b, c in qrels.select("qid", "docid", "rel").iter_rows()]
    plain = [n for n in measures if not re.fullmatch(r"RR@\d+", n)]
    rows = []
    if plain:
        ms = parse_measures(plain, relevant_min)
        names = {str(m): n for m, n in zip(ms, plain)}
        rows += [(m.query_id, names[str(m.measure)], float(m.value)) for m in _calc(ms, q, run)]
    for name in measures:
        if name in plain:
            continue
        k = int(name.split("@")[1])
        top = trec_order(run).filter(pl.col("_pos") <= k).drop("_pos")
        rr = parse_measures(["RR"], relevant_min)
        rows += [(m.query_id, name, float(m.value)) for m in _calc(rr, q, top)]
    return pl.DataFrame(rows, schema={"qid": pl.String, "measure": pl.String, "value": pl.Float64}, orient="row").sort(
        "measure", "qid")


def mean_metrics(run: pl.DataFrame, qrels: pl.DataFrame, measures: Sequence[str] = DEFAULT_MEASURES,
                 relevant_min: int = 1) -> dict[str, float]:
    """Mean of each measure over the evaluated queries (see :func:`per_query`)."""
    return measure_means(per_query(run, qrels, measures, relevant_min), measures)


def measure_means(per_query_values: pl.DataFrame, measures: Sequence[str]) -> dict[str, float]:
    """Mean value of each measure over the rows (qid, measure, value) of :func:`per_query` (nan when absent)."""
    means = dict(per_query_values.group_by("measure").agg(pl.col("value").mean()).iter_rows())
    return {m: float(means.get(m, float("nan"))) for m in measures}


def split_metrics(scores: pl.DataFrame, queries: pl.DataFrame, qrels: pl.DataFrame, split: str,
                  measures: Sequence[str] = DEFAULT_MEASURES, relevant_min: int = 1) -> dict[str, float]:
    """Mean metrics of a scored candidate list (qid, docid, score) over the queries of one split."""
    qids = queries.filter(pl.col("split") == split)["qid"].implode()
    return mean_metrics(scores.filter(pl.col("qid").is_in(qids)), qrels.filter(pl.col("qid").is_in(qids)), measures,
                        relevant_min)

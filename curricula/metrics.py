"""Ranking metrics with ir-measures (trec_eval semantics): runs and qrels as polars frames, per query and mean.

A run is (qid, docid, score); qrels are (qid, docid, rel). trec_eval ranks by score descending and breaks ties by
docid *descending*; ir-measures follows it, so metrics here equal trec_eval's on the same run file. Graded qrels are
binarised for binary measures with ``relevant_min`` (trec_eval's ``-l``): rel >= relevant_min counts as relevant.
"""

from __future__ import annotations

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


def per_query(run: pl.DataFrame, qrels: pl.DataFrame, measures: Sequence[str] = DEFAULT_MEASURES,
              relevant_min: int = 1) -> pl.DataFrame:
    """One row per (qid, measure) with the value, for the queries of ``qrels`` that appear in ``run``.

    Queries of the qrels that the run does not rank are left out (as trec_eval does without ``-c``); callers that
    need them counted as 0 add them explicitly.
    """
    ms = parse_measures(measures, relevant_min)
    names = {str(m): n for m, n in zip(ms, measures)}
    q = [ir_measures.Qrel(a, b, int(c)) for a, b, c in qrels.select("qid", "docid", "rel").iter_rows()]
    r = [ir_measures.ScoredDoc(a, b, float(c)) for a, b, c in run.select("qid", "docid", "score").iter_rows()]
    rows = [(m.query_id, names[str(m.measure)], float(m.value)) for m in ir_measures.iter_calc(ms, q, r)]
    return pl.DataFrame(rows, schema={"qid": pl.String, "measure": pl.String, "value": pl.Float64}, orient="row").sort(
        "measure", "qid")


def mean_metrics(run: pl.DataFrame, qrels: pl.DataFrame, measures: Sequence[str] = DEFAULT_MEASURES,
                 relevant_min: int = 1) -> dict[str, float]:
    """Mean of each measure over the evaluated queries (see :func:`per_query`)."""
    pq = per_query(run, qrels, measures, relevant_min)
    means = dict(pq.group_by("measure").agg(pl.col("value").mean()).iter_rows())
    return {m: float(means.get(m, float("nan"))) for m in measures}


def split_metrics(scores: pl.DataFrame, queries: pl.DataFrame, qrels: pl.DataFrame, split: str,
                  measures: Sequence[str] = DEFAULT_MEASURES, relevant_min: int = 1) -> dict[str, float]:
    """Mean metrics of a scored candidate list (qid, docid, score) over the queries of one split."""
    qids = queries.filter(pl.col("split") == split)["qid"].implode()
    return mean_metrics(scores.filter(pl.col("qid").is_in(qids)), qrels.filter(pl.col("qid").is_in(qids)), measures,
                        relevant_min)

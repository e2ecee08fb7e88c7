"""Test-set evaluation: trec_eval semantics on a hand-made run (ties, a query without relevant docs), R_n@k."""

from __future__ import annotations

import polars as pl
import pytest

from curricula.evaluate import cut_candidates, evaluate_run, mean_table, parse_rnk, ranked

RUN = pl.DataFrame({
    "qid": ["q1", "q1", "q1", "q2", "q2", "q4", "q4", "q4", "q4"],
    "docid": ["d1", "d2", "d3", "d4", "d5", "a", "b", "c", "d"],
    "score": [0.5, 0.5, 0.1, 0.9, 0.2, 4.0, 3.0, 2.0, 1.0],
})
QRELS = pl.DataFrame({
    "qid": ["q1", "q1", "q2", "q3", "q4", "q4"],
    "docid": ["d1", "d3", "d4", "d9", "b", "d"],
    "rel": [1, 0, 0, 1, 2, 1],
})


def values(metrics: pl.DataFrame, measure: str) -> dict[str, float]:
    return dict(metrics.filter(pl.col("measure") == measure).select("qid", "value").iter_rows())


def test_trec_eval_semantics_ties_and_queries_without_relevant_docs():
    m = evaluate_run(RUN, QRELS, ["AP", "RR@10", "P@1", "Rprec"])
    # q1: d1 ties d2 at 0.5; trec_eval orders ties by docid descending, so d2 comes first: AP = RR = 1/2, P@1 = 0
    # q2: no relevant document -> not evaluated; q3: its relevant doc is not ranked -> 0 for every measure
    # q4: relevant b (rank 2) and d (rank 4): AP = (1/2 + 2/4) / 2 = 0.5, RR = 0.5, Rprec = 1/2
    assert values(m, "AP") == pytest.approx({"q1": 0.5, "q3": 0.0, "q4": 0.5})
    assert values(m, "RR@10") == pytest.approx({"q1": 0.5, "q3": 0.0, "q4": 0.5})
    assert values(m, "P@1") == pytest.approx({"q1": 0.0, "q3": 0.0, "q4": 0.0})
    assert values(m, "Rprec") == pytest.approx({"q1": 0.0, "q3": 0.0, "q4": 0.5})
    assert mean_table(m)["AP"] == pytest.approx(1 / 3)
    graded = evaluate_run(RUN, QRELS, ["AP"], relevant_min=2)  # only q4's b counts
    assert values(graded, "AP") == pytest.approx({"q4": 0.5})


def test_rnk_cuts_to_n_candidates_with_every_relevant_one():
    assert parse_rnk("R10@2") == (10, 2) and parse_rnk("R@10") is None and parse_rnk("RR@10") is None
    cut = cut_candidates(RUN, QRELS, 2, seed=3)
    q4 = set(cut.filter(pl.col("qid") == "q4")["docid"])
    assert q4 == {"b", "d"}  # two relevant: nothing else fits in n = 2
    q1 = cut.filter(pl.col("qid") == "q1")
    assert "d1" in q1["docid"].to_list() and q1.height == 2
    assert cut.equals(cut_candidates(RUN.with_columns(score=-pl.col("score")), QRELS, 2, seed=3)
                      .with_columns(score=-pl.col("score")))  # the cut ignores scores: the same for every ranker
    m = evaluate_run(RUN, QRELS, ["R2@1", "R10@1", "R10@2"], seed=3)
    other = q1.filter(pl.col("docid") != "d1")["docid"][0]
    assert values(m, "R2@1")["q1"] == (0.0 if other == "d2" else 1.0)  # d2 ties d1 and wins the tie
    assert values(m, "R2@1")["q4"] == 0.5 and values(m, "R10@2")["q4"] == 0.5 and values(m, "R10@1")["q4"] == 0.0
    assert values(m, "R10@2")["q1"] == 1.0 and values(m, "R10@1")["q1"] == 0.0


def test_ranked_orders_ties_like_trec_eval():
    r = ranked(RUN.filter(pl.col("qid") == "q1"))
    assert r["docid"].to_list() == ["d2", "d1", "d3"] and r["rank"].to_list() == [1, 2, 3]

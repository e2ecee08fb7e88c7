"""Test-set evaluation: trec_eval semantics on a hand-made run (ties, a query without relevant docs), R_n@k."""

from __future__ import annotations

import polars as pl
import pytest

from curricula.evaluation.rerank import (
    additivity_weights,
    cut_candidates,
    evaluate_run,
    interpolate,
    mean_table,
    minmax_per_query,
    parse_rnk,
    ranked,
    tune_additivity,
)

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


# ------------------------------------------------------------------------------------------ score additivity
NEURAL = pl.DataFrame({"qid": ["a", "a", "a", "b", "b"], "docid": ["x", "y", "z", "u", "v"],
                       "score": [2.0, 0.0, 1.0, 5.0, 5.0]})
BM25 = pl.DataFrame({"qid": ["a", "a", "a", "b", "b"], "docid": ["x", "y", "z", "u", "v"],
                     "score": [1.0, 9.0, 5.0, 3.0, 7.0]})


def test_interpolation_normalises_per_query_and_ends_at_either_ranker():
    norm = dict(zip(minmax_per_query(NEURAL)["docid"], minmax_per_query(NEURAL)["score"]))
    assert norm == {"x": 1.0, "y": 0.0, "z": 0.5, "u": 0.0, "v": 0.0}  # b: all equal -> 0
    mixed = interpolate(NEURAL, BM25, 0.25)
    # a: x 0.25*1 + 0.75*0 = 0.25; y 0 + 0.75*1 = 0.75; z 0.25*0.5 + 0.75*0.5 = 0.5; b: u 0 + 0.75*0 = 0, v 0.75
    assert dict(zip(mixed["docid"], mixed["score"])) == pytest.approx({"x": 0.25, "y": 0.75, "z": 0.5, "u": 0.0,
                                                                       "v": 0.75})
    order = lambda df: ranked(df)["docid"].to_list()  # noqa: E731
    assert order(interpolate(NEURAL, BM25, 1.0)) == order(NEURAL)
    assert order(interpolate(NEURAL, BM25, 0.0)) == order(BM25)
    with pytest.raises(ValueError, match="no BM25 score"):
        interpolate(NEURAL, BM25.head(4), 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        interpolate(NEURAL, BM25, 1.5)
    assert additivity_weights(4) == [1.0, 0.75, 0.5, 0.25, 0.0]


def test_additivity_weight_is_the_dev_argmax_most_neural_on_ties():
    qrels = pl.DataFrame({"qid": ["a", "b"], "docid": ["z", "u"], "rel": [1, 1]})
    # a's relevant z is 2nd for the ranker alone (w = 1) and for BM25 alone (w = 0); at w = 0.5 it ties x and y
    # (0.5 each) and wins on trec_eval's docid-descending tie order; b's u is below v for every w < 1 (BM25 3 < 7)
    grid = tune_additivity(NEURAL, BM25, qrels, "AP", additivity_weights(4))
    assert grid["value"].to_list() == [0.5, 0.5, 0.75, 0.5, 0.5] and grid["chosen"].to_list() == [0, 0, 1, 0, 0]
    flat = tune_additivity(NEURAL, BM25, qrels.filter(pl.col("qid") == "b"), "AP", additivity_weights(4))
    assert flat["value"].to_list() == [0.5] * 5 and flat["chosen"].to_list() == [1, 0, 0, 0, 0]  # ties: most neural
    with pytest.raises(ValueError, match="ir-measures"):
        tune_additivity(NEURAL, BM25, qrels, "R10@1", [1.0])

"""Metrics through ir-measures on hand-computed examples."""

from __future__ import annotations

import polars as pl
import pytest

from curricula.evaluation.metrics import mean_metrics, per_query

RUN = pl.DataFrame({"qid": ["a", "a", "b", "b"], "docid": ["x", "y", "x", "z"], "score": [2.0, 1.0, 1.0, 3.0]})
QRELS = pl.DataFrame({"qid": ["a", "a", "b", "b"], "docid": ["x", "y", "x", "z"], "rel": [0, 1, 2, 1]})


def test_map_mrr_p1_by_hand():
    # a: the relevant y is 2nd -> AP 0.5, RR 0.5, P@1 0; b: z (1st) and x (2nd) relevant -> AP 1, RR 1, P@1 1
    got = mean_metrics(RUN, QRELS, ["AP", "RR@10", "P@1"])
    assert got == pytest.approx({"AP": 0.75, "RR@10": 0.75, "P@1": 0.5})
    pq = per_query(RUN, QRELS, ["AP"])
    assert dict(zip(pq["qid"], pq["value"])) == pytest.approx({"a": 0.5, "b": 1.0})


def test_relevant_min_counts_only_high_grades():
    # only b's x (grade 2) is relevant: a has none (AP 0), b has it at rank 2 (AP 0.5)
    assert mean_metrics(RUN, QRELS, ["AP"], relevant_min=2)["AP"] == pytest.approx(0.25)

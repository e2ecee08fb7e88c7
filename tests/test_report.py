"""Significance tests and the papers' tables on synthetic per-query metrics with known answers."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from curricula.report import holm, mark, metrics_table, paired_ttest, seeds_table, to_markdown


def test_paired_ttest_matches_the_textbook_formula():
    a = [0.5, 0.7, 0.2, 0.9, 0.4, 0.6]
    b = [0.4, 0.5, 0.25, 0.6, 0.35, 0.5]
    d = np.subtract(a, b)
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    expected = 2 * stats.t.sf(abs(t), df=len(d) - 1)
    assert paired_ttest(a, b) == pytest.approx(expected, rel=1e-12)
    assert paired_ttest(a, a) == 1.0  # no difference at all
    with pytest.raises(ValueError):
        paired_ttest([1, 2], [1, 2, 3])


def test_holm_and_marks():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])  # 3*0.01, max(2*0.03, .), 1*0.04 -> 0.06
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert [mark(p) for p in (0.009, 0.01, 0.049, 0.05)] == ["‡", "†", "†", ""]
    assert [mark(p, -0.1) for p in (0.009, 0.049, 0.05)] == ["↓↓", "↓", ""]  # a reduction is never a dagger


def long_metrics() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for seed in ("1", "2", "3"):
        base = rng.uniform(0.2, 0.6, 40)
        for name, shift in (("baseline", 0.0), ("better", 0.2), ("same", 0.0), ("worse", -0.2)):
            noise = rng.normal(0, 0.01, 40) if name != "baseline" else 0
            for q, v in enumerate(base + shift + noise):
                rows.append((name, seed, f"q{q}", "AP", float(v)))
                rows.append((name, seed, f"q{q}", "P@1", float(v > 0.5)))
    return pl.DataFrame(rows, schema=["experiment", "seed", "qid", "measure", "value"], orient="row")


def test_seeds_table_rows_values_and_marks():
    m = long_metrics()
    t = seeds_table(m, "AP")
    assert t["row"].to_list() == ["seed 1", "seed 2", "seed 3", "AVG", "SD"]
    assert t.columns[:5] == ["row", "baseline", "better", "same", "worse"]
    assert t["worse_mark"].to_list()[:4] == ["↓↓"] * 4
    seed1 = m.filter((pl.col("seed") == "1") & (pl.col("measure") == "AP"))
    assert t["better"][0] == pytest.approx(seed1.filter(pl.col("experiment") == "better")["value"].mean())
    assert t["better_mark"].to_list()[:4] == ["‡"] * 4 and t["baseline_mark"][3] == ""
    means = [t["better"][i] for i in range(3)]
    assert t["better"][3] == pytest.approx(np.mean(means)) and t["better"][4] == pytest.approx(np.std(means, ddof=1))
    md = to_markdown(t, "row")
    assert "| row | baseline | better | same | worse |" in md and "‡" in md


def test_metrics_table_with_references():
    m = long_metrics()
    refs = m.filter(pl.col("experiment") == "baseline").with_columns(experiment=pl.lit("bm25"),
                                                                        value=pl.col("value") * 0.5)
    t = metrics_table(m, ["AP", "P@1"], references=refs)
    assert t["ranker"].to_list() == ["baseline", "better", "same", "worse", "bm25"]
    assert t.filter(pl.col("ranker") == "bm25")["AP"][0] == pytest.approx(
        m.filter((pl.col("experiment") == "baseline") & (pl.col("measure") == "AP"))["value"].mean() * 0.5)
    assert t.filter(pl.col("ranker") == "better")["AP_mark"][0] == "‡"


def test_tables_are_bit_identical_whatever_the_row_order():
    """Means sum in one fixed order: the same rows in another order give the same bytes (the default run once
    differed in the last bit of a mean between two runs of the same config)."""
    m = long_metrics()
    refs = m.filter(pl.col("experiment") == "baseline").with_columns(experiment=pl.lit("bm25"))
    tables = []
    for seed in range(6):
        shuffled, shuffled_refs = m.sample(fraction=1.0, shuffle=True, seed=seed), refs.sample(
            fraction=1.0, shuffle=True, seed=seed)
        tables.append((metrics_table(shuffled, ["AP", "P@1"], references=shuffled_refs), seeds_table(shuffled, "AP")))
    for metrics, seeds in tables[1:]:
        assert metrics.equals(tables[0][0]) and seeds.equals(tables[0][1])
        assert metrics.write_csv() == tables[0][0].write_csv()  # every digit, not only equal within tolerance

"""Significance tests and the papers' tables on synthetic per-query metrics with known answers."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from curricula.report import (baseline_of, experiment_order, holm, mark, mde, mde_sentence, metrics_table,
                               paired_pvalue, paired_randomization, paired_ttest, paired_wilcoxon, power_table,
                               queries_needed, seeds_table, tables_stage, to_markdown)


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


def test_mde_matches_a_hand_computation():
    d = [0.1, 0.3, -0.1, 0.2, 0.0, 0.1, 0.4, -0.2, 0.2, 0.0]
    # n = 10, sum 1.0, mean 0.1; deviations 0, .2, -.2, .1, -.1, 0, .3, -.3, .1, -.1; squares sum to 0.30
    # s^2 = 0.30 / 9, s = 0.182574; s / sqrt(10) = sqrt(0.30 / 90) = 0.057735
    # t table, df 9: t_0.975 = 2.262157, t_0.80 = 0.883404 -> MDE = 3.145561 * 0.057735 = 0.181609
    assert mde(d) == pytest.approx((2.262157 + 0.883404) * math.sqrt(0.30 / 9) / math.sqrt(10), rel=1e-6)
    assert mde(d) == pytest.approx(0.181609, abs=1e-6)
    assert math.isnan(mde([0.1])) and math.isnan(mde([]))
    with pytest.raises(ValueError):
        mde(d, alpha=0)


def _with_sd(n: int, sd: float) -> np.ndarray:
    """n differences whose sample SD (ddof=1) is exactly ``sd``."""
    z = np.random.default_rng(n).normal(size=n)
    return 0.05 + sd * (z - z.mean()) / z.std(ddof=1)


@pytest.mark.parametrize("sd,effect", [(0.2, 0.009), (0.3, 0.05), (0.05, 0.04), (0.25, 0.001)])
def test_queries_needed_inverts_mde(sd, effect):
    n = queries_needed(sd, effect)
    assert mde(_with_sd(n, sd)) <= effect < mde(_with_sd(n - 1, sd))
    z = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * sd / effect
    assert n >= z * z  # t quantiles exceed z ones
    assert queries_needed(0.0, 0.01) == 2  # no variability: the smallest n with a t-test
    with pytest.raises(ValueError):
        queries_needed(0.2, 0.0)
    with pytest.raises(OverflowError):
        queries_needed(1.0, 1e-9)


def test_randomization_matches_the_exact_enumeration_of_all_sign_flips():
    rng = np.random.default_rng(3)
    a = rng.uniform(0.2, 0.8, 10)
    b = a - rng.normal(0.05, 0.1, 10)
    d = a - b
    signs = 1 - 2 * ((np.arange(1024)[:, None] >> np.arange(10)) & 1)  # all 2^10 sign vectors
    exact = np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-12)  # the observed one included
    estimate = paired_randomization(a, b, permutations=200_000, seed=1)
    assert 0.01 < exact < 0.2 and estimate == pytest.approx(exact, abs=0.004)  # exact 0.0898; Monte-Carlo SD 0.0006
    assert paired_randomization(a, b, permutations=1000, seed=5) == paired_randomization(a, b, permutations=1000,
                                                                                            seed=5)
    # ties are counted up to rounding: P@1-like 0/1 values, a single discordant query gives p = 1
    assert paired_randomization([1, 0, 0, 0], [0, 0, 0, 0], permutations=2000, seed=0) == 1.0
    assert paired_randomization(a, a, permutations=10) == 1.0


def test_randomization_and_ttest_agree_with_ranx():
    """ranx (a peer implementation, test-only): compare(..., stat_test="fisher" / "student") on the nDCG@10 of two
    random runs. Continuous per-query values on purpose: ranx compares float means with a bare ``>=``, so on tied
    sums (P@k, RR) rounding drops some ties and its p is low (P@10 on 60 queries: 0.216 against 0.237 by exact
    integer arithmetic; ours 0.232)."""
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(0)
    rel = rng.integers(0, 4, (80, 20)) * (rng.random((80, 20)) < 0.4)  # graded labels of 20 documents x 80 queries
    qrels = ranx.Qrels({f"q{i}": {f"d{j}": int(rel[i, j]) for j in range(20) if rel[i, j]} or {"d0": 1}
                        for i in range(80)})
    shared = rel + rng.normal(0, 2.0, rel.shape)
    runs = [ranx.Run({f"q{i}": {f"d{j}": float(score[i, j]) for j in range(20)} for i in range(80)}, name=name)
            for name, score in (("a", shared + rng.normal(0, 1.5, rel.shape)),
                                ("b", shared + rng.normal(0, 1.5, rel.shape) - 0.15 * rel))]
    a, b = (ranx.evaluate(qrels, run, "ndcg@10", return_mean=False) for run in runs)

    def peer(test):
        report = ranx.compare(qrels, runs, ["ndcg@10"], stat_test=test, n_permutations=10_000, random_seed=42)
        return report.comparisons["a", "b"]["ndcg@10"]["p_value"]

    ours_t, ours_r = paired_ttest(a, b), paired_randomization(a, b, permutations=10_000, seed=42)
    assert 0.05 < ours_r < 0.5  # a p value where Monte-Carlo error matters (SD ~0.004 at 10k flips)
    assert ours_t == pytest.approx(peer("student"), rel=1e-9)
    assert abs(ours_r - peer("fisher")) < 0.02


def test_paired_pvalue_dispatches_and_rejects_unknown_tests():
    a = [0.5, 0.7, 0.2, 0.9, 0.4, 0.6, 0.8, 0.3]
    b = [0.4, 0.5, 0.25, 0.6, 0.35, 0.5, 0.7, 0.3]
    assert paired_pvalue(a, b, "ttest") == paired_ttest(a, b)
    assert paired_pvalue(a, b, "wilcoxon") == paired_wilcoxon(a, b) != paired_ttest(a, b)
    assert paired_pvalue(a, b, "randomization", permutations=500, seed=3) == paired_randomization(
        a, b, permutations=500, seed=3)
    assert all(paired_pvalue(a, a, t, permutations=10) == 1.0 for t in ("ttest", "wilcoxon", "randomization"))
    for bad in ("t-test", "fisher", ""):
        with pytest.raises(ValueError, match="unknown paired test"):
            paired_pvalue(a, b, bad)
    with pytest.raises(ValueError):
        paired_pvalue(a, b[:-1], "wilcoxon")


def test_seeds_and_metrics_tables_use_the_configured_test():
    m = long_metrics()
    for test in ("randomization", "wilcoxon"):
        t = seeds_table(m, "AP", test=test, permutations=2000, seed=1)
        assert t["better_mark"].to_list()[:4] == ["‡"] * 4 and t["worse_mark"].to_list()[:4] == ["↓↓"] * 4
        assert metrics_table(m, ["AP"], test=test, permutations=2000, seed=1)["AP_mark"].to_list() == [
            "", "‡", "", "↓↓"]


def bm25_metrics() -> pl.DataFrame:
    """baseline, x = baseline + 0.2, baseline+bm25 = baseline + 0.3 and x+bm25 = baseline + 0.25: x+bm25 beats
    the plain baseline but is worse than baseline+bm25, the one it is compared with."""
    rng = np.random.default_rng(1)
    rows = []
    for seed in ("1", "2"):
        base = rng.uniform(0.2, 0.6, 30)
        for name, shift in (("x+bm25", 0.25), ("baseline+bm25", 0.3), ("x", 0.2), ("baseline", 0.0)):
            noise = rng.normal(0, 0.01, 30) if name != "baseline" else 0
            rows += [(name, seed, f"q{q}", "AP", float(v)) for q, v in enumerate(base + shift + noise)]
    return pl.DataFrame(rows, schema=["experiment", "seed", "qid", "measure", "value"], orient="row")


def test_bm25_rows_are_compared_with_baseline_bm25():
    assert [baseline_of(e) for e in ("x", "baseline", "x+bm25", "baseline+bm25")] == [
        "baseline", "baseline", "baseline+bm25", "baseline+bm25"]
    assert experiment_order({"z", "x+bm25", "baseline+bm25", "a", "baseline"}) == [
        "baseline", "a", "z", "baseline+bm25", "x+bm25"]
    assert experiment_order({"x+bm25"}) == ["baseline+bm25", "x+bm25"]  # missing baseline: an error later
    m = bm25_metrics()
    for test in ("ttest", "randomization"):
        seeds = seeds_table(m, "AP", test=test, permutations=2000)
        assert seeds.columns[:5] == ["row", "baseline", "x", "baseline+bm25", "x+bm25"]
        assert seeds["x+bm25_mark"].to_list()[:3] == ["↓↓"] * 3 and seeds["x_mark"].to_list()[:3] == ["‡"] * 3
        assert seeds["baseline+bm25_mark"].to_list() == [""] * 4
        table = metrics_table(m, ["AP"], test=test, permutations=2000)
        assert table["ranker"].to_list() == ["baseline", "x", "baseline+bm25", "x+bm25"]
        assert table["AP_mark"].to_list() == ["", "‡", "", "↓↓"]
    power = power_table(m, "AP")
    assert power["experiment"].to_list() == ["x", "x+bm25"]
    assert power["baseline"].to_list() == ["baseline", "baseline+bm25"]
    assert power["difference"].to_list() == pytest.approx([0.2, -0.05], abs=0.01)
    with pytest.raises(ValueError, match="different queries"):
        seeds_table(m.filter(pl.col("experiment") != "baseline+bm25"), "AP")


def test_power_table_columns_and_the_mde_sentence():
    m = long_metrics()
    power = power_table(m, "AP", test="randomization", permutations=2000, seed=3)
    assert power.columns == ["experiment", "baseline", "queries", "baseline_mean", "experiment_mean", "difference",
                             "sd", "p_ttest", "p_randomization", "mde", "mde_pct", "queries_2pct"]
    assert "p_randomization" not in power_table(m, "AP").columns  # the t-test alone when it is the configured test
    assert power["experiment"].to_list() == ["better", "same", "worse"]
    avg = m.filter(pl.col("measure") == "AP").group_by("experiment", "qid").agg(pl.col("value").mean()).sort("qid")
    base = avg.filter(pl.col("experiment") == "baseline")["value"].to_numpy()
    better = avg.filter(pl.col("experiment") == "better")["value"].to_numpy()
    row = power.row(0, named=True)
    d = better - base
    assert row["queries"] == 40 and row["baseline_mean"] == pytest.approx(base.mean())
    assert row["difference"] == pytest.approx(d.mean()) and row["sd"] == pytest.approx(d.std(ddof=1))
    assert row["mde"] == pytest.approx(mde(d)) and row["mde_pct"] == pytest.approx(100 * mde(d) / base.mean())
    assert row["queries_2pct"] == queries_needed(d.std(ddof=1), 0.02 * base.mean())
    assert row["p_ttest"] == pytest.approx(paired_ttest(better, base)) and row["p_randomization"] < 0.01
    sentence = mde_sentence(power, "AP")
    median = float(np.median(power["mde"].to_numpy()))
    assert sentence.startswith(f"With 40 test queries the seed-averaged paired comparison detects (alpha 0.05, "
                               f"power 0.8) differences of AP ≥ {median:.3f} (")
    assert f"of the baseline's {base.mean():.4f}; median over experiments); a 2% effect would need " in sentence
    assert mde_sentence(power.clear(), "AP") == ""


def test_tables_stage_writes_the_power_table_and_states_the_test(tmp_path):
    m = long_metrics()
    paths = {}
    for (name, seed), part in m.group_by("experiment", "seed"):
        paths[(name, seed)] = tmp_path / f"{name}_{seed}.parquet"
        part.select("qid", "measure", "value").write_parquet(paths[(name, seed)])
    outputs = {k: tmp_path / "report" / f"table_{k}.csv" for k in ("seeds", "metrics", "power")}
    out = tables_stage(paths, {}, outputs, measure="AP", measures=["AP", "P@1"], use_holm=False, dataset="toy",
                       test="randomization", permutations=1000, seed=42)
    assert pl.read_parquet(tmp_path / "report" / "table_power.parquet").equals(out["power"])
    assert (tmp_path / "report" / "table_power.csv").exists()
    metrics_md = (tmp_path / "report" / "table_metrics.md").read_text()
    assert "paired randomization test (1,000 random sign flips, seed 42)" in metrics_md
    assert "With 40 test queries" in metrics_md and "| ranker | AP | P@1 |" in metrics_md
    assert "p_randomization" in (tmp_path / "report" / "table_power.md").read_text()
    with pytest.raises(ValueError, match="unknown paired test"):
        tables_stage(paths, {}, outputs, measure="AP", measures=["AP"], use_holm=False, dataset="toy", test="z")


def test_randomization_tables_are_bit_identical_whatever_the_row_order():
    m = bm25_metrics()
    first = None
    for seed in range(3):
        shuffled = m.sample(fraction=1.0, shuffle=True, seed=seed)
        got = tuple(f(shuffled).write_csv() for f in (
            lambda x: seeds_table(x, "AP", test="randomization", permutations=3000, seed=7),
            lambda x: metrics_table(x, ["AP"], test="randomization", permutations=3000, seed=7),
            lambda x: power_table(x, "AP", test="randomization", permutations=3000, seed=7)))
        first = first or got
        assert got == first

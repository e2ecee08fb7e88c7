"""Significance tests and the papers' tables on synthetic per-query metrics with known answers."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from curricula.report import (adjust, baseline_of, cheapest, design_mde, design_queries, equivalence_pvalue,
                               experiment_order, holm, mark, mde, mde_sentence, metrics_table, paired_cells,
                               paired_pvalue, paired_randomization, paired_ttest, paired_wilcoxon, plan,
                               plan_sentence, pool_components, power_table, queries_needed, seed_aware_mde,
                               seed_aware_test, seed_query_components, seeds_table, tables_stage, to_markdown)


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
    assert abs(ours_r - peer("fisher")) < 0.01  # 0.2237 against 0.2246 (Monte-Carlo SD ~0.004 each)


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
    power = power_table(m, "AP", test="randomization", permutations=2000, seed=3, inference="per_query")
    assert power.columns == ["experiment", "baseline", "seeds", "queries", "baseline_mean", "experiment_mean",
                             "difference", "sd", "sd_seed", "sd_query", "sd_resid", "se", "df", "p_seed_aware",
                             "p_ttest", "p_randomization", "mde", "mde_pct", "queries_2pct"]
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
    sentence = mde_sentence(power, "AP", inference="per_query")
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


# ------------------------------------------------------------------------------------------- seed-aware inference
def _crossed(rng: np.random.Generator, seeds: int, queries: int, mu: float, sd_seed: float, sd_query: float,
             sd_resid: float) -> np.ndarray:
    """Differences d[s, q] = mu + a_s + b_q + e_sq of the crossed random-effects model."""
    return (mu + rng.normal(0, sd_seed, (seeds, 1)) + rng.normal(0, sd_query, (1, queries))
            + rng.normal(0, sd_resid, (seeds, queries)))


def test_seed_query_components_are_the_anova_moments():
    d = np.array([[0.1, 0.3, 0.2, 0.6], [0.0, 0.1, 0.3, 0.4], [0.2, 0.5, 0.4, 0.5]])
    c = seed_query_components(d)
    grand, by_seed, by_query = d.mean(), d.mean(axis=1), d.mean(axis=0)
    ms_seed = 4 * ((by_seed - grand) ** 2).sum() / 2
    ms_query = 3 * ((by_query - grand) ** 2).sum() / 3
    ms_resid = ((d - by_seed[:, None] - by_query + grand) ** 2).sum() / 6
    assert (c.ms_seed, c.ms_query, c.ms_resid) == pytest.approx((ms_seed, ms_query, ms_resid), rel=1e-12)
    assert c.var_seed == pytest.approx(max(0, (ms_seed - ms_resid) / 4))
    assert c.var_query == pytest.approx((ms_query - ms_resid) / 3) and c.var_resid == pytest.approx(ms_resid)
    # sums of squares add up to the total
    total = ((d - grand) ** 2).sum()
    assert 2 * ms_seed + 3 * ms_query + 6 * ms_resid == pytest.approx(total)
    r = seed_aware_test(d)
    v = (ms_seed + ms_query - ms_resid) / 12
    df = (ms_seed + ms_query - ms_resid) ** 2 / (ms_seed ** 2 / 2 + ms_query ** 2 / 3 + ms_resid ** 2 / 6)
    assert r.se == pytest.approx(math.sqrt(v)) and r.df == pytest.approx(df)
    assert r.p == pytest.approx(2 * stats.t.sf(grand / math.sqrt(v), df))
    assert (r.ci_low, r.ci_high) == pytest.approx(stats.t.interval(0.95, df, loc=grand, scale=math.sqrt(v)))
    with pytest.raises(ValueError):
        seed_query_components(np.array([0.1, 0.2]))


def test_with_one_seed_the_seed_aware_test_is_the_per_query_t_test():
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.2, 0.8, 60), rng.uniform(0.2, 0.8, 60)
    r = seed_aware_test((a - b)[None, :])
    assert r.p == pytest.approx(paired_ttest(a, b), rel=1e-9) and r.df == 59
    assert (r.ci_low, r.ci_high) == pytest.approx(stats.t.interval(0.95, 59, loc=(a - b).mean(),
                                                                   scale=stats.sem(a - b)), rel=1e-9)
    assert seed_aware_mde(r) == pytest.approx(mde(a - b), rel=1e-9)
    # every difference equal: decided for a non-zero mean, p 1 for none
    assert seed_aware_test(np.full((3, 5), 0.1)).p == 0.0 and seed_aware_test(np.zeros((3, 5))).p == 1.0


def test_a_seed_spread_below_the_residual_noise_never_makes_the_seed_aware_test_more_decided():
    """No seed variance and, by chance, seed means closer than the residual noise predicts (MS_seed < MS_resid,
    as on the WikiQA study's HCL claims): the unbiased combination would give a smaller SE than the per-query test;
    the negative seed estimate is taken as zero and the test is the per-query t-test on seed-averaged values."""
    rng = np.random.default_rng(0)
    d = 0.01 + rng.normal(0, 0.1, (1, 300)) + rng.normal(0, 0.25, (3, 300))
    r = seed_aware_test(d)
    assert r.components.ms_seed < r.components.ms_resid  # the case under test
    averaged = d.mean(axis=0)
    assert r.p == pytest.approx(stats.ttest_1samp(averaged, 0.0).pvalue, rel=1e-9) and r.df == 299
    assert r.se == pytest.approx(stats.sem(averaged), rel=1e-9)
    for k in range(20):  # and in general the seed-aware SE is at least the per-query one
        d = _crossed(np.random.default_rng(100 + k), seeds=3, queries=200, mu=0.0, sd_seed=0.005, sd_query=0.1,
                     sd_resid=0.2)
        assert seed_aware_test(d).se >= stats.sem(d.mean(axis=0)) * (1 - 1e-12)


def test_seed_variance_dominates_per_query_p_below_005_seed_aware_p_not():
    """The issue's case: three seeds whose training draws move the difference by far more than the queries do.
    Averaged over seeds the per-query test sees 1,000 consistent differences (p < 0.05); the seed-aware test sees
    three seed means that disagree (p > 0.05)."""
    d = _crossed(np.random.default_rng(5), seeds=3, queries=1000, mu=0.0, sd_seed=0.03, sd_query=0.1,
                 sd_resid=0.05)
    per_query = stats.ttest_1samp(d.mean(axis=0), 0.0).pvalue
    r = seed_aware_test(d)
    assert per_query < 1e-9 and r.p > 0.1  # 1.8e-10 and 0.152 (effect -0.021, SE 0.0033 against 0.0103)
    assert r.components.var_seed > r.components.var_query / 1000 + r.components.var_resid / 3000  # seeds dominate
    assert r.df < 5  # Satterthwaite's df is near S - 1 = 2 when the seed term dominates (2.4)
    assert r.se > 2 * stats.sem(d.mean(axis=0))  # the per-query SE leaves the seeds' spread out


def test_seed_aware_ci_covers_the_true_mean_where_the_per_query_one_does_not():
    """400 draws from known components with seed variance dominating: the seed-aware 95% CI covers the true mean
    in about 95% of them, the per-query t interval on seed-averaged values far less often."""
    rng = np.random.default_rng(11)
    mu, hits_seed_aware, hits_per_query = 0.01, 0, 0
    for _ in range(400):
        d = _crossed(rng, seeds=5, queries=200, mu=mu, sd_seed=0.03, sd_query=0.1, sd_resid=0.05)
        r = seed_aware_test(d)
        hits_seed_aware += r.ci_low <= mu <= r.ci_high
        averaged = d.mean(axis=0)
        low, high = stats.t.interval(0.95, averaged.size - 1, loc=averaged.mean(), scale=stats.sem(averaged))
        hits_per_query += low <= mu <= high
    assert 0.90 <= hits_seed_aware / 400 <= 0.99  # 0.9475
    assert hits_per_query / 400 < 0.8  # 0.6475


def seed_dominated_metrics() -> pl.DataFrame:
    """baseline and x on 3 seeds x 1,000 queries: x - baseline = 0 + seed effect + query effect + noise (seed SD
    0.03, the draw of the seed-dominance test), so the per-query test marks x and the seed-aware one does not."""
    d = _crossed(np.random.default_rng(5), seeds=3, queries=1000, mu=0.0, sd_seed=0.03, sd_query=0.1, sd_resid=0.05)
    base = np.random.default_rng(8).uniform(0.3, 0.7, (3, 1000))
    rows = [(name, str(s + 1), f"q{q:04d}", "AP", float(v[s, q])) for name, v in (("baseline", base), ("x", base + d))
            for s in range(3) for q in range(1000)]
    return pl.DataFrame(rows, schema=["experiment", "seed", "qid", "measure", "value"], orient="row")


def test_tables_mark_by_the_seed_aware_test_and_keep_the_per_query_mark():
    m = seed_dominated_metrics()
    table = metrics_table(m, ["AP"])
    x = table.row(1, named=True)
    assert x["AP_mark"] == "" and x["AP_mark_per_query"] == "↓↓"
    assert f"({x['AP_mark_per_query']})" in to_markdown(table, "ranker")
    assert metrics_table(m, ["AP"], inference="per_query")["AP_mark"][1] == x["AP_mark_per_query"]
    assert "AP_mark_per_query" not in metrics_table(m, ["AP"], inference="per_query").columns
    seeds = seeds_table(m, "AP")
    assert seeds["x_mark"][3] == "" and seeds["x_mark_per_query"][3] == x["AP_mark_per_query"]
    power = power_table(m, "AP").row(0, named=True)
    assert power["p_seed_aware"] >= 0.05 > power["p_ttest"] and power["seeds"] == 3
    with pytest.raises(ValueError, match="unknown inference"):
        metrics_table(m, ["AP"], inference="bayes")


def test_unbalanced_designs_are_refused_naming_experiment_and_seed():
    m = seed_dominated_metrics()
    gap = m.filter(~((pl.col("experiment") == "x") & (pl.col("seed") == "2") & (pl.col("qid") == "q0007")))
    with pytest.raises(ValueError, match="unbalanced design: x, seed 2 has 999"):
        paired_cells(gap, "x", "AP")
    fewer = m.filter(~((pl.col("experiment") == "x") & (pl.col("seed") == "3")))
    with pytest.raises(ValueError, match=r"x and baseline ran with different seeds \(AP\): x has \['1', '2'\]"):
        metrics_table(fewer, ["AP"])
    assert metrics_table(fewer, ["AP"], inference="per_query").height == 2  # per-query averages what there is
    a, b = paired_cells(m, "x", "AP")
    assert a.shape == b.shape == (3, 1000)


def test_the_planner_inverts_the_design_mde():
    components = (0.02 ** 2, 0.1 ** 2, 0.05 ** 2)
    for seeds in (2, 3, 5, 10):
        q = design_queries(components, 0.04, seeds)
        if q is None:
            continue
        assert design_mde(components, seeds, q) <= 0.04 < design_mde(components, seeds, q - 1)
    needed = plan(components, 0.04)
    assert list(needed) == list(range(2, 11))
    assert needed[2] is None  # two seeds: s2_seed / 2 alone with df near 1 is too wide
    got = [q for q in needed.values() if q is not None]
    assert got == sorted(got, reverse=True)  # more seeds, fewer queries
    assert cheapest(needed) == next((s, q) for s, q in needed.items() if q is not None)
    assert cheapest({2: None, 3: None}) is None
    # no seed variance: the t approximation with ~S Q - 1 df, close to the per-query formula with sd^2 = s2_q + s2_e/S
    q = design_queries((0.0, 0.1 ** 2, 0.0), 0.01, 1)
    assert q == queries_needed(0.1, 0.01)
    sentence = plan_sentence(components, 0.04, 3, "AP")
    assert "pooled over the 3 compared pairs" in sentence and f"cheapest: {cheapest(needed)[0]} seeds" in sentence
    assert pool_components([(1.0, 2.0, 3.0), (3.0, 4.0, 5.0)]) == (2.0, 3.0, 4.0)


def test_equivalence_is_two_one_sided_tests():
    rng = np.random.default_rng(3)
    d = _crossed(rng, seeds=3, queries=500, mu=0.001, sd_seed=0.002, sd_query=0.05, sd_resid=0.02)
    r = seed_aware_test(d)
    margin = 0.015
    lower = stats.t.sf((r.effect + margin) / r.se, r.df)
    upper = stats.t.cdf((r.effect - margin) / r.se, r.df)
    assert equivalence_pvalue(r, margin) == pytest.approx(max(lower, upper)) and equivalence_pvalue(r, margin) < 0.05
    assert equivalence_pvalue(r, 0.0005) > 0.5  # a margin inside the estimate: not equivalent
    with pytest.raises(ValueError):
        equivalence_pvalue(r, 0.0)


def test_multiplicity_adjustments_match_scipy_and_a_hand_computation():
    p = [0.01, 0.04, 0.03, 0.005, math.nan]
    # Holm over the 4 finite: sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005 = 0.02, 3*0.01 = 0.03, 2*0.03 = 0.06, 0.04
    # (monotone: 0.06)
    assert adjust(p, "holm")[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02]) and math.isnan(adjust(p, "holm")[4])
    assert adjust(p, "bh")[:4] == pytest.approx(stats.false_discovery_control(p[:4], method="bh"))
    # BH by hand: sorted 0.005, 0.01, 0.03, 0.04 -> 4/1*0.005 = 0.02, 4/2*0.01 = 0.02, 4/3*0.03 = 0.04, 0.04
    assert adjust(p, "bh")[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust(p, "none")[:4] == p[:4]
    with pytest.raises(ValueError, match="unknown multiplicity"):
        adjust(p, "bonferroni")

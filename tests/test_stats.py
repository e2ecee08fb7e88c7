"""The fixed-design statistics of curricula/statistics/: per-query paired tests, the seed-aware test, equivalence,
multiplicity and the planner, on synthetic data with known answers and seeded simulations (the tests' error rates by
simulation and their check on a real run: tests/test_error_rates.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from curricula.report.tables import plan_sentence
from curricula.statistics.multiplicity import adjust, holm
from curricula.statistics.paired import paired_pvalue, paired_randomization, paired_ttest, paired_wilcoxon
from curricula.statistics.power import (
    cheapest,
    design_mde,
    design_queries,
    design_seeds,
    mde,
    plan,
    pool_components,
    queries_needed,
    seed_aware_mde,
    seed_sd_interval,
    with_seed_sd,
)
from curricula.statistics.seed_aware import mean_variance, seed_aware_test, seed_query_components
from curricula.statistics.verdicts import equivalence_pvalue
from tests.crossed_draws import _crossed


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


@pytest.mark.slow
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
        report = ranx.compare(qrels, runs, ["ndcg@10"], stat_test=test, n_permutations=100_000, random_seed=42)
        return report.comparisons["a", "b"]["ndcg@10"]["p_value"]

    ours_t, ours_r = paired_ttest(a, b), paired_randomization(a, b, permutations=100_000, seed=42)
    # a p value where Monte-Carlo error matters: SD ~0.0013 at 100k flips (at 10k, 0.004: ranx's draws are not
    # reproducible across runs here, numba threads, and 10k flips left the two 0.010-0.017 apart in 3 of 4 runs)
    assert 0.05 < ours_r < 0.5
    assert ours_t == pytest.approx(peer("student"), rel=1e-9)
    assert abs(ours_r - peer("fisher")) < 0.01


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
    # the SE is the plug-in of the clipped components; the df Satterthwaite's at MS_seed's upper 80% limit
    assert ms_seed > ms_resid and ms_query > ms_resid  # both components positive here
    v = (ms_seed + ms_query - ms_resid) / 12
    upper = ms_seed * 2 / stats.chi2.ppf(0.2, 2)
    df = max(2.0, (upper + ms_query - ms_resid) ** 2 / (upper ** 2 / 2 + ms_query ** 2 / 3 + ms_resid ** 2 / 6))
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


def test_a_seed_spread_below_the_residual_noise_keeps_its_seed_term_and_its_df():
    """No seed variance and, by chance, seed means closer than the residual noise predicts (MS_seed < MS_resid,
    as on the default run's penha comparison): the seed component is clipped at zero, so the SE is the per-query
    test's, but the df stay those of a seed-aware test (at least S - 1), not the per-query test's Q - 1: that pretest
    made the test liberal at 3 seeds (issue 43)."""
    rng = np.random.default_rng(0)
    d = 0.01 + rng.normal(0, 0.1, (1, 300)) + rng.normal(0, 0.25, (3, 300))
    r = seed_aware_test(d)
    assert r.components.ms_seed < r.components.ms_resid  # the case under test
    averaged = d.mean(axis=0)
    assert r.se == pytest.approx(stats.sem(averaged), rel=1e-9)
    assert 2 <= r.df < 299 and r.p > stats.ttest_1samp(averaged, 0.0).pvalue
    for k in range(20):  # and in general the seed-aware SE is at least the per-query one
        d = _crossed(np.random.default_rng(100 + k), seeds=3, queries=200, mu=0.0, sd_seed=0.005, sd_query=0.1,
                     sd_resid=0.2)
        assert seed_aware_test(d).se >= stats.sem(d.mean(axis=0)) * (1 - 1e-12)


def test_both_components_negative_leave_the_residual_noise():
    """MS_seed and MS_query both below MS_resid (issue 43 item 2): the clipped components are (0, 0, s2_resid), so
    Var(mean) = MS_resid / (S Q), not the larger of the two smaller mean squares."""
    ms = dict(ms_seed=0.01, ms_query=0.02, ms_resid=0.05)
    scaled, df = mean_variance(ms["ms_seed"], ms["ms_query"], ms["ms_resid"], 3, 300)
    assert scaled == pytest.approx(0.05) and df == 2.0
    found = next(d for k in range(500) if (d := _crossed(np.random.default_rng(k), 3, 40, 0.0, 0.0, 0.0, 0.2))
                 is not None and (c := seed_query_components(d)).ms_seed < c.ms_resid and c.ms_query < c.ms_resid)
    r = seed_aware_test(found)
    assert r.se == pytest.approx(math.sqrt(r.components.ms_resid / (3 * 40)), rel=1e-12)


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


def test_holm_with_groups_counts_the_nulls_that_can_be_true_together():
    """Shaffer's count: pairs (cells) of which at most one null is true. By hand, pairs a = (0.001, 0.2),
    b = (0.01, 0.02) and c = (0.5, 0.9), sorted 0.001, 0.01, 0.02, 0.2, ...: the first three each face 3 groups
    still holding a hypothesis (0.003, 0.03, 0.06), then 0.2 faces a and c (0.4); plain Holm multiplies by 6, 5, 4, 3.
    Simulated: 10 cells, each with one true null (uniform p) and one false null; the chance of rejecting a true null at
    0.05 stays within 5% + 3 SE whether the false nulls are obvious or not, and is larger than plain Holm's where they
    are not (Holm counts 20 hypotheses where only 10 nulls can be true)."""
    p = [0.001, 0.2, 0.01, 0.02, 0.5, 0.9]
    groups = ["a", "a", "b", "b", "c", "c"]
    assert holm(p, groups)[:4] == pytest.approx([0.003, 0.4, 0.03, 0.06])
    assert holm(p)[:4] == pytest.approx([0.006, 0.6, 0.05, 0.08])
    assert adjust(p + [math.nan], "holm", groups + ["d"])[:6] == pytest.approx(holm(p, groups))
    with pytest.raises(ValueError, match="2 group labels for 6 p values"):
        holm(p, ["a", "b"])
    rng = np.random.default_rng(43)
    draws, cells = 4000, 10
    labels = [c for c in range(cells) for _ in range(2)]
    bound = 0.05 + 3 * math.sqrt(0.05 * 0.95 / draws)
    for false_p in (1e-6, None):  # the false nulls obvious, or no more significant than the true ones
        errors = {True: 0, False: 0}
        for _ in range(draws):
            true = rng.uniform(size=cells)
            other = np.full(cells, false_p) if false_p is not None else rng.uniform(size=cells)
            values = [v for pair in zip(true, other) for v in pair]
            for grouped in (True, False):
                adjusted = holm(values, labels if grouped else None)
                errors[grouped] += any(q < 0.05 for q in adjusted[0::2])
        assert errors[True] / draws <= bound, (false_p, errors)
        if false_p is None:
            assert errors[True] > errors[False] * 1.5  # 4.4% against 2.2% (obvious false nulls: 5.35% both)


@pytest.mark.parametrize("components,seeds", [((0.02 ** 2, 0.1 ** 2, 0.05 ** 2), 3),
                                              ((0.001 ** 2, 0.1 ** 2, 0.05 ** 2), 2),
                                              ((0.01 ** 2, 0.1 ** 2, 0.1 ** 2), 5)])
def test_the_planner_returns_the_smallest_feasible_number_of_queries(components, seeds):
    mdes = {q: design_mde(components, seeds, q) for q in range(2, 4001)}
    effect = mdes[1500]  # feasible from somewhere at or below 1,500
    smallest = min(q for q, m in mdes.items() if m <= effect)
    assert design_queries(components, effect, seeds) == smallest


def test_the_planner_finds_a_feasible_window_a_doubling_search_steps_over(monkeypatch):
    """An MDE that is feasible only between 500 and 800 queries (not monotone in Q): the planner still returns 500;
    a doubling search (2, 4, ..., 512, 1024) would have stepped from 256 to 512 and bisected, or from 512 on."""
    import curricula.statistics.power as st

    monkeypatch.setattr(st, "design_mde", lambda c, s, q, *a: 0.5 if 500 <= q <= 800 else 1.0)
    assert st.design_queries((0.0, 0.0, 0.0), 0.6, 3) == 500
    monkeypatch.setattr(st, "design_mde", lambda c, s, q, *a: 1.0)
    assert st.design_queries((0.0, 0.0, 0.0), 0.6, 3, max_queries=5000) is None


def test_pooling_averages_mean_squares_then_clips():
    """True seed variance 0 over 10 comparisons of 3 seeds: averaging the clipped components biases sd_seed up
    (the issue: 0 -> 0.006); averaging the unclipped ones, then clipping, stays near 0."""
    rng = np.random.default_rng(12)
    clipped, unclipped = [], []
    for _ in range(200):
        parts = [seed_query_components(_crossed(rng, 3, 300, 0.0, 0.0, 0.05, 0.25)) for _ in range(10)]
        clipped.append(math.sqrt(np.mean([c.var_seed for c in parts])))
        unclipped.append(math.sqrt(pool_components([c.unclipped() for c in parts])[0]))
    assert np.mean(clipped) > 2 * np.mean(unclipped)
    assert pool_components([(-1.0, 2.0, 3.0), (0.5, 4.0, 5.0)]) == (0.0, 3.0, 4.0)


def test_the_seed_sd_interval_and_the_seeds_a_dataset_needs():
    components = (0.029 ** 2, 0.1 ** 2, 0.3 ** 2)  # chitchat's pooled sd_seed
    low, high = seed_sd_interval(components, 3, 1500)
    assert low < 0.029 < high and high / low > 3  # 2 df: a wide interval
    n = design_seeds(components, 0.02, 1500)  # 23 seeds; 9 to 399 over the interval
    assert design_mde(components, n, 1500) <= 0.02 < design_mde(components, n - 1, 1500)
    assert design_seeds(with_seed_sd(components, low), 0.02, 1500) < n < design_seeds(
        with_seed_sd(components, high), 0.02, 1500)
    assert design_seeds(components, 1e-6, 1500, max_seeds=50) is None

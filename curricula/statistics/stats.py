"""The statistics behind every mark, verdict and plan: paired tests, the seed-aware test, equivalence, multiplicity,
power and the planner. Pure functions on arrays and numbers; writing tables and pages is :mod:`curricula.report.tables`'s
and :mod:`curricula.study.grid`'s.

Per-query paired tests (one seed, or seed-averaged values; the papers' protocol): :func:`paired_ttest`,
:func:`paired_randomization`, :func:`paired_wilcoxon`, dispatched by :func:`paired_pvalue`; their power
:func:`mde` / :func:`queries_needed`.

The seed-aware test (:func:`seed_aware_test`) treats seeds and test queries both as samples: the per-seed per-query
differences d[s, q] follow the crossed random-effects model d = mu + a_s + b_q + e_sq, whose variance components are
the ANOVA (method-of-moments) estimates (:func:`seed_query_components`). The standard error of the mean difference is
the plug-in of the *clipped* components, and its degrees of freedom are Satterthwaite's with the seed mean square at
its upper :data:`SEED_DF_CONFIDENCE` confidence limit, never below S - 1 (:func:`mean_variance`). There is no pretest:
a seed component estimated at or below zero does not switch the test to the per-query one. The rule was chosen by
simulation (``bench/seed_aware_size.py``; ``docs/evaluation.md``): its type-I error stays within Monte-Carlo error of
5% at 2 to 20 seeds, 100 to 1,500 queries, seed SDs 0-0.1, query SDs 0-0.1 and residual SDs 0.05-0.4, where the
former pretest reached 7.1% at 3 seeds and 12.4% at 2, and plain Satterthwaite 7.9% at 3 and 6.5% at 4.

Equivalence: :func:`equivalence_pvalue` (two one-sided tests) and :func:`equivalence_reachable`. Multiplicity:
:func:`holm`, :func:`adjust`. Verdicts of a claim: :func:`verdict`. Power and planning: :func:`seed_aware_mde`,
:func:`design_mde`, :func:`design_queries` (the smallest feasible number of test queries; the MDE is not monotone in
it), :func:`design_seeds`, :func:`plan`, :func:`pool_components` (mean squares pooled, then clipped) and
:func:`seed_sd_interval` (the range the seed SD's S - 1 degrees of freedom leave).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import chi2, false_discovery_control, norm, ttest_rel, wilcoxon
from scipy.stats import t as student_t

TESTS = ("ttest", "wilcoxon", "randomization")
MULTIPLICITY = ("holm", "bh", "none")
SEEDS_PLANNED = tuple(range(2, 11))  # the planner's seed counts
#: the one-sided confidence level of the upper limit of E[MS_seed] at which the seed-aware test's Satterthwaite df
#: are computed (:func:`mean_variance`); 0.8 keeps the simulated type-I error at 5% from 2 seeds up
SEED_DF_CONFIDENCE = 0.8
_CHUNK = 1 << 21  # sign-flip matrix elements per chunk of the randomization test (16 MiB as float64)

REPRODUCED, NOT_REPRODUCED, EQUIVALENT, INCONCLUSIVE = "reproduced", "not reproduced", "equivalent", "inconclusive"
BELOW_MARGIN = ", below the margin"
#: every verdict word of :func:`verdict`, decided ones first
VERDICTS = (REPRODUCED, REPRODUCED + BELOW_MARGIN, NOT_REPRODUCED, NOT_REPRODUCED + BELOW_MARGIN, EQUIVALENT,
            INCONCLUSIVE)


# ----------------------------------------------------------------------------------------------- per-query tests
def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired test needs two vectors of equal length, got {a.shape} and {b.shape}")
    return a - b


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p value of a vs b (scipy ``ttest_rel``); 1.0 when the differences are all equal."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired test needs equal lengths, got {a.shape} and {b.shape}")
    if a.size < 2 or np.allclose(a - b, (a - b)[0]):
        return 1.0
    return float(ttest_rel(a, b).pvalue)


def paired_randomization(a: Sequence[float], b: Sequence[float], *, permutations: int = 10_000,
                         seed: int = 0) -> float:
    """Two-sided p value of Fisher's paired randomization test of a vs b (Smucker et al. 2007, CIKM).

    Under H0 each per-query pair is exchangeable, i.e. each difference ``d_i = a_i - b_i`` keeps or flips its sign
    with probability 1/2. ``permutations`` random sign vectors ``s`` (drawn by ``numpy.random.default_rng(seed)``, so
    every call with the same seed and n uses the same flips) give ``T_s = |sum_i s_i d_i|``; the estimator is

        p = (1 + #{s : T_s >= T_obs}) / (1 + permutations),     T_obs = |sum_i d_i|

    (the observed assignment counted as one of the permutations, so p is never 0; Phipson & Smyth 2010). Sums
    instead of means (same test, n is fixed); ``>=`` is taken up to ``1e-9 * sum|d_i|`` so that floating-point
    rounding of equal sums (ties are common with P@1 or RR) counts as equal. The flips are processed in chunks as
    a ``(chunk, n)`` 0/1 flip matrix times ``d`` (``s = 1 - 2 * flip``). 1.0 when all differences are zero (or n == 0).
    """
    d = _differences(a, b)
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    observed = abs(float(d.sum()))
    if d.size == 0 or not np.any(d):
        return 1.0
    threshold = observed - 1e-9 * float(np.abs(d).sum())
    total = float(d.sum())
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // d.size)
    hits, done = 0, 0
    while done < permutations:
        k = min(rows, permutations - done)
        # flip bits f (1 = flip), one random byte per 8 queries: sum_i s_i d_i = sum_i d_i - 2 * (f @ d)
        flips = np.unpackbits(rng.integers(0, 256, size=(k, (d.size + 7) // 8), dtype=np.uint8), axis=1,
                              count=d.size).astype(np.float64)
        hits += int(np.count_nonzero(np.abs(total - 2.0 * (flips @ d)) >= threshold))
        done += k
    return (1 + hits) / (1 + permutations)


def paired_wilcoxon(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p value of a vs b (scipy ``wilcoxon``, ``zero_method="wilcox"``: zero
    differences are dropped before ranking, Wilcoxon's original treatment; scipy's default exact/normal choice).
    1.0 when all differences are zero."""
    d = _differences(a, b)
    if not np.any(d):
        return 1.0
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def paired_pvalue(a: Sequence[float], b: Sequence[float], test: str, *, permutations: int = 10_000,
                  seed: int = 0) -> float:
    """Two-sided paired p value of a vs b by ``test``: ``ttest`` (:func:`paired_ttest`), ``wilcoxon``
    (:func:`paired_wilcoxon`) or ``randomization`` (:func:`paired_randomization` with ``permutations`` and ``seed``).
    """
    if test == "ttest":
        return paired_ttest(a, b)
    if test == "wilcoxon":
        return paired_wilcoxon(a, b)
    if test == "randomization":
        return paired_randomization(a, b, permutations=permutations, seed=seed)
    raise ValueError(f"unknown paired test {test!r}; expected one of {', '.join(TESTS)}")


def confidence_interval(differences: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The two-sided ``level`` confidence interval of the mean of paired differences (Student's t, n - 1 degrees of
    freedom): mean -/+ t_{(1+level)/2, n-1} * sd / sqrt(n). (nan, nan) for fewer than 2 differences."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return math.nan, math.nan
    half = float(student_t.ppf((1 + level) / 2, d.size - 1)) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return float(d.mean()) - half, float(d.mean()) + half


def power_factor(df: float, alpha: float, power: float) -> float:
    """``t_{1-alpha/2, df} + t_{power, df}``: an MDE in standard errors (Cohen 1988 ch. 2, t quantiles)."""
    return float(student_t.ppf(1 - alpha / 2, df) + student_t.ppf(power, df))


def check_levels(alpha: float, power: float) -> None:
    """Refuse an ``alpha`` outside (0, 1) or a ``power`` outside [0.5, 1)."""
    if not 0 < alpha < 1 or not 0.5 <= power < 1:
        raise ValueError(f"need 0 < alpha < 1 and 0.5 <= power < 1, got alpha={alpha}, power={power}")


def mde(differences: Sequence[float], alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable (absolute) mean difference of a two-sided paired t-test at level ``alpha`` with ``power``.

    From the observed per-query differences d (n = len(d), s = their sample SD, ddof=1):

        MDE = (t_{1-alpha/2, n-1} + t_{power, n-1}) * s / sqrt(n)

    the standard power formula of the one-sample / paired t-test (Cohen 1988, *Statistical Power Analysis for the
    Behavioral Sciences*, ch. 2, the normal approximation with t quantiles in place of z), as used for IR test
    collections by Sakai 2016 ("Statistical significance, power, and sample sizes: a systematic review of SIGIR and
    TOIS, 2006-2015", SIGIR). It is the true mean difference a test on n queries of this variability detects with
    probability ``power``. nan when n < 2.
    """
    check_levels(alpha, power)
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return math.nan
    return power_factor(d.size - 1, alpha, power) * float(d.std(ddof=1)) / math.sqrt(d.size)


def queries_needed(sd: float, effect: float, alpha: float = 0.05, power: float = 0.8,
                   max_queries: int = 10**12) -> int:
    """Smallest n >= 2 with ``(t_{1-alpha/2,n-1} + t_{power,n-1}) * sd / sqrt(n) <= effect``: the test queries a
    paired t-test needs to detect a true mean difference ``effect`` (> 0) with ``power`` at level ``alpha`` when the
    per-query differences have SD ``sd`` (the inverse of :func:`mde`).

    Starts from the normal-quantile answer ``ceil(((z_{1-alpha/2} + z_power) * sd / effect)^2)`` (a lower bound for
    power >= 0.5, as t quantiles exceed z quantiles), then doubles and bisects (the left side decreases in n).
    Raises ValueError for a non-positive effect or non-finite sd and OverflowError beyond ``max_queries``.
    """
    check_levels(alpha, power)
    if not (effect > 0 and math.isfinite(effect)) or not (sd >= 0 and math.isfinite(sd)):
        raise ValueError(f"need effect > 0 and a finite sd >= 0, got effect={effect}, sd={sd}")

    def detects(n: int) -> bool:
        return power_factor(n - 1, alpha, power) * sd / math.sqrt(n) <= effect

    start = ((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sd / effect) ** 2
    if start > max_queries:
        raise OverflowError(f"more than {max_queries} queries needed (sd={sd}, effect={effect})")
    # below the z answer nothing detects; n = 1 (no t-test) counts as not detecting
    lo, hi = max(1, math.ceil(start) - 1), max(2, math.ceil(start))
    while not detects(hi):
        lo, hi = hi, hi * 2
        if hi > 2 * max_queries:
            raise OverflowError(f"more than {max_queries} queries needed (sd={sd}, effect={effect})")
    while hi - lo > 1:  # invariant: detects(hi) and not detects(lo)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if detects(mid) else (mid, hi)
    if hi > max_queries:
        raise OverflowError(f"more than {max_queries} queries needed (sd={sd}, effect={effect})")
    return hi


@dataclass(frozen=True)
class VarianceRatio:
    """:func:`pitman_morgan`'s result: the ratio ``SD(y) / SD(x)`` of two paired samples, its two-sided p value
    against a ratio of 1, and the confidence interval of the SD ratio at ``level``."""

    ratio: float
    p: float
    low: float
    high: float
    level: float


def pitman_morgan(x: Sequence[float], y: Sequence[float], level: float = 0.95) -> VarianceRatio:
    """The Pitman-Morgan test of equal variances of two *paired* samples (Pitman 1939, Biometrika 31; Morgan 1939,
    Biometrika 31): ``Var(x) = Var(y)`` exactly when ``x + y`` and ``x - y`` are uncorrelated, so the test is the
    t test of their Pearson correlation ``r`` on ``n - 2`` df (exact for bivariate normal pairs at any
    correlation between x and y). Here a pair is one seed's paired difference under two model-selection rules
    (the same seeds, so the two SDs are correlated and an F test of independent samples would be wrong).

    The interval inverts the same test: for a variance ratio ``c``, ``y`` and ``sqrt(c) x`` have equal variances,
    so ``c`` is inside when the correlation of ``y + sqrt(c) x`` and ``y - sqrt(c) x`` is not significant; the
    bounds (as SD ratios) are found by bisection on ``log c``. Units: ratios of SDs (``< 1``: y is the steadier).
    ValueError for fewer than 3 pairs or a constant sample."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 3:
        raise ValueError(f"pitman_morgan: need two paired samples of at least 3 values (got {a.shape}, {b.shape})")
    sa, sb = float(np.std(a, ddof=1)), float(np.std(b, ddof=1))
    if sa == 0 or sb == 0:
        raise ValueError("pitman_morgan: a constant sample has no variance to compare")
    n = a.size
    crit = float(student_t.ppf(0.5 + level / 2, n - 2))
    va, vb, cab = sa * sa, sb * sb, float(np.cov(a, b)[0, 1])

    def t_stat(scale: float) -> float:
        """The correlation t of (b + scale a, b - scale a), from the sample moments: > 0 when the sample Var(b)
        exceeds scale^2 Var(a), falling as ``scale`` grows."""
        u = scale * scale * va
        r = (vb - u) / math.sqrt(max((vb + u) ** 2 - 4 * u * cab * cab / va, 1e-300))
        r = min(max(r, -1 + 1e-15), 1 - 1e-15)
        return r * math.sqrt(n - 2) / math.sqrt(1 - r * r)

    t0 = t_stat(1.0)
    p = float(2 * student_t.sf(abs(t0), n - 2))

    def bound(target: float) -> float:
        """The SD ratio at which the t statistic equals ``target``."""
        lo, hi = math.log(sb / sa) - 20.0, math.log(sb / sa) + 20.0
        for _ in range(64):
            mid = (lo + hi) / 2
            if t_stat(math.exp(mid)) > target:
                lo = mid
            else:
                hi = mid
        return math.exp((lo + hi) / 2)

    return VarianceRatio(sb / sa, p, bound(crit), bound(-crit), level)


def pitman_morgan_power(ratio: float, rho: float, seeds: int, draws: int = 2000, alpha: float = 0.05,
                        seed: int = 45) -> float:
    """The chance that :func:`pitman_morgan` finds ``p < alpha`` when two paired samples of ``seeds`` pairs have a
    true SD ratio ``ratio`` (``SD(y) / SD(x)``) and correlation ``rho``, by simulation of ``draws`` bivariate normal
    samples (the test is exact under normality, so at ``ratio`` 1 this is its level). Here a pair is one seed's paired
    difference under two model-selection rules, and ``rho`` their correlation across seeds (the
    ``r with reference`` column of ``bench/selection_noise.py``): how many seeds a selection-noise grid needs to tell
    a given cut of the SD from none. ValueError for fewer than 3 seeds, ``ratio <= 0`` or ``|rho| >= 1``."""
    if seeds < 3 or ratio <= 0 or not -1 < rho < 1:
        raise ValueError(f"pitman_morgan_power: seeds={seeds}, ratio={ratio}, rho={rho}: expected seeds >= 3, "
                         f"ratio > 0 and -1 < rho < 1")
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(draws):
        x = rng.standard_normal(seeds)
        y = ratio * (rho * x + math.sqrt(1 - rho * rho) * rng.standard_normal(seeds))
        hits += pitman_morgan(x, y).p < alpha
    return hits / draws


# ------------------------------------------------------------------------------------------------ multiplicity
def holm(pvalues: Sequence[float], groups: Sequence[Any] | None = None) -> list[float]:
    """Holm-Bonferroni adjusted p values (step-down, monotone, capped at 1), in the input order.

    ``groups`` (one label per p value) declares hypotheses that cannot be true together: at most one null per group
    is true, as a cell's difference null (effect 0) and its equivalence null (effect at or beyond the margin). The
    multiplier of the k-th smallest p is then the number of groups among the hypotheses ranked k and after, not their
    number (Shaffer 1986, "Modified sequentially rejective multiple test procedures", *JASA* 81: 826-831, method 1:
    the most nulls that can be true given the k - 1 smaller ones are false). Without ``groups`` every hypothesis is
    its own group: Holm's procedure."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    m = len(p)
    labels = list(range(m)) if groups is None else list(groups)
    if len(labels) != m:
        raise ValueError(f"{len(labels)} group labels for {m} p values")
    remaining: dict[Any, int] = {}
    for label in labels:
        remaining[label] = remaining.get(label, 0) + 1
    adjusted = np.empty(m)
    running = 0.0
    for i in order:
        running = max(running, min(1.0, len(remaining) * p[i]))
        adjusted[i] = running
        remaining[labels[i]] -= 1
        if not remaining[labels[i]]:
            del remaining[labels[i]]
    return adjusted.tolist()


def adjust(pvalues: Sequence[float], method: str, groups: Sequence[Any] | None = None) -> list[float]:
    """Multiplicity-adjusted p values of one family, in the input order: ``holm`` (:func:`holm`, family-wise error;
    ``groups`` labels hypotheses of which at most one null is true, Shaffer's count), ``bh`` (Benjamini-Hochberg
    step-up, false discovery rate; scipy ``false_discovery_control``; ``groups`` unused) or ``none``. nan values stay
    nan and are left out of the family."""
    if method not in MULTIPLICITY:
        raise ValueError(f"unknown multiplicity adjustment {method!r}; expected one of {', '.join(MULTIPLICITY)}")
    p = np.asarray(pvalues, dtype=np.float64)
    out = p.copy()
    ok = np.isfinite(p)
    if method == "none" or not ok.any():
        return out.tolist()
    if groups is not None and len(groups) != len(p):
        raise ValueError(f"{len(groups)} group labels for {len(p)} p values")
    kept = None if groups is None else [label for label, finite in zip(groups, ok) if finite]
    out[ok] = holm(p[ok], kept) if method == "holm" else false_discovery_control(p[ok], method="bh")
    return out.tolist()


# ------------------------------------------------------------------------------------------ seed-aware inference
@dataclass(frozen=True)
class SeedQueryComponents:
    """The two-way ANOVA of paired differences d[s, q] (seeds x queries) and the variance components of the crossed
    random-effects model ``d = mu + a_s + b_q + e_sq`` (:func:`seed_query_components`).

    ``ms_*`` are the mean squares (nan where their degrees of freedom are 0), ``var_*`` the method-of-moments
    components, clipped at 0."""

    seeds: int
    queries: int
    mean: float
    ms_seed: float
    ms_query: float
    ms_resid: float
    var_seed: float
    var_query: float
    var_resid: float

    def unclipped(self) -> tuple[float, float, float]:
        """(s2_seed, s2_query, s2_resid) before clipping: (MS_seed - MS_resid) / Q, (MS_query - MS_resid) / S,
        MS_resid; unbiased, so they can be averaged over comparisons (:func:`pool_components`) before clipping. A
        term without degrees of freedom is the clipped one (as :func:`seed_query_components` defines it)."""
        if self.seeds > 1 and self.queries > 1:
            return ((self.ms_seed - self.ms_resid) / self.queries, (self.ms_query - self.ms_resid) / self.seeds,
                    self.ms_resid)
        return self.var_seed, self.var_query, self.var_resid


@dataclass(frozen=True)
class SeedAwareResult:
    """The test of mean(d) = 0 by :func:`seed_aware_test`: effect (mean of d), its standard error and
    degrees of freedom (:func:`mean_variance`), t, the two-sided p, the ``1 - alpha`` CI and the components behind
    them."""

    effect: float
    se: float
    df: float
    t: float
    p: float
    ci_low: float
    ci_high: float
    components: SeedQueryComponents


def seed_query_components(d: np.ndarray) -> SeedQueryComponents:
    """Method-of-moments variance components of the crossed random-effects model of paired differences

        d[s, q] = mu + a_s + b_q + e_sq,   a_s ~ (0, s2_seed), b_q ~ (0, s2_query), e_sq ~ (0, s2_resid)

    from the two-way ANOVA (one observation per cell, S seeds x Q queries, balanced):

        MS_seed  = Q * sum_s (d_s. - d..)^2 / (S - 1)               E = s2_resid + Q * s2_seed
        MS_query = S * sum_q (d_.q - d..)^2 / (Q - 1)               E = s2_resid + S * s2_query
        MS_resid = sum (d_sq - d_s. - d_.q + d..)^2 / ((S-1)(Q-1))  E = s2_resid

    so s2_seed = (MS_seed - MS_resid) / Q, s2_query = (MS_query - MS_resid) / S, s2_resid = MS_resid, each clipped at
    0 (the ANOVA / Henderson method-I estimator, exact-unbiased before clipping for a balanced design; Searle,
    Casella & McCulloch 1992, *Variance Components*, ch. 4). With one seed there is no seed or residual term
    (MS_seed and MS_resid are nan, their components 0 and the query component is the variance of d); with one query
    likewise for the query and residual terms. ``d`` is a 2-D array (seeds, queries) without missing cells.
    """
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 2 or d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError(f"need a finite 2-D array of differences (seeds x queries), got shape {d.shape}")
    n_s, n_q = d.shape
    grand = float(d.mean())
    by_seed, by_query = d.mean(axis=1), d.mean(axis=0)
    ms_seed = n_q * float(((by_seed - grand) ** 2).sum()) / (n_s - 1) if n_s > 1 else math.nan
    ms_query = n_s * float(((by_query - grand) ** 2).sum()) / (n_q - 1) if n_q > 1 else math.nan
    if n_s > 1 and n_q > 1:
        resid = d - by_seed[:, None] - by_query[None, :] + grand
        ms_resid = float((resid ** 2).sum()) / ((n_s - 1) * (n_q - 1))
        var_seed, var_query = max(0.0, (ms_seed - ms_resid) / n_q), max(0.0, (ms_query - ms_resid) / n_s)
    else:
        ms_resid = math.nan
        var_seed = ms_seed / n_q if n_s > 1 else 0.0  # one query: the spread over seeds is all seed variance
        var_query = ms_query / n_s if n_q > 1 else 0.0  # one seed: the spread over queries is all query variance
    return SeedQueryComponents(n_s, n_q, grand, ms_seed, ms_query, ms_resid, var_seed, var_query,
                               ms_resid if math.isfinite(ms_resid) else 0.0)


def mean_variance(ms_seed: float, ms_query: float, ms_resid: float, seeds: int, queries: int,
                  confidence: float = SEED_DF_CONFIDENCE) -> tuple[float, float]:
    """(S * Q * Var(mean d), its degrees of freedom) of the seed-aware test from the three mean squares.

    The variance is the plug-in of the clipped components (:func:`seed_query_components`):

        S Q Var(d..) = S Q (s2_seed+ / S + s2_query+ / Q + s2_resid / (S Q)) = A + B,
        A = max(MS_seed, MS_resid),   B = max(MS_query - MS_resid, 0)

    so with both components estimated at or below zero it is MS_resid (never below the residual noise), and a seed
    component at or below zero keeps its seed term A = MS_resid (no pretest that drops to the per-query test).

    Degrees of freedom: Satterthwaite's for A + B (Satterthwaite 1946), with A at the upper ``confidence`` limit of
    E[MS_seed], U = MS_seed (S - 1) / chi2_{1-confidence, S-1}, floored at S - 1:

        df = max(S - 1, (A_U + B)^2 / (A_U^2 / (S - 1) + [B > 0] (MS_query^2 / (Q - 1) + MS_resid^2 / ((S-1)(Q-1)))))

    with A_U = max(U, MS_resid). Plain Satterthwaite df grow when MS_seed happens to be drawn small, exactly when the
    SE is too small, which made the test liberal at few seeds (7.9% at 3 seeds, 12.8% at 2; ``docs/evaluation.md``);
    the upper limit undoes that correlation and the floor keeps at least the t-test over seed means' df.
    With one seed: (MS_query, Q - 1), the per-query t-test; with one query: (MS_seed, S - 1), the t-test over seeds.
    Each argument may be a numpy array (vectorised, for simulations); nan where S = Q = 1.
    """
    if seeds < 1 or queries < 1:
        raise ValueError(f"need seeds >= 1 and queries >= 1, got {seeds} x {queries}")
    if not 0 < confidence < 1:
        raise ValueError(f"the confidence level must lie in (0, 1), got {confidence}")
    if seeds == 1 and queries == 1:
        return math.nan, math.nan
    if seeds == 1:
        return ms_query, queries - 1.0
    if queries == 1:
        return ms_seed, seeds - 1.0
    df_s, df_q, df_r = seeds - 1.0, queries - 1.0, (seeds - 1.0) * (queries - 1.0)
    ms_seed, ms_query, ms_resid = (np.asarray(x, dtype=np.float64) for x in (ms_seed, ms_query, ms_resid))
    a = np.maximum(ms_seed, ms_resid)
    b = np.maximum(ms_query - ms_resid, 0.0)
    upper = np.maximum(ms_seed * df_s / chi2.ppf(1 - confidence, df_s), ms_resid)
    query_part = np.where(b > 0, ms_query ** 2 / df_q + ms_resid ** 2 / df_r, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (upper + b) ** 2 / (upper ** 2 / df_s + query_part)
    df = np.where(np.isfinite(df), np.maximum(df, df_s), df_s)
    total = a + b
    if total.ndim == 0:
        return float(total), float(df)
    return total, df


def seed_aware_test(d: np.ndarray, alpha: float = 0.05) -> SeedAwareResult:
    """Two-sided test of mean(d) = 0 for paired differences d[s, q] (seeds x queries, seeds paired across the two
    arms by seed id, queries by qid) that treats both seeds and queries as samples: the crossed random-effects
    model of :func:`seed_query_components`, under which the mean of d has

        Var(d..) = s2_seed / S + s2_query / Q + s2_resid / (S Q)

    estimated from the clipped components, with the degrees of freedom of :func:`mean_variance`; t = d.. / SE,
    p = 2 P(T_df > |t|) and the CI d.. -/+ t_{1-alpha/2, df} SE. With one seed it is the per-query paired t-test
    (Var = var(d) / Q, df = Q - 1); with one query the t-test over seeds. A zero standard error (every difference
    equal) gives p 0 for a non-zero mean (a deterministic difference) and 1 for zero.
    """
    c = seed_query_components(d)
    scaled, df = mean_variance(c.ms_seed, c.ms_query, c.ms_resid, c.seeds, c.queries)
    se = math.sqrt(scaled / (c.seeds * c.queries)) if math.isfinite(scaled) else math.nan
    if not math.isfinite(se):
        return SeedAwareResult(c.mean, se, df, math.nan, math.nan, math.nan, math.nan, c)
    if se == 0 or np.ptp(np.asarray(d, dtype=np.float64)) <= 1e-12:  # all equal
        p = 1.0 if abs(c.mean) <= 1e-12 else 0.0
        return SeedAwareResult(c.mean, 0.0, df, math.copysign(math.inf, c.mean) if c.mean else 0.0, p, c.mean,
                               c.mean, c)
    t = c.mean / se
    half = float(student_t.ppf(1 - alpha / 2, df)) * se
    return SeedAwareResult(c.mean, se, df, t, float(2 * student_t.sf(abs(t), df)), c.mean - half, c.mean + half, c)


def seed_aware_mde(result: SeedAwareResult, alpha: float = 0.05, power: float = 0.8) -> float:
    """The minimum detectable mean difference of :func:`seed_aware_test`: (t_{1-alpha/2, df} + t_{power, df}) * SE
    with its df (with one seed, :func:`mde`). nan without a standard error."""
    check_levels(alpha, power)
    if not (math.isfinite(result.se) and result.df > 0):
        return math.nan
    return power_factor(result.df, alpha, power) * result.se


# ------------------------------------------------------------------------------------------------ equivalence
def equivalence_pvalue(result: SeedAwareResult, margin: float) -> float:
    """Two one-sided tests (Schuirmann 1987) of |mean d| >= ``margin`` (> 0) with the standard error and df of
    ``result``: max(P(T_df > (d.. + margin) / SE), P(T_df < (d.. - margin) / SE)). A small p says the true
    difference lies within +/-margin ("equivalent"). With a zero SE: 0 inside the margin, 1 outside."""
    if not margin > 0:
        raise ValueError(f"the equivalence margin must be > 0, got {margin}")
    if not math.isfinite(result.se):
        return math.nan
    if result.se == 0:
        return 0.0 if abs(result.effect) < margin else 1.0
    lower = float(student_t.sf((result.effect + margin) / result.se, result.df))
    upper = float(student_t.cdf((result.effect - margin) / result.se, result.df))
    return max(lower, upper)


def equivalence_reachable(result: SeedAwareResult, margin: float, alpha: float = 0.05) -> bool:
    """Whether the design of ``result`` can show equivalence at all: two one-sided tests at level ``alpha`` reject
    only when |d..| + t_{1-alpha, df} SE < margin, so with t_{1-alpha, df} SE >= margin no effect, not even 0, is
    judged equivalent and "inconclusive" is certain. False without a standard error."""
    if not (math.isfinite(result.se) and margin > 0):
        return False
    return float(student_t.ppf(1 - alpha, result.df)) * result.se < margin


def verdict(effect: float, p: float, expect: str, p_equivalence: float = math.nan, alpha: float = 0.05) -> str:
    """The verdict word of one claim on one dataset (one of :data:`VERDICTS`).

    ``effect`` is mean(experiment - against) (higher = better for the measures used here), ``p`` the two-sided p of
    the test of no difference, ``p_equivalence`` that of the two one-sided tests against the equivalence margin,
    ``expect`` the claim's direction (``better``: effect > 0; ``worse``: effect < 0).
    - p < alpha: ``reproduced`` when the effect has the claimed sign, ``not reproduced`` when it has the opposite
      sign; when the two one-sided tests also reject (a real effect measured precisely, smaller than the margin),
      the word gets ``, below the margin``;
    - else p_equivalence < alpha: ``equivalent`` (no effect as large as the margin);
    - else ``inconclusive`` (too little data to tell either way).
    """
    if expect not in ("better", "worse"):
        raise ValueError(f"expect must be 'better' or 'worse', got {expect!r}")
    small = math.isfinite(p_equivalence) and p_equivalence < alpha
    if math.isfinite(p) and p < alpha and effect != 0:
        word = REPRODUCED if (effect > 0) == (expect == "better") else NOT_REPRODUCED
        return word + BELOW_MARGIN if small else word
    return EQUIVALENT if small else INCONCLUSIVE


def verdict_pvalues(verdict_word: str, p: float, p_equivalence: float) -> tuple[float, ...]:
    """The p values a verdict rests on, each of which must survive the multiplicity adjustment: the difference test's
    for reproduced / not reproduced, the equivalence test's for equivalent, both for ``..., below the margin``;
    none for inconclusive."""
    if verdict_word == INCONCLUSIVE:
        return ()
    if verdict_word == EQUIVALENT:
        return (p_equivalence,)
    return (p, p_equivalence) if verdict_word.endswith(BELOW_MARGIN) else (p,)


# ------------------------------------------------------------------------------------------- power and planning
def pool_components(parts: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(s2_seed, s2_query, s2_resid) pooled over compared pairs, each given as its *unclipped* method-of-moments
    components (:meth:`SeedQueryComponents.unclipped`): the mean of each over ``parts`` (every pair of a table or of
    a dataset's claims weighs the same), then clipped at 0. Averaging clipped components would bias a zero seed
    variance upwards (each negative estimate counted as 0). Raises ValueError on an empty list."""
    if not parts:
        raise ValueError("no comparisons to pool variance components over")
    return tuple(max(0.0, float(np.mean([part[i] for part in parts]))) for i in range(3))  # type: ignore[return-value]


def _expected_mean_squares(components: tuple[float, float, float], seeds: int,
                           queries: int) -> tuple[float, float, float]:
    s2_seed, s2_query, s2_resid = components
    return s2_resid + queries * s2_seed, s2_resid + seeds * s2_query, s2_resid


def design_mde(components: tuple[float, float, float], seeds: int, queries: int, alpha: float = 0.05,
               power: float = 0.8) -> float:
    """The minimum detectable mean difference of :func:`seed_aware_test` on a design of ``seeds`` x ``queries``
    when the differences have variance components ``(s2_seed, s2_query, s2_resid)``:

        (t_{1-alpha/2, df} + t_{power, df}) * sqrt(s2_seed / S + s2_query / Q + s2_resid / (S Q))

    the t approximation, with the df :func:`mean_variance` gives the expected mean squares (E MS_seed = s2_resid +
    Q s2_seed, E MS_query = s2_resid + S s2_query, E MS_resid = s2_resid), i.e. the df the test itself would use.
    Not monotone in ``queries``: as Q grows the df fall towards S - 1 (:func:`design_queries`)."""
    check_levels(alpha, power)
    if seeds < 1 or queries < 1 or seeds * queries < 2:
        raise ValueError(f"need seeds >= 1, queries >= 1 and at least 2 cells, got {seeds} x {queries}")
    scaled, df = mean_variance(*_expected_mean_squares(components, seeds, queries), seeds, queries)
    if scaled <= 0:
        return 0.0
    return power_factor(min(df, 1e9), alpha, power) * math.sqrt(scaled / (seeds * queries))


def design_queries(components: tuple[float, float, float], effect: float, seeds: int, alpha: float = 0.05,
                   power: float = 0.8, max_queries: int = 10**7) -> int | None:
    """The fewest test queries (>= 2) with which ``seeds`` seeds detect a true mean difference ``effect`` (> 0)
    (:func:`design_mde` <= effect); None when no number up to ``max_queries`` does, e.g. when the seed variance
    alone, s2_seed / S, is already too large.

    The MDE is not monotone in Q (its df fall towards S - 1 as the query term shrinks), so a doubling search could
    step over the feasible range. The search scans Q on a geometric grid (ratio 1.05) for the first feasible point,
    then bisects between it and the grid point before (within which the MDE is taken as monotone)."""
    if not (effect > 0 and math.isfinite(effect)):
        raise ValueError(f"need an effect > 0, got {effect}")

    def detects(n: int) -> bool:
        return design_mde(components, seeds, n, alpha, power) <= effect

    lo, hi = 1, 2  # one query never detects with one seed (no test) and is below every grid point
    while not detects(hi):
        if hi >= max_queries:
            return None
        lo, hi = hi, min(max_queries, max(hi + 1, math.ceil(hi * 1.05)))
    while hi - lo > 1:  # invariant: detects(hi) and not detects(lo) (or lo = 1)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if detects(mid) else (mid, hi)
    return hi


def design_seeds(components: tuple[float, float, float], effect: float, queries: int, alpha: float = 0.05,
                 power: float = 0.8, max_seeds: int = 1000) -> int | None:
    """The fewest seeds (>= 2) with which ``queries`` test queries detect ``effect`` (> 0) (:func:`design_mde` <=
    effect), by a scan (the MDE falls with S: both its variance and its t quantiles do); None beyond ``max_seeds``.
    The number a study with a fixed test split needs."""
    if not (effect > 0 and math.isfinite(effect)):
        raise ValueError(f"need an effect > 0, got {effect}")
    for s in range(2, max_seeds + 1):
        if design_mde(components, s, queries, alpha, power) <= effect:
            return s
    return None


def seed_sd_interval(components: tuple[float, float, float], seeds: int, queries: int,
                     level: float = 0.9) -> tuple[float, float]:
    """The ``level`` confidence interval of sd_seed when ``components`` were estimated from ``seeds`` x ``queries``:
    MS_seed rests on S - 1 degrees of freedom, so E[MS_seed] lies in [MS_seed (S-1) / chi2_{(1+level)/2, S-1},
    MS_seed (S-1) / chi2_{(1-level)/2, S-1}], and s2_seed = (E[MS_seed] - s2_resid) / Q, clipped at 0. With the
    pooled components the interval is that of one comparison (the claims of a dataset share arms, so their mean
    squares are not independent). (nan, nan) with one seed or one query."""
    if seeds < 2 or queries < 2:
        return math.nan, math.nan
    ms_seed, _, ms_resid = _expected_mean_squares(components, seeds, queries)
    df = seeds - 1
    low, high = (ms_seed * df / chi2.ppf(q, df) for q in ((1 + level) / 2, (1 - level) / 2))
    return tuple(math.sqrt(max(0.0, (x - ms_resid) / queries)) for x in (low, high))  # type: ignore[return-value]


def with_seed_sd(components: tuple[float, float, float], sd_seed: float) -> tuple[float, float, float]:
    """``components`` with the seed component replaced by ``sd_seed`` squared (for a planner's range)."""
    return sd_seed * sd_seed, components[1], components[2]


def plan(components: tuple[float, float, float], effect: float, seeds: Sequence[int] = SEEDS_PLANNED,
         alpha: float = 0.05, power: float = 0.8, max_queries: int | None = None) -> dict[int, int | None]:
    """The power planner: {S: the test queries S seeds need to detect ``effect``} (:func:`design_queries`), None
    where no number up to ``max_queries`` (default 10^7) does."""
    cap = 10**7 if max_queries is None else max_queries
    return {s: design_queries(components, effect, s, alpha, power, cap) for s in seeds}


def design_mdes(components: tuple[float, float, float], queries: int, seeds: Sequence[int] = SEEDS_PLANNED,
                alpha: float = 0.05, power: float = 0.8) -> dict[int, float]:
    """The other face of :func:`plan`: {S: :func:`design_mde` of S seeds x ``queries`` test queries}, the smallest
    true mean difference (in the measure's units) each number of seeds detects when the test split is fixed, as it
    is when a dataset's every query is already in it."""
    return {s: design_mde(components, s, queries, alpha, power) for s in seeds}


def cheapest(needed: Mapping[int, int | None]) -> tuple[int, int] | None:
    """The cheapest design of a :func:`plan`: the fewest seeds (each seed is a training run of every arm, the
    expensive part; a test query costs only its evaluation) that reach the effect, with their queries; None when
    none does."""
    for s in sorted(needed):
        if needed[s] is not None:
            return s, needed[s]
    return None


# ------------------------------------------------------------------------------------------------- simulation
def simulate_mean_squares(rng: np.random.Generator, seeds: int, queries: int, sd_seed: float, sd_query: float,
                          sd_resid: float, draws: int, mu: float = 0.0
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """``draws`` samples of (mean of d, MS_seed, MS_query, MS_resid) of a balanced ``seeds`` x ``queries`` design of
    the crossed normal model of :func:`seed_query_components` with true mean ``mu``, and the true SD of the mean.

    In that model the grand mean and the three mean squares are independent, each mean square its expectation
    times a chi-square over its df (Searle, Casella & McCulloch 1992, ch. 4), so a simulation of the seed-aware test
    needs no seeds x queries matrix (``tests/test_stats.py`` checks it against whole matrices)."""
    s, q = seeds, queries
    sd_mean = math.sqrt(sd_seed ** 2 / s + sd_query ** 2 / q + sd_resid ** 2 / (s * q))
    mean = mu + rng.standard_normal(draws) * sd_mean
    dfs = (s - 1, q - 1, (s - 1) * (q - 1))
    expected = (sd_resid ** 2 + q * sd_seed ** 2, sd_resid ** 2 + s * sd_query ** 2, sd_resid ** 2)
    ms = [e * rng.chisquare(df, draws) / df for e, df in zip(expected, dfs)]
    return mean, ms[0], ms[1], ms[2], sd_mean


def rejection_rate(mean: np.ndarray, ms_seed: np.ndarray, ms_query: np.ndarray, ms_resid: np.ndarray, seeds: int,
                   queries: int, alpha: float = 0.05) -> float:
    """The share of simulated designs (:func:`simulate_mean_squares`) in which :func:`seed_aware_test` rejects
    mean(d) = 0 at ``alpha``: its type-I error when the true mean is 0, its power otherwise."""
    scaled, df = mean_variance(ms_seed, ms_query, ms_resid, seeds, queries)
    t = np.abs(mean) / np.sqrt(scaled / (seeds * queries))
    return float(np.mean(2 * student_t.sf(t, df) < alpha))

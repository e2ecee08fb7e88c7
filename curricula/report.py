"""Significance tests, statistical power and the papers' tables from per-query test metrics (rule ``report_tables``).

Protocol (Penha & Hauff 2020 §4-5, Table 5): for each experiment and seed, a paired two-sided test of its per-query
values against the baseline run *of the same seed*; for the AVG row, the same test on the per-query values averaged
over seeds. The test is the config's ``report.test``: ``ttest`` (Student's paired t-test, the papers' choice and the
default), ``randomization`` (Fisher's paired randomization test by random sign flips, Smucker et al. 2007) or
``wilcoxon`` (signed-rank test); see :func:`paired_pvalue`. Marks for a significant improvement over the baseline:
``†`` p < 0.05, ``‡`` p < 0.01 (Table 5's symbols); for a significant reduction: ``↓`` p < 0.05, ``↓↓`` p < 0.01
(MacAvaney Table 6's arrow), so a mark never hides the direction. With ``holm: true`` the p values of one row (all
experiments of the table row against their baselines, as one family) are Holm-Bonferroni adjusted before marking.

Seed-aware inference (``report.inference: seed_aware``, the default): the marks of every seed-averaged comparison
(the AVG row, the metrics table, the power table's MDE) come from :func:`seed_aware_test`, which treats both the
seeds and the test queries as samples: the paired differences d[s, q] (seeds paired across the two arms by seed
id, queries by qid; every seed on every query) follow the crossed random-effects model d = mu + a_s + b_q + e_sq,
whose variance components are the method-of-moments (ANOVA) estimates (:func:`seed_query_components`), and the mean
difference is tested with its standard error and Satterthwaite's degrees of freedom. The per-query test on
seed-averaged values (``per_query``, the papers' and the former default) is kept beside it: ``<col>_mark_per_query``
columns and the power table's ``p_ttest``. The power table's caption carries the planner (:func:`plan`): the test
queries each number of seeds needs to detect a 2% relative effect.

Which baseline an experiment is compared with is :func:`baseline_of`: ``<name>+bm25`` rows (score additivity with
BM25) against ``baseline+bm25``, every other row against ``baseline``. Tables list the ``baseline`` group first
(``baseline``, then the others sorted), then the ``baseline+bm25`` group the same way (:func:`experiment_order`).

Tables:
* ``seeds``: like Penha Table 5: rows = each seed, AVG, SD (over seeds of the per-seed means); columns =
  experiments; one measure (the config's ``report.measure``, default MAP).
* ``metrics``: like MacAvaney Table 3: rows = experiments (and the reference rankers), columns = measures; the mean
  over seeds of the per-seed means, marked by the configured test on seed-averaged per-query values against the
  baseline. Its caption states the minimum detectable effect (median over experiments).
* ``power``: per experiment (not the baselines), on ``report.measure`` and seed-averaged per-query values: the mean
  difference to its baseline, its SD, the t-test's p value (and the configured test's when that is not the t-test),
  the minimum detectable effect (:func:`mde`) and the test queries a 2% relative effect would need
  (:func:`queries_needed`), so "no difference" and "could not have seen one" are told apart.
Written as Markdown, CSV and Parquet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import false_discovery_control, norm, t as student_t, ttest_rel, wilcoxon

from curricula.tables import write_file_atomically, write_text_atomically

BASELINE = "baseline"
BM25_SUFFIX = "+bm25"
TESTS = ("ttest", "wilcoxon", "randomization")
TEST_NAMES = {"ttest": "paired two-sided t-test", "wilcoxon": "two-sided Wilcoxon signed-rank test",
              "randomization": "two-sided paired randomization test"}
MULTIPLICITY = ("holm", "bh", "none")
RELATIVE_EFFECT = 0.02  # the power table's "queries needed" column: a 2% change of the baseline's mean
_CHUNK = 1 << 21  # sign-flip matrix elements per chunk of the randomization test (16 MiB as float64)


def baseline_of(experiment: str) -> str:
    """The run an experiment is compared with: ``baseline+bm25`` for ``<name>+bm25`` (score additivity with BM25),
    ``baseline`` for every other name. The baselines compare with themselves."""
    return BASELINE + BM25_SUFFIX if experiment.endswith(BM25_SUFFIX) else BASELINE


def experiment_order(experiments: Sequence[str] | set[str]) -> list[str]:
    """The table order: the ``baseline`` group (``baseline`` first, then the others sorted), then the
    ``baseline+bm25`` group the same way, each group listed only when one of its names is present. A baseline is
    always listed with its group (if it has no metrics the comparison fails with a clear error)."""
    out: list[str] = []
    for base in (BASELINE, BASELINE + BM25_SUFFIX):
        group = {e for e in experiments if baseline_of(e) == base} - {base}
        if group or base in experiments:
            out += [base, *sorted(group)]
    return out


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p value of a vs b (scipy ``ttest_rel``); 1.0 when the differences are all equal."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired test needs equal lengths, got {a.shape} and {b.shape}")
    if a.size < 2 or np.allclose(a - b, (a - b)[0]):
        return 1.0
    return float(ttest_rel(a, b).pvalue)


def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired test needs two vectors of equal length, got {a.shape} and {b.shape}")
    return a - b


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


def _power_factor(n: int, alpha: float, power: float) -> float:
    """``t_{1-alpha/2, n-1} + t_{power, n-1}``."""
    return float(student_t.ppf(1 - alpha / 2, n - 1) + student_t.ppf(power, n - 1))


def _check_levels(alpha: float, power: float) -> None:
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
    _check_levels(alpha, power)
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return math.nan
    return _power_factor(d.size, alpha, power) * float(d.std(ddof=1)) / math.sqrt(d.size)


def queries_needed(sd: float, effect: float, alpha: float = 0.05, power: float = 0.8,
                   max_queries: int = 10**12) -> int:
    """Smallest n >= 2 with ``(t_{1-alpha/2,n-1} + t_{power,n-1}) * sd / sqrt(n) <= effect``: the test queries a
    paired t-test needs to detect a true mean difference ``effect`` (> 0) with ``power`` at level ``alpha`` when the
    per-query differences have SD ``sd`` (the inverse of :func:`mde`).

    Starts from the normal-quantile answer ``ceil(((z_{1-alpha/2} + z_power) * sd / effect)^2)`` (a lower bound for
    power >= 0.5, as t quantiles exceed z quantiles), then doubles and bisects (the left side decreases in n).
    Raises ValueError for a non-positive effect or non-finite sd and OverflowError beyond ``max_queries``.
    """
    _check_levels(alpha, power)
    if not (effect > 0 and math.isfinite(effect)) or not (sd >= 0 and math.isfinite(sd)):
        raise ValueError(f"need effect > 0 and a finite sd >= 0, got effect={effect}, sd={sd}")

    def detects(n: int) -> bool:
        return _power_factor(n, alpha, power) * sd / math.sqrt(n) <= effect

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


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p values (step-down, monotone, capped at 1), in the input order."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    m = len(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


# ------------------------------------------------------------------------------------------- seed-aware inference
INFERENCES = ("seed_aware", "per_query")
SEED_AWARE_NAME = ("seed-aware test (crossed seed and query random effects, seeds paired by id; Satterthwaite "
                   "t)")
SEEDS_PLANNED = tuple(range(2, 11))  # the planner's seed counts


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


@dataclass(frozen=True)
class SeedAwareResult:
    """The test of mean(d) = 0 by :func:`seed_aware_test`: effect (mean of d), its standard error and
    (Satterthwaite) degrees of freedom, t, the two-sided p, the ``1 - alpha`` CI and the components behind them."""

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


def _mean_variance(c: SeedQueryComponents) -> tuple[float, float]:
    """(Var(mean d) * S * Q, its Satterthwaite degrees of freedom) from the mean squares of ``c``.

    The unbiased combination MS_seed + MS_query - MS_resid is used when both the seed and the query component are
    estimated non-negative (MS_seed >= MS_resid and MS_query >= MS_resid). A negative estimate is taken as zero,
    which drops that term with the residual one: MS_query alone (df Q - 1: the per-query t-test on seed-averaged
    values) when the seed component is, MS_seed alone (df S - 1: the t-test over seed means) when the query
    component is, and the larger of the two when both are. So the seed-aware standard error is never below the
    per-query test's: a seed spread smaller than the residual noise predicts cannot make a verdict more decided."""
    n_s, n_q = c.seeds, c.queries
    if n_s == 1 and n_q == 1:
        return math.nan, math.nan
    if n_s == 1:
        return c.ms_query, n_q - 1.0
    if n_q == 1:
        return c.ms_seed, n_s - 1.0
    seed_ok, query_ok = c.ms_seed >= c.ms_resid, c.ms_query >= c.ms_resid
    if seed_ok and query_ok:
        terms = ((c.ms_seed, n_s - 1.0), (c.ms_query, n_q - 1.0), (-c.ms_resid, (n_s - 1.0) * (n_q - 1.0)))
        total = sum(ms for ms, _ in terms)
        denominator = sum(ms * ms / df for ms, df in terms)
        if total > 0:
            return total, total * total / denominator if denominator > 0 else math.inf
    if query_ok and not seed_ok:
        return c.ms_query, n_q - 1.0
    if seed_ok and not query_ok:
        return c.ms_seed, n_s - 1.0
    return max((c.ms_seed, n_s - 1.0), (c.ms_query, n_q - 1.0))


def seed_aware_test(d: np.ndarray, alpha: float = 0.05) -> SeedAwareResult:
    """Two-sided test of mean(d) = 0 for paired differences d[s, q] (seeds x queries, seeds paired across the two
    arms by seed id, queries by qid) that treats both seeds and queries as samples: the crossed random-effects
    model of :func:`seed_query_components`, under which the mean of d has

        Var(d..) = s2_seed / S + s2_query / Q + s2_resid / (S Q) = (MS_seed + MS_query - MS_resid) / (S Q)

    (when a component is estimated negative, its term is dropped: see :func:`_mean_variance`, which keeps the SE
    at or above the per-query test's). t = d.. / SE with Satterthwaite's
    degrees of freedom for a linear combination of mean squares (Satterthwaite 1946), df = (sum c_i MS_i)^2 /
    sum (c_i MS_i)^2 / df_i; p = 2 P(T_df > |t|) and the CI d.. -/+ t_{1-alpha/2, df} SE. With one seed it is the
    per-query paired t-test (Var = var(d) / Q, df = Q - 1); with one query the t-test over seeds. A zero standard
    error (every difference equal) gives p 0 for a non-zero mean (a deterministic difference) and 1 for zero.
    """
    c = seed_query_components(d)
    scaled, df = _mean_variance(c)
    se = math.sqrt(scaled / (c.seeds * c.queries)) if math.isfinite(scaled) else math.nan
    if not math.isfinite(se):
        return SeedAwareResult(c.mean, se, df, math.nan, math.nan, math.nan, math.nan, c)
    if se == 0 or not math.isfinite(df) or np.ptp(np.asarray(d, dtype=np.float64)) <= 1e-12:  # all equal
        p = 1.0 if abs(c.mean) <= 1e-12 else 0.0
        return SeedAwareResult(c.mean, 0.0, df, math.copysign(math.inf, c.mean) if c.mean else 0.0, p, c.mean,
                               c.mean, c)
    t = c.mean / se
    half = float(student_t.ppf(1 - alpha / 2, df)) * se
    return SeedAwareResult(c.mean, se, df, t, float(2 * student_t.sf(abs(t), df)), c.mean - half, c.mean + half, c)


def seed_aware_mde(result: SeedAwareResult, alpha: float = 0.05, power: float = 0.8) -> float:
    """The minimum detectable mean difference of :func:`seed_aware_test`: (t_{1-alpha/2, df} + t_{power, df}) * SE
    with its Satterthwaite df (with one seed, :func:`mde`). nan without a standard error."""
    _check_levels(alpha, power)
    if not (math.isfinite(result.se) and result.df > 0):
        return math.nan
    return float(student_t.ppf(1 - alpha / 2, result.df) + student_t.ppf(power, result.df)) * result.se


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


def pool_components(parts: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(s2_seed, s2_query, s2_resid) pooled over compared pairs, each given as its (clipped) components: the mean of
    each component over ``parts`` (every pair of a table or of a dataset's claims weighs the same, whatever its
    numbers of seeds and queries). Raises ValueError on an empty list."""
    if not parts:
        raise ValueError("no comparisons to pool variance components over")
    return tuple(float(np.mean([part[i] for part in parts])) for i in range(3))  # type: ignore[return-value]


def design_mde(components: tuple[float, float, float], seeds: int, queries: int, alpha: float = 0.05,
               power: float = 0.8) -> float:
    """The minimum detectable mean difference of :func:`seed_aware_test` on a design of ``seeds`` x ``queries``
    when the differences have variance components ``(s2_seed, s2_query, s2_resid)``:

        (t_{1-alpha/2, df} + t_{power, df}) * sqrt(s2_seed / S + s2_query / Q + s2_resid / (S Q))

    the t approximation, with df Satterthwaite's for the expected mean squares (E MS_seed = s2_resid + Q s2_seed,
    E MS_query = s2_resid + S s2_query, E MS_resid = s2_resid), i.e. the df the test itself will use."""
    _check_levels(alpha, power)
    s2_seed, s2_query, s2_resid = components
    if seeds < 1 or queries < 1 or seeds * queries < 2:
        raise ValueError(f"need seeds >= 1, queries >= 1 and at least 2 cells, got {seeds} x {queries}")
    expected = SeedQueryComponents(seeds, queries, 0.0, s2_resid + queries * s2_seed, s2_resid + seeds * s2_query,
                                   s2_resid, s2_seed, s2_query, s2_resid)
    scaled, df = _mean_variance(expected)
    if scaled <= 0:
        return 0.0
    df = min(df, 1e9)
    return float(student_t.ppf(1 - alpha / 2, df) + student_t.ppf(power, df)) * math.sqrt(scaled / (seeds * queries))


def design_queries(components: tuple[float, float, float], effect: float, seeds: int, alpha: float = 0.05,
                   power: float = 0.8, max_queries: int = 10**7) -> int | None:
    """The fewest test queries (>= 2) with which ``seeds`` seeds detect a true mean difference ``effect`` (> 0)
    (:func:`design_mde` <= effect); None when more than ``max_queries`` would be needed, e.g. when the seed
    variance alone, s2_seed / S, is already too large. Doubling then bisection (the MDE decreases with Q)."""
    if not (effect > 0 and math.isfinite(effect)):
        raise ValueError(f"need an effect > 0, got {effect}")

    def detects(n: int) -> bool:
        return design_mde(components, seeds, n, alpha, power) <= effect

    lo, hi = 1, 2
    while not detects(hi):
        lo, hi = hi, hi * 2
        if lo >= max_queries:
            return None
    while hi - lo > 1:  # invariant: detects(hi) and not detects(lo) (or lo = 1)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if detects(mid) else (mid, hi)
    return hi if hi <= max_queries else None


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


def plan_sentence(components: tuple[float, float, float], effect: float, pairs: int, measure: str,
                  alpha: float = 0.05, power: float = 0.8, max_queries: int | None = None) -> str:
    """One sentence on the :func:`plan` of ``effect`` (the pooled components of ``pairs`` compared pairs)."""
    if not (effect > 0 and math.isfinite(effect)):
        return ""
    needed = plan(components, effect, alpha=alpha, power=power, max_queries=max_queries)
    cells = ", ".join(f"{s}: {q:,}" if q is not None else f"{s}: –" for s, q in needed.items())
    best = cheapest(needed)
    cap = f" (at most {max_queries:,} test queries)" if max_queries else ""
    best_txt = (f"cheapest{cap}: {best[0]} seeds x {best[1]:,} test queries" if best else
                f"no design of {min(needed)}-{max(needed)} seeds reaches it{cap}")
    sd = ", ".join(f"sd_{n} {math.sqrt(v):.4f}" for n, v in zip(("seed", "query", "resid"), components))
    return (f"Planner: with the variance components of the differences pooled over the {pairs} compared pair"
            f"{'s' if pairs != 1 else ''} (the mean of each; {sd}), detecting a {RELATIVE_EFFECT:.0%} effect "
            f"({effect:.4f} {measure}) at alpha {alpha:g} with power {power:g} (t approximation, Satterthwaite df) "
            f"needs, per number of seeds, these test queries: {cells}; {best_txt}.")


def experiment_files(root: str | Path, filename: str = "metrics.parquet",
                     experiment: str = "*") -> dict[tuple[str, str], Path]:
    """{(experiment, seed): file} of a dataset's results folder (``<root>/experiments/<name>/seed=<s>/<filename>``):
    by default every trained ranker's per-query test metrics, or e.g. one experiment's ``dev_curve.parquet``;
    raises FileNotFoundError naming the folder and the pattern when none exists."""
    found = {(p.parent.parent.name, p.parent.name.removeprefix("seed=")): p
             for p in sorted(Path(root).glob(f"experiments/{experiment}/seed=*/{filename}"))}
    if not found:
        name = "<name>" if experiment == "*" else experiment
        raise FileNotFoundError(f"{root}: no experiments/{name}/seed=<s>/{filename} under it (not a finished "
                                f"dataset's results folder?)")
    return found


def converged_length(curves: Mapping[str, pl.DataFrame]) -> tuple[int, dict[str, int]]:
    """The training length a grid's curricula can be measured against (issue: under early stopping it is not known
    in advance): the median over seeds of the step whose dev evaluation was kept (``best``) in each seed's
    ``dev_curve.parquet`` of one experiment, normally ``baseline``. Returns (median rounded half up, {seed: best
    step}). Set ``train.steps`` to it and every fraction of the papers (Penha's T = 0.9, Su's T0 = 0.1 and T = 0.5
    of training) resolves against the length a model without a curriculum converges in. ValueError without
    curves or when a curve has no ``best`` row."""
    if not curves:
        raise ValueError("no dev curves to measure a converged length from")
    best = {}
    for seed, curve in curves.items():
        kept = curve.filter(pl.col("best"))["step"]
        if kept.is_empty():
            raise ValueError(f"seed {seed}: the dev curve marks no kept (best) evaluation")
        best[seed] = int(kept[0])
    return int(math.floor(float(np.median(list(best.values()))) + 0.5)), best


def planner_markdown(metrics: pl.DataFrame, measure: str, alpha: float = 0.05, power: float = 0.8,
                     max_queries: int | None = None) -> list[str]:
    """The power planner of one finished grid as Markdown lines: the variance components of every experiment's
    differences from its baseline (:func:`power_table`, seed-aware) pooled by :func:`pooled_components`, then per
    number of seeds S (:data:`SEEDS_PLANNED`) the test queries a 2% effect (:data:`RELATIVE_EFFECT`) needs
    (:func:`plan`) and the MDE at the grid's own number of test queries (:func:`design_mdes`), absolute and as % of
    the mean of the baselines. Raises ValueError when the grid has no balanced comparison to estimate components
    from."""
    table = power_table(metrics, measure, alpha=alpha, power=power)
    components = pooled_components(table)
    if components is None:
        raise ValueError(f"no balanced experiment-baseline comparison on {measure}: no variance components")
    base = float(table["baseline_mean"].mean())
    queries = int(table["queries"].max())
    effect = RELATIVE_EFFECT * base
    needed = plan(components, effect, alpha=alpha, power=power, max_queries=max_queries)
    mdes = design_mdes(components, queries, alpha=alpha, power=power)
    sd = ", ".join(f"sd_{n} {math.sqrt(v):.4f}" for n, v in zip(("seed", "query", "resid"), components))
    head = (f"{table.height} comparisons, {int(table['seeds'].max())} seeds x {queries:,} test queries; pooled "
            f"components of the differences: {sd}; mean of the baselines {base:.4f} {measure}, so a "
            f"{RELATIVE_EFFECT:.0%} effect is {effect:.4f} (alpha {alpha:g}, power {power:g}).")
    lines = [head, "",
             f"| seeds | test queries for a {RELATIVE_EFFECT:.0%} effect | MDE at {queries:,} test queries | MDE % |",
             "|---|---|---|---|"]
    for s in SEEDS_PLANNED:
        cell = f"{needed[s]:,}" if needed[s] is not None else "out of reach"
        lines.append(f"| {s} | {cell} | {mdes[s]:.4f} | {100 * mdes[s] / base:.1f}% |")
    return lines


def adjust(pvalues: Sequence[float], method: str) -> list[float]:
    """Multiplicity-adjusted p values of one family, in the input order: ``holm`` (:func:`holm`, family-wise error),
    ``bh`` (Benjamini-Hochberg step-up, false discovery rate; scipy ``false_discovery_control``) or ``none``. nan
    values stay nan and are left out of the family."""
    if method not in MULTIPLICITY:
        raise ValueError(f"unknown multiplicity adjustment {method!r}; expected one of {', '.join(MULTIPLICITY)}")
    p = np.asarray(pvalues, dtype=np.float64)
    out = p.copy()
    ok = np.isfinite(p)
    if method == "none" or not ok.any():
        return out.tolist()
    out[ok] = holm(p[ok]) if method == "holm" else false_discovery_control(p[ok], method="bh")
    return out.tolist()


def mark(p: float, difference: float = 1.0) -> str:
    """``‡``/``†`` for a significant improvement (p < 0.01 / 0.05), ``↓↓``/``↓`` for a significant reduction.

    ``difference`` is mean(experiment - baseline); only its sign is used.
    """
    if p >= 0.05 or difference == 0:
        return ""
    if difference > 0:
        return "‡" if p < 0.01 else "†"
    return "↓↓" if p < 0.01 else "↓"


def load_metrics(paths: Mapping[tuple[str, str], str | Path]) -> pl.DataFrame:
    """One long frame (experiment, seed, qid, measure, value) from metrics.parquet files keyed by (name, seed)."""
    frames = [pl.read_parquet(p).with_columns(experiment=pl.lit(name), seed=pl.lit(str(seed)))
              for (name, seed), p in paths.items()]
    return pl.concat(frames).select("experiment", "seed", "qid", "measure", "value")


def _vector(metrics: pl.DataFrame, experiment: str, measure: str, seed: str | None) -> pl.DataFrame:
    rows = metrics.filter((pl.col("experiment") == experiment) & (pl.col("measure") == measure))
    if seed is not None:
        return rows.filter(pl.col("seed") == seed).select("qid", "value").sort("qid")
    return rows.group_by("qid").agg(pl.col("value").mean()).sort("qid")


def _paired(metrics: pl.DataFrame, experiment: str, measure: str, seed: str | None,
            against: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The per-query values of ``experiment`` and of ``against`` (default: :func:`baseline_of` it) on one measure,
    aligned by qid (one seed's, or seed-averaged when ``seed`` is None)."""
    base = baseline_of(experiment) if against is None else against
    a, b = _vector(metrics, experiment, measure, seed), _vector(metrics, base, measure, seed)
    joined = a.join(b, on="qid", suffix="_base")
    if joined.height != a.height or joined.height != b.height:
        raise ValueError(f"{experiment} and {base} were evaluated on different queries ({measure})")
    return joined["value"].to_numpy(), joined["value_base"].to_numpy()


def _seed_key(seed: str) -> tuple[int, int | str]:
    return (0, int(seed)) if seed.lstrip("-").isdigit() else (1, seed)


def paired_cells(metrics: pl.DataFrame, experiment: str, measure: str,
                 against: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The per-query values of ``experiment`` and of ``against`` (default: :func:`baseline_of` it) on one measure
    as two (seeds x queries) arrays, seeds paired by seed id (numeric order) and queries by qid (sorted), for
    :func:`seed_aware_test` on their difference. The design must be balanced: both arms run with the same seeds,
    evaluated on the same queries, every seed on every query once; otherwise a ValueError names the experiment and
    the seed."""
    base = baseline_of(experiment) if against is None else against
    arms = [metrics.filter((pl.col("experiment") == name) & (pl.col("measure") == measure)).select(
        "seed", "qid", "value") for name in (experiment, base)]
    if set(arms[0]["qid"]) != set(arms[1]["qid"]):
        raise ValueError(f"{experiment} and {base} were evaluated on different queries ({measure})")
    seeds = [set(arm["seed"]) for arm in arms]
    if seeds[0] != seeds[1]:
        raise ValueError(f"{experiment} and {base} ran with different seeds ({measure}): {experiment} has "
                         f"{sorted(seeds[0], key=_seed_key)}, {base} {sorted(seeds[1], key=_seed_key)}; seed-aware "
                         "inference pairs the arms by seed (report.inference / study.inference: per_query does not)")
    order = sorted(seeds[0], key=_seed_key)
    n_q = arms[0]["qid"].n_unique()
    out = []
    for name, arm in zip((experiment, base), arms):
        counts = arm.group_by("seed").agg(n=pl.len(), unique=pl.col("qid").n_unique())
        for seed, n, unique in counts.sort("seed").iter_rows():
            if n != n_q or unique != n_q:
                raise ValueError(f"unbalanced design: {name}, seed {seed} has {n} {measure} values on {unique} of the "
                                 f"{n_q} test queries; seed-aware inference needs every seed on every query once")
        rank = {s: i for i, s in enumerate(order)}
        arm = arm.with_columns(pl.col("seed").replace_strict(rank, return_dtype=pl.Int64).alias("_rank"))
        out.append(arm.sort("_rank", "qid")["value"].to_numpy().reshape(len(order), n_q))
    return out[0], out[1]


def seed_aware_result(metrics: pl.DataFrame, experiment: str, measure: str, against: str | None = None,
                      alpha: float = 0.05, *, inference: str = "seed_aware") -> SeedAwareResult | None:
    """:func:`seed_aware_test` of ``experiment`` - ``against`` (:func:`paired_cells`). An unbalanced design raises
    under ``inference="seed_aware"``; under ``per_query``, which does not need it, it gives None."""
    try:
        a, b = paired_cells(metrics, experiment, measure, against)
    except ValueError:
        if inference == "seed_aware":
            raise
        return None
    return seed_aware_test(a - b, alpha)


def _pvalue(metrics: pl.DataFrame, experiment: str, measure: str, seed: str | None, test: str = "ttest",
            permutations: int = 10_000, rng_seed: int = 0,
            inference: str = "per_query") -> tuple[float, float]:
    """(p value, mean difference experiment - its baseline) on one measure: of the configured per-query paired
    test for one seed or, with ``inference="per_query"``, on seed-averaged values; of :func:`seed_aware_test` over
    every seed otherwise."""
    if seed is None and inference == "seed_aware":
        a, b = paired_cells(metrics, experiment, measure)
        result = seed_aware_test(a - b)
        return result.p, result.effect
    a, b = _paired(metrics, experiment, measure, seed)
    diff = float((a - b).mean()) if a.size else 0.0
    return paired_pvalue(a, b, test, permutations=permutations, seed=rng_seed), diff


def _marks(metrics: pl.DataFrame, experiments: Sequence[str], measure: str, seed: str | None,
           use_holm: bool, test: str = "ttest", permutations: int = 10_000, rng_seed: int = 0,
           inference: str = "per_query") -> dict[str, str]:
    """A mark per experiment against its baseline (``""`` for the baselines); with ``use_holm`` every comparison of
    the row (both baseline groups) is one Holm family. ``inference`` as in :func:`_pvalue`."""
    others = [e for e in experiments if e != baseline_of(e)]
    tests = [_pvalue(metrics, e, measure, seed, test, permutations, rng_seed, inference) for e in others]
    p = [t[0] for t in tests]
    if use_holm and p:
        p = holm(p)
    return {e: "" for e in experiments} | {e: mark(x, t[1]) for e, x, t in zip(others, p, tests)}


def check_inference(inference: str) -> None:
    """Refuse an ``inference`` other than :data:`INFERENCES`."""
    if inference not in INFERENCES:
        raise ValueError(f"unknown inference {inference!r}; expected one of {', '.join(INFERENCES)}")


def _in_order(metrics: pl.DataFrame) -> pl.DataFrame:
    """The rows in one fixed order, so every mean sums in the same order and the tables are bit-for-bit a function
    of the rows, not of their order (polars' group_by returns groups in varying order)."""
    return metrics.sort([c for c in ("experiment", "seed", "measure", "qid") if c in metrics.columns])


def seeds_table(metrics: pl.DataFrame, measure: str, use_holm: bool = False, *, test: str = "ttest",
                permutations: int = 10_000, seed: int = 0, inference: str = "seed_aware") -> pl.DataFrame:
    """Penha Table 5: rows seed.../AVG/SD, a value and a mark column per experiment (:func:`experiment_order`).

    ``test``, ``permutations`` and ``seed`` (the randomization test's RNG seed) go to :func:`paired_pvalue`, the
    test of each seed's row. The AVG row's marks are :func:`seed_aware_test`'s over every seed (``inference``
    ``seed_aware``, the default; then ``<experiment>_mark_per_query`` columns keep the per-query test's marks on
    seed-averaged values) or that per-query test's (``per_query``).
    """
    check_inference(inference)
    metrics = _in_order(metrics)
    experiments = experiment_order(set(metrics["experiment"]))
    seeds = sorted(set(metrics["seed"]), key=lambda s: int(s) if s.lstrip("-").isdigit() else s)
    means = metrics.filter(pl.col("measure") == measure).group_by("experiment", "seed").agg(pl.col("value").mean())
    mean_of = {(e, s): v for e, s, v in means.iter_rows()}
    rows = []
    for s in seeds:
        marks = _marks(metrics, experiments, measure, s, use_holm, test, permutations, seed)
        rows.append({"row": f"seed {s}", **{e: mean_of.get((e, s)) for e in experiments},
                     **{f"{e}_mark": marks[e] for e in experiments}})
    marks = _marks(metrics, experiments, measure, None, use_holm, test, permutations, seed, inference)
    per_seed = {e: [mean_of[(e, s)] for s in seeds if (e, s) in mean_of] for e in experiments}
    rows.append({"row": "AVG", **{e: float(np.mean(v)) for e, v in per_seed.items()},
                 **{f"{e}_mark": marks[e] for e in experiments}})
    rows.append({"row": "SD", **{e: float(np.std(v, ddof=1)) if len(v) > 1 else math.nan for e, v in per_seed.items()},
                 **{f"{e}_mark": "" for e in experiments}})
    schema = {"row": pl.String, **{e: pl.Float64 for e in experiments}, **{f"{e}_mark": pl.String for e in experiments}}
    table = pl.DataFrame(rows, schema=schema)
    if inference == "seed_aware":  # the per-query marks beside: the seed rows' own, the AVG row's on averages
        second = _marks(metrics, experiments, measure, None, use_holm, test, permutations, seed)
        table = table.with_columns(pl.when(pl.col("row") == "AVG").then(pl.lit(second[e])).otherwise(
            pl.col(f"{e}_mark")).alias(f"{e}_mark_per_query") for e in experiments)
    return table


def metrics_table(metrics: pl.DataFrame, measures: Sequence[str], references: pl.DataFrame | None = None,
                  use_holm: bool = False, *, test: str = "ttest", permutations: int = 10_000,
                  seed: int = 0, inference: str = "seed_aware") -> pl.DataFrame:
    """MacAvaney Table 3: a row per experiment (then each reference ranker), value and mark per measure. Marks by
    ``inference`` (see :func:`seeds_table`); with ``seed_aware``, ``<measure>_mark_per_query`` columns keep the
    per-query test's marks on seed-averaged values."""
    check_inference(inference)
    metrics = _in_order(metrics)
    experiments = experiment_order(set(metrics["experiment"]))
    per_seed = _in_order(metrics.group_by("experiment", "seed", "measure").agg(pl.col("value").mean()))
    avg = {(e, m): v for e, m, v in per_seed.group_by("experiment", "measure").agg(pl.col("value").mean()).iter_rows()}
    marks = {m: _marks(metrics, experiments, m, None, use_holm, test, permutations, seed, inference)
             for m in measures}
    second = {m: _marks(metrics, experiments, m, None, use_holm, test, permutations, seed)
              for m in measures} if inference == "seed_aware" else {}
    rows = [{"ranker": e, **{m: avg.get((e, m)) for m in measures}, **{f"{m}_mark": marks[m][e] for m in measures},
             **{f"{m}_mark_per_query": second[m][e] for m in second}} for e in experiments]
    if references is not None and references.height:
        ref = _in_order(references).group_by("experiment", "measure").agg(pl.col("value").mean())
        ref_avg = {(e, m): v for e, m, v in ref.iter_rows()}
        for e in sorted(set(references["experiment"])):
            rows.append({"ranker": e, **{m: ref_avg.get((e, m)) for m in measures},
                         **{f"{m}_mark": "" for m in measures}, **{f"{m}_mark_per_query": "" for m in second}})
    schema = {"ranker": pl.String, **{m: pl.Float64 for m in measures}, **{f"{m}_mark": pl.String for m in measures},
              **{f"{m}_mark_per_query": pl.String for m in second}}
    return pl.DataFrame(rows, schema=schema)


def power_table(metrics: pl.DataFrame, measure: str, *, test: str = "ttest", permutations: int = 10_000,
                seed: int = 0, alpha: float = 0.05, power: float = 0.8, inference: str = "seed_aware") -> pl.DataFrame:
    """A row per experiment other than the baselines, on ``measure``, against :func:`baseline_of` it: ``seeds``,
    ``queries``, ``baseline_mean``, ``experiment_mean``, ``difference`` (mean of experiment - baseline), ``sd`` (of
    the seed-averaged per-query differences, ddof=1), ``sd_seed``, ``sd_query``, ``sd_resid`` (square roots of the
    variance components of the differences, :func:`seed_query_components`), ``se`` and ``df`` (of the mean
    difference, :func:`seed_aware_test`), ``p_seed_aware``, ``p_ttest`` (per-query paired t-test on seed-averaged
    values), ``p_<test>`` (only when ``test`` is not ``ttest``), ``mde``, ``mde_pct`` (100 * mde / baseline mean)
    and ``queries_2pct`` (test queries an effect of 2% of the baseline mean needs; null when not positive or out of
    reach). ``mde`` and ``queries_2pct`` follow ``inference``: with ``seed_aware`` (the default)
    :func:`seed_aware_mde` and :func:`design_queries` at this table's number of seeds; with ``per_query``
    :func:`mde` and :func:`queries_needed` of the seed-averaged differences. The seed-aware columns are null when
    the design is unbalanced and ``inference`` is ``per_query`` (``seed_aware`` refuses it). Rows in
    :func:`experiment_order`."""
    check_inference(inference)
    metrics = _in_order(metrics.filter(pl.col("measure") == measure))
    second = [] if test == "ttest" else [f"p_{test}"]
    rows = []
    for e in experiment_order(set(metrics["experiment"])):
        if e == baseline_of(e):
            continue
        a, b = _paired(metrics, e, measure, None)
        d = a - b
        base_mean = float(b.mean()) if b.size else math.nan
        sd = float(d.std(ddof=1)) if d.size > 1 else math.nan
        effect = RELATIVE_EFFECT * base_mean
        result = seed_aware_result(metrics, e, measure, alpha=alpha, inference=inference)
        c = result.components if result is not None else None
        try:
            if inference == "seed_aware":
                mde_abs = seed_aware_mde(result, alpha, power)
                needed = design_queries((c.var_seed, c.var_query, c.var_resid), effect, c.seeds, alpha, power)
            else:
                mde_abs = mde(d, alpha, power)
                needed = queries_needed(sd, effect, alpha, power)
        except (ValueError, OverflowError):
            needed = None
        rows.append({"experiment": e, "baseline": baseline_of(e), "seeds": c.seeds if c else None,
                     "queries": int(d.size), "baseline_mean": base_mean,
                     "experiment_mean": float(a.mean()) if a.size else math.nan,
                     "difference": float(d.mean()) if d.size else math.nan, "sd": sd,
                     **{f"sd_{k}": math.sqrt(getattr(c, f"var_{k}")) if c else None
                        for k in ("seed", "query", "resid")},
                     "se": result.se if result else None, "df": result.df if result else None,
                     "p_seed_aware": result.p if result else None, "p_ttest": paired_ttest(a, b),
                     **{k: paired_pvalue(a, b, test, permutations=permutations, seed=seed) for k in second},
                     "mde": mde_abs, "mde_pct": 100 * mde_abs / base_mean if base_mean > 0 else math.nan,
                     "queries_2pct": needed})
    schema = {"experiment": pl.String, "baseline": pl.String, "seeds": pl.Int64, "queries": pl.Int64,
              **{k: pl.Float64 for k in ("baseline_mean", "experiment_mean", "difference", "sd", "sd_seed", "sd_query",
                                         "sd_resid", "se", "df", "p_seed_aware", "p_ttest", *second, "mde",
                                         "mde_pct")}, "queries_2pct": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def pooled_components(power: pl.DataFrame) -> tuple[float, float, float] | None:
    """(s2_seed, s2_query, s2_resid) pooled over the comparisons of a :func:`power_table` (:func:`pool_components`
    of its rows' sd_* columns squared); None without rows that have them."""
    rows = power.select("sd_seed", "sd_query", "sd_resid").drop_nulls()
    return pool_components([tuple(v * v for v in row) for row in rows.iter_rows()]) if rows.height else None


def mde_sentence(power: pl.DataFrame, measure: str, alpha: float = 0.05, power_level: float = 0.8,
                 inference: str = "seed_aware") -> str:
    """One plain sentence on the power of the comparisons in ``power`` (a :func:`power_table` made with
    ``inference``): the median over experiments of the MDE, its share of the baseline mean and the queries a 2%
    effect needs; "" when there are no experiments (or fewer than 2 queries)."""
    mdes = power["mde"].drop_nans().drop_nulls()
    if mdes.is_empty():
        return ""
    n = math.ceil(float(power["queries"].median()))
    pct = power["mde_pct"].drop_nans().drop_nulls()
    bases = {(b, m) for b, m in power.select("baseline", "baseline_mean").iter_rows()}
    whose = f"the baseline's {next(iter(bases))[1]:.4f}" if len(bases) == 1 else "the baseline's mean"
    share = f" ({float(pct.median()):.1f}% of {whose}; median over experiments)" if not pct.is_empty() else \
        " (median over experiments)"
    needed = power["queries_2pct"].drop_nulls()
    need = (f"; a {RELATIVE_EFFECT:.0%} effect would need {math.ceil(float(needed.median())):,} queries"
            if not needed.is_empty() else "")
    if inference == "seed_aware":
        seeds = power["seeds"].drop_nulls()
        what = f"and {int(seeds.median())} seeds the seed-aware comparison" if not seeds.is_empty() else \
            "the seed-aware comparison"
        need += " with as many seeds" if need else ""
    else:
        what = "the seed-averaged paired comparison"
    return (f"With {n:,} test queries {what} detects (alpha {alpha:g}, power "
            f"{power_level:g}) differences of {measure} ≥ {float(mdes.median()):.3f}{share}{need}.")


def to_markdown(table: pl.DataFrame, key: str, digits: int = 4) -> str:
    """A Markdown table: each value column printed with its ``<col>_mark`` appended (e.g. ``0.6006†``) and, where a
    ``<col>_mark_per_query`` column gives another mark, that one in parentheses (``0.6006 (‡)``; ``(–)``: none)."""
    values = [c for c in table.columns if c != key and not c.endswith(("_mark", "_mark_per_query"))]
    lines = ["| " + " | ".join([key, *values]) + " |", "|" + "---|" * (len(values) + 1)]
    for row in table.iter_rows(named=True):
        cells = []
        for c in values:
            v = row[c]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append("–")
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                first, second = row.get(f"{c}_mark") or "", row.get(f"{c}_mark_per_query")
                aside = f" ({second or '–'})" if second is not None and second != first else ""
                cells.append(f"{v:.{digits}f}{first}{aside}" if isinstance(v, float) else str(v))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join([str(row[key]), *cells]) + " |")
    return "\n".join(lines) + "\n"


def write_table_files(table: pl.DataFrame, key: str, stem: str | Path, caption: str) -> dict[str, Path]:
    """``<stem>.md`` (caption + table), ``<stem>.csv`` and ``<stem>.parquet``, each written atomically."""
    stem = Path(stem)
    return {"md": write_text_atomically(stem.with_suffix(".md"), f"{caption}\n\n{to_markdown(table, key)}"),
            "csv": write_file_atomically(stem.with_suffix(".csv"), table.write_csv),
            "parquet": write_file_atomically(stem.with_suffix(".parquet"), table.write_parquet)}


def describe_test(test: str, permutations: int, seed: int) -> str:
    """How a caption names the configured paired test."""
    if test not in TESTS:
        raise ValueError(f"unknown paired test {test!r}; expected one of {', '.join(TESTS)}")
    if test == "randomization":
        return f"{TEST_NAMES[test]} ({permutations:,} random sign flips, seed {seed})"
    if test == "wilcoxon":
        return f"{TEST_NAMES[test]} (zero differences dropped)"
    return TEST_NAMES[test]


def tables_stage(metric_paths: Mapping[tuple[str, str], str | Path], reference_paths: Mapping[str, str | Path],
                 outputs: Mapping[str, str | Path], *, measure: str, measures: Sequence[str], use_holm: bool,
                 dataset: str, test: str = "ttest", permutations: int = 10_000,
                 seed: int = 0, inference: str = "seed_aware",
                 plan_max_queries: int | None = None) -> dict[str, pl.DataFrame]:
    """Rule ``report_tables``: the seeds table (one measure), the metrics table and the power table (one measure),
    as .md/.csv/.parquet.

    ``outputs`` maps ``seeds``, ``metrics`` and ``power`` to a path stem (the extension is added per format).
    ``test`` is the per-query paired test (``report.test``); ``permutations`` and ``seed`` drive the
    randomization test. ``inference`` (``report.inference``) judges the seed-averaged marks: ``seed_aware`` (the
    default) or ``per_query``. The power table's caption carries the planner (:func:`plan_sentence`, its largest
    number of test queries ``plan_max_queries``, ``report.plan_max_queries``).
    """
    check_inference(inference)
    described = describe_test(test, permutations, seed)
    metrics = load_metrics(metric_paths)
    refs = load_metrics({(name, "0"): p for name, p in reference_paths.items()}) if reference_paths else None
    if measure not in set(metrics["measure"]):
        raise ValueError(f"report.measure {measure!r} is not among the evaluated measures "
                         f"{sorted(set(metrics['measure']))}")
    knobs = {"test": test, "permutations": permutations, "seed": seed, "inference": inference}
    seeds = seeds_table(metrics, measure, use_holm, **knobs)
    table = metrics_table(metrics, measures, refs, use_holm, **knobs)
    power = power_table(metrics, measure, **knobs)
    n_q = metrics["qid"].n_unique()
    holm_note = " (Holm-Bonferroni adjusted)" if use_holm else ""
    bm25 = any(e.endswith(BM25_SUFFIX) and e != BASELINE + BM25_SUFFIX for e in set(metrics["experiment"]))
    bm25_note = " The +bm25 rows are compared with baseline+bm25." if bm25 else ""
    marks = f"Better than the baseline: † p < 0.05, ‡ p < 0.01; worse: ↓ p < 0.05, ↓↓ p < 0.01{holm_note}"
    if inference == "seed_aware":
        averaged = (f"{SEED_AWARE_NAME} over every seed and test query; in parentheses where it differs, the mark of "
                    f"the {described} on seed-averaged per-query values (–: none)")
    else:
        averaged = f"{described} on the seed-averaged per-query values"
    write_table_files(seeds, "row", Path(outputs["seeds"]).with_suffix(""),
                      f"Test {measure} on {dataset} ({n_q} queries) per seed, their average and standard deviation. "
                      f"{marks}; per seed: {described} against the baseline of the same seed; AVG: {averaged}."
                      f"{bm25_note}")
    sentence = mde_sentence(power, measure, inference=inference)
    write_table_files(table, "ranker", Path(outputs["metrics"]).with_suffix(""),
                      f"Test effectiveness on {dataset} ({n_q} queries), mean over seeds. {marks}; {averaged}; "
                      f"against the baseline.{bm25_note} Reference rankers (BM25 with default "
                      "k1/b and tuned on dev, the teacher, teacher+bm25) are not tested."
                      + (f" {sentence}" if sentence else ""))
    second = "" if test == "ttest" else f"; p_{test}: the {described}"
    pooled = pooled_components(power)
    base_mean = float(power["baseline_mean"].mean()) if power.height else math.nan
    planner = plan_sentence(pooled, RELATIVE_EFFECT * base_mean, power.height, measure,
                            max_queries=plan_max_queries) if pooled is not None else ""
    judge = "p_seed_aware" if inference == "seed_aware" else "the per-query test"
    if inference == "seed_aware":
        judged = ("mde: the minimum detectable mean difference of the seed-aware test (alpha 0.05, power 0.8), "
                  "(t_0.975,df + t_0.8,df) * se; queries_2pct: test queries that test needs, with this many "
                  "seeds and these variance components, to detect a 2% change of the baseline mean")
    else:
        judged = ("mde: the minimum detectable mean difference of the paired t-test (alpha 0.05, power 0.8), "
                  "(t_0.975,n-1 + t_0.8,n-1) * sd / sqrt(n) (Cohen 1988; Sakai 2016); queries_2pct: test queries "
                  "needed to detect a 2% change of the baseline mean with the same sd")
    write_table_files(power, "experiment", Path(outputs["power"]).with_suffix(""),
                      f"Power of the comparisons on test {measure} ({dataset}) against the baseline"
                      f"{' (baseline+bm25 for the +bm25 rows)' if bm25 else ''}. difference: "
                      "mean of experiment - baseline; sd: the standard deviation of the seed-averaged per-query "
                      "differences (ddof 1); sd_seed, sd_query, sd_resid: the seed, query and residual variance "
                      "components of the per-seed per-query differences (crossed random effects, method of moments), "
                      f"se and df: the standard error of the mean difference and its Satterthwaite df; p_seed_aware: "
                      f"the {SEED_AWARE_NAME}; p_ttest: the per-query paired two-sided t-test on seed-averaged "
                      f"values{second}. The marks are judged by {judge}. "
                      f"{judged}; mde_pct: mde as % of the baseline mean."
                      + (f" {sentence}" if sentence else "") + (f" {planner}" if planner else ""))
    return {"seeds": seeds, "metrics": table, "power": power}


def split_inputs(inputs: Mapping[str, str], kind: str) -> dict[tuple[str, ...], str]:
    """Named rule inputs ``<kind>|a|b`` as {(a, b): path} (how the report rules key runs by experiment and seed)."""
    out = {}
    for name in inputs.keys():
        parts = name.split("|")
        if parts[0] == kind:
            out[tuple(parts[1:])] = inputs[name]
    return out

"""The seed-aware test: seeds and test queries both treated as samples.

:func:`seed_aware_test` takes the per-seed per-query differences d[s, q], which follow the crossed random-effects
model d = mu + a_s + b_q + e_sq, whose variance components are the ANOVA (method-of-moments) estimates
(:func:`seed_query_components`; Searle, Casella & McCulloch 1992, *Variance Components*, ch. 4). The standard error
of the mean difference is the plug-in of the *clipped* components, and its degrees of freedom are Satterthwaite's
(Satterthwaite 1946) with the seed mean square at its upper :data:`SEED_DF_CONFIDENCE` confidence limit, never below
S - 1 (:func:`mean_variance`). There is no pretest: a seed component estimated at or below zero does not switch the
test to the per-query one. The rule was chosen by simulation (``analyses/seed_aware_size.py``; ``docs/evaluation.md``):
its type-I error stays within Monte-Carlo error of 5% at 2 to 20 seeds, 100 to 1,500 queries, seed SDs 0-0.1, query
SDs 0-0.1 and residual SDs 0.05-0.4, where the former pretest reached 7.1% at 3 seeds and 12.4% at 2, and plain
Satterthwaite 7.9% at 3 and 6.5% at 4.

Those simulations draw the grand mean and the three mean squares directly (:func:`simulate_mean_squares`) and count
the test's rejections (:func:`rejection_rate`). Its power and planning are :mod:`curricula.statistics.power`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

import numpy as np
import scipy  # its stats module loads at first use (scipy's lazy submodules), not when a plan imports this one

#: the one-sided confidence level of the upper limit of E[MS_seed] at which the seed-aware test's Satterthwaite df
#: are computed (:func:`mean_variance`); 0.8 keeps the simulated type-I error at 5% from 2 seeds up
SEED_DF_CONFIDENCE = 0.8


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
        """(s2_seed, s2_query, s2_resid) before clipping: (MS_seed - MS_resid) / Q, (MS_query - MS_resid) / S, MS_resid;
        unbiased, so they can be averaged over comparisons (:func:`~curricula.statistics.power.pool_components`) before
        clipping. A term without degrees of freedom is the clipped one (as :func:`seed_query_components` defines it)."""
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


@overload
def mean_variance(ms_seed: float, ms_query: float, ms_resid: float, seeds: int, queries: int,
                  confidence: float = ...) -> tuple[float, float]: ...


@overload
def mean_variance(ms_seed: np.ndarray, ms_query: np.ndarray, ms_resid: np.ndarray, seeds: int, queries: int,
                  confidence: float = ...) -> tuple[np.ndarray | float, np.ndarray | float]: ...


def mean_variance(ms_seed: float | np.ndarray, ms_query: float | np.ndarray, ms_resid: float | np.ndarray,
                  seeds: int, queries: int,
                  confidence: float = SEED_DF_CONFIDENCE) -> tuple[float | np.ndarray, float | np.ndarray]:
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
    upper = np.maximum(ms_seed * df_s / scipy.stats.chi2.ppf(1 - confidence, df_s), ms_resid)
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
    half = float(scipy.stats.t.ppf(1 - alpha / 2, df)) * se
    return SeedAwareResult(c.mean, se, df, t, float(2 * scipy.stats.t.sf(abs(t), df)), c.mean - half, c.mean + half, c)


@dataclass(frozen=True)
class DrawDifference:
    """Two draws' effects compared by :func:`draw_difference_test`: ``difference`` (first minus second), its
    standard error and Welch-Satterthwaite degrees of freedom, t and the two-sided p."""

    difference: float
    se: float
    df: float
    t: float
    p: float


def welch_difference_p(mean_a: float | np.ndarray, var_a: float | np.ndarray, df_a: float | np.ndarray,
                       mean_b: float | np.ndarray, var_b: float | np.ndarray, df_b: float | np.ndarray
                       ) -> tuple[float | np.ndarray, float | np.ndarray, float | np.ndarray]:
    """(t, df, two-sided p) of mean_a - mean_b = 0 for two independent estimates with variances ``var_*`` (of the
    means, not per observation) on ``df_*`` degrees of freedom: t = (mean_a - mean_b) / sqrt(var_a + var_b) on the
    Welch-Satterthwaite df (var_a + var_b)^2 / (var_a^2 / df_a + var_b^2 / df_b) (Welch 1947). Arrays broadcast
    (vectorised, for the simulations of its error rate)."""
    var_a, var_b = np.asarray(var_a, dtype=np.float64), np.asarray(var_b, dtype=np.float64)
    var = var_a + var_b
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (np.asarray(mean_a, dtype=np.float64) - mean_b) / np.sqrt(var)
        df = var ** 2 / (var_a ** 2 / df_a + var_b ** 2 / df_b)
    p = 2 * scipy.stats.t.sf(np.abs(t), df)
    if np.ndim(t) == 0:
        return float(t), float(df), float(p)
    return t, df, p


def draw_difference_test(a: SeedAwareResult, b: SeedAwareResult) -> DrawDifference:
    """Whether two independent draws of one comparison (a study's cell on its original draw and on a fresh one: other
    training and test queries, other seeds) estimate different effects: :func:`welch_difference_p` of their
    seed-aware means (:func:`seed_aware_test`; each SE already counts seeds and test queries as samples). A small p
    says the draws disagree by more than seed and query noise explain (something of the draw itself matters); a
    large one that one effect fits both. Two draws of one pool share some test queries, which correlates the
    estimates positively and makes the test conservative. Its error rate at the study's sizes is checked by
    simulation (:func:`draw_difference_rejection_rate`; ``tests/test_error_rates.py``,
    ``analyses/draw_difference_size.py``)."""
    t, df, p = welch_difference_p(a.effect, a.se ** 2, a.df, b.effect, b.se ** 2, b.df)
    return DrawDifference(a.effect - b.effect, math.sqrt(a.se ** 2 + b.se ** 2), float(df), float(t), float(p))


# ------------------------------------------------------------------------------------------------- simulation
def simulate_mean_squares(rng: np.random.Generator, seeds: int, queries: int, sd_seed: float, sd_query: float,
                          sd_resid: float, draws: int, mu: float = 0.0
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """``draws`` samples of (mean of d, MS_seed, MS_query, MS_resid) of a balanced ``seeds`` x ``queries`` design of
    the crossed normal model of :func:`seed_query_components` with true mean ``mu``, and the true SD of the mean.

    In that model the grand mean and the three mean squares are independent, each mean square its expectation
    times a chi-square over its df (Searle, Casella & McCulloch 1992, ch. 4), so a simulation of the seed-aware test
    needs no seeds x queries matrix (``tests/test_error_rates.py`` checks it against whole matrices)."""
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
    return float(np.mean(2 * scipy.stats.t.sf(t, df) < alpha))


def draw_difference_rejection_rate(rng: np.random.Generator, seeds: tuple[int, int], queries: int, sd_seed: float,
                                   sd_query: float, sd_resid: float, draws: int, alpha: float = 0.05) -> float:
    """The share of simulated pairs of independent draws (``seeds`` each, ``queries`` test queries each, the same
    true effect 0.02 and SDs) whose difference :func:`draw_difference_test` rejects at ``alpha``: its type-I error.
    Each draw's seed-aware mean, variance and df come from its mean squares (:func:`simulate_mean_squares`,
    :func:`mean_variance`), as :func:`rejection_rate` simulates the one-draw test."""
    parts = []
    for s in seeds:
        mean, ms_seed, ms_query, ms_resid, _ = simulate_mean_squares(rng, s, queries, sd_seed, sd_query, sd_resid,
                                                                     draws, mu=0.02)
        scaled, df = mean_variance(ms_seed, ms_query, ms_resid, s, queries)
        parts.append((mean, scaled / (s * queries), df))
    return float(np.mean(welch_difference_p(*parts[0], *parts[1])[2] < alpha))

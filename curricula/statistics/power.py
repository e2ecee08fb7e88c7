"""Power, the minimum detectable effect and the planner of seeds and test queries.

Per-query paired t-test: :func:`mde` = (t_{1-alpha/2, n-1} + t_{power, n-1}) s / sqrt(n) (Cohen 1988, *Statistical
Power Analysis for the Behavioral Sciences*, ch. 2; Sakai 2016, SIGIR) and its inverse :func:`queries_needed`; the
factor is :func:`power_factor`. The seed-aware test (:mod:`curricula.statistics.seed_aware`): :func:`seed_aware_mde`
from a result, :func:`design_mde` from variance components (the t approximation with the df of
:func:`~curricula.statistics.seed_aware.mean_variance` at the expected mean squares), :func:`design_queries` (the
smallest feasible number of test queries; the MDE is not monotone in it), :func:`design_seeds`, :func:`plan`,
:func:`design_mdes` and :func:`cheapest`. :func:`pool_components` pools the components of several comparisons (mean
squares pooled, then clipped) and :func:`seed_sd_interval` gives the range the seed SD's S - 1 degrees of freedom
leave (chi-square limits of E[MS_seed]).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import scipy  # its stats module loads at first use (scipy's lazy submodules), not when a run's summary imports this one

from curricula.statistics.seed_aware import SeedAwareResult, mean_variance

SEEDS_PLANNED = tuple(range(2, 11))  # the planner's seed counts


def power_factor(df: float, alpha: float, power: float) -> float:
    """``t_{1-alpha/2, df} + t_{power, df}``: an MDE in standard errors (Cohen 1988 ch. 2, t quantiles)."""
    return float(scipy.stats.t.ppf(1 - alpha / 2, df) + scipy.stats.t.ppf(power, df))


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

    start = ((scipy.stats.norm.ppf(1 - alpha / 2) + scipy.stats.norm.ppf(power)) * sd / effect) ** 2
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


def seed_aware_mde(result: SeedAwareResult, alpha: float = 0.05, power: float = 0.8) -> float:
    """The minimum detectable mean difference of :func:`~curricula.statistics.seed_aware.seed_aware_test`:
    (t_{1-alpha/2, df} + t_{power, df}) * SE with its df (with one seed, :func:`mde`). nan without a standard error."""
    check_levels(alpha, power)
    if not (math.isfinite(result.se) and result.df > 0):
        return math.nan
    return power_factor(result.df, alpha, power) * result.se


# ------------------------------------------------------------------------------------------- power and planning
def pool_components(parts: Sequence[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(s2_seed, s2_query, s2_resid) pooled over compared pairs, each given as its *unclipped* method-of-moments
    components (:meth:`~curricula.statistics.seed_aware.SeedQueryComponents.unclipped`): the mean of each over ``parts``
    (every pair of a table or of a dataset's claims weighs the same), then clipped at 0. Averaging clipped components
    would bias a zero seed variance upwards (each negative estimate counted as 0). Raises ValueError on an empty
    list."""
    if not parts:
        raise ValueError("no comparisons to pool variance components over")
    s2_seed, s2_query, s2_resid = (max(0.0, float(np.mean([part[i] for part in parts]))) for i in range(3))
    return s2_seed, s2_query, s2_resid


def _expected_mean_squares(components: tuple[float, float, float], seeds: int,
                           queries: int) -> tuple[float, float, float]:
    s2_seed, s2_query, s2_resid = components
    return s2_resid + queries * s2_seed, s2_resid + seeds * s2_query, s2_resid


def design_mde(components: tuple[float, float, float], seeds: int, queries: int, alpha: float = 0.05,
               power: float = 0.8) -> float:
    """The minimum detectable mean difference of :func:`~curricula.statistics.seed_aware.seed_aware_test` on a
    design of ``seeds`` x ``queries`` when the differences have variance components ``(s2_seed, s2_query, s2_resid)``:

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
    low, high = (ms_seed * df / scipy.stats.chi2.ppf(q, df) for q in ((1 + level) / 2, (1 - level) / 2))
    sd_low, sd_high = (math.sqrt(max(0.0, (x - ms_resid) / queries)) for x in (low, high))
    return sd_low, sd_high


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
        queries = needed[s]
        if queries is not None:
            return s, queries
    return None

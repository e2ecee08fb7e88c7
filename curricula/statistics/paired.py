"""Per-query paired tests (one seed, or seed-averaged values; the papers' protocol) and the paired test of variances.

Of a mean difference: :func:`paired_ttest` (Student's, scipy ``ttest_rel``), :func:`paired_randomization` (Fisher's
sign-flip randomization test, Smucker et al. 2007, CIKM; its p counts the observed assignment, Phipson & Smyth 2010)
and :func:`paired_wilcoxon` (signed-rank, zero differences dropped), dispatched over :data:`TESTS` by
:func:`paired_pvalue`; :func:`confidence_interval` is the Student t interval of the mean difference. Their power is
:mod:`curricula.statistics.power`'s (``mde``, ``queries_needed``).

Of two variances of paired samples: :func:`pitman_morgan` (Pitman 1939, Morgan 1939, *Biometrika* 31: the t test of
the correlation of x + y and x - y, and its inversion for the SD ratio's interval), with its power by simulation
(:func:`pitman_morgan_power`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy  # its stats module loads at first use (scipy's lazy submodules), not when a run's summary imports this one

TESTS = ("ttest", "wilcoxon", "randomization")
_CHUNK = 1 << 21  # sign-flip matrix elements per chunk of the randomization test (16 MiB as float64)


def _differences(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired test needs two vectors of equal length, got {a.shape} and {b.shape}")
    return a - b


def paired_ttest(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided paired t-test p value of a vs b (scipy ``ttest_rel``); 1.0 when the differences are all equal."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired test needs equal lengths, got {a.shape} and {b.shape}")
    if a.size < 2 or np.allclose(a - b, (a - b)[0]):
        return 1.0
    return float(scipy.stats.ttest_rel(a, b).pvalue)


def paired_randomization(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *,
                         permutations: int = 10_000, seed: int = 0) -> float:
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


def paired_wilcoxon(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p value of a vs b (scipy ``wilcoxon``, ``zero_method="wilcox"``: zero
    differences are dropped before ranking, Wilcoxon's original treatment; scipy's default exact/normal choice).
    1.0 when all differences are zero."""
    d = _differences(a, b)
    if not np.any(d):
        return 1.0
    return float(scipy.stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def paired_pvalue(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, test: str, *,
                  permutations: int = 10_000, seed: int = 0) -> float:
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


def confidence_interval(differences: Sequence[float] | np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The two-sided ``level`` confidence interval of the mean of paired differences (Student's t, n - 1 degrees of
    freedom): mean -/+ t_{(1+level)/2, n-1} * sd / sqrt(n). (nan, nan) for fewer than 2 differences."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return math.nan, math.nan
    half = float(scipy.stats.t.ppf((1 + level) / 2, d.size - 1)) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return float(d.mean()) - half, float(d.mean()) + half


@dataclass(frozen=True)
class VarianceRatio:
    """:func:`pitman_morgan`'s result: the ratio ``SD(y) / SD(x)`` of two paired samples, its two-sided p value
    against a ratio of 1, and the confidence interval of the SD ratio at ``level``."""

    ratio: float
    p: float
    low: float
    high: float
    level: float


def pitman_morgan(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                  level: float = 0.95) -> VarianceRatio:
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
    crit = float(scipy.stats.t.ppf(0.5 + level / 2, n - 2))
    va, vb, cab = sa * sa, sb * sb, float(np.cov(a, b)[0, 1])

    def t_stat(scale: float) -> float:
        """The correlation t of (b + scale a, b - scale a), from the sample moments: > 0 when the sample Var(b)
        exceeds scale^2 Var(a), falling as ``scale`` grows."""
        u = scale * scale * va
        r = (vb - u) / math.sqrt(max((vb + u) ** 2 - 4 * u * cab * cab / va, 1e-300))
        r = min(max(r, -1 + 1e-15), 1 - 1e-15)
        return r * math.sqrt(n - 2) / math.sqrt(1 - r * r)

    t0 = t_stat(1.0)
    p = float(2 * scipy.stats.t.sf(abs(t0), n - 2))

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
    ``r with reference`` column of ``analyses/selection_noise.py``): how many seeds a selection-noise grid needs to tell
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

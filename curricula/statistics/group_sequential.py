"""Group-sequential designs: per-look thresholds that add seeds in rounds without inflating the error rate.

A study trains a claim's (dataset, ranker) cell with the first look's seeds (e.g. 5), runs the seed-aware test of
:mod:`curricula.statistics.seed_aware`, and trains more seeds (10, 15, 20) only where the verdict is still open.
Testing at p < 0.05 after every round would let a true null cross by chance at one of the rounds (the
optional-stopping problem; Armitage, McPherson & Rowe 1969), more often the more looks there are
(``docs/sequential.md``). Here each look has its own nominal threshold, from an alpha-spending function (Lan & DeMets
1983, *Biometrika* 70: 659-663): the share of alpha that may be spent by the time a fraction t of the information is
in, with the boundaries at the looks solved so that the probability of ever crossing under the null is alpha
(Jennison & Turnbull 2000, *Group Sequential Methods with Applications to Clinical Trials*, ch. 7).

- :func:`information_fractions`: t_k = S_k / S_K, the seed count at look k over that of the last look. The seed term
  dominates Var(mean d), which falls as 1 / S; the query term s2_query / Q does not fall with more seeds (every seed
  is evaluated on the same test queries), so the true information grows slower than S and successive looks are more
  correlated than t assumes, which makes the boundaries conservative, not liberal (simulated with seed SD 0 in the
  tests, where the query term weighs most).
- :func:`spending`: O'Brien-Fleming-type alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) (spends almost nothing early)
  or Pocock-type alpha(t) = alpha ln(1 + (e - 1) t) (Lan & DeMets 1983; spends evenly).
- :func:`group_sequential_z` / :func:`spending_boundaries`: the boundaries by the recursive numerical integration of
  Armitage, McPherson & Rowe (1969) (Jennison & Turnbull 2000, ch. 19): the sub-density of the Brownian score
  W(t_k) = Z_k sqrt(t_k) on the continuation region is carried from look to look on a Simpson grid, and each look's
  boundary is the root at which the probability of a first crossing there equals the alpha spent since the look
  before. Deterministic. :func:`crossing_probabilities` is the same recursion forward, for boundaries given.
- Equivalence sequentially: two one-sided tests (Schuirmann 1987), each one-sided at level alpha with its own
  spending (Jennison & Turnbull 2000, ch. 6), i.e. one-sided boundaries (``sides=1``); equivalence is shown at a look
  where both one-sided p values are below that look's one-sided threshold.
- Calibration of the small df (measured by :func:`analyses.sequential_simulation.simulate_sequential`;
  ``docs/sequential.md``): the seed-aware t at look k has few df (at least S_k - 1). Its own p (Student's t with its
  df; ``calibration="t"``) is compared with the look's threshold. Normal-theory thresholds
  (:func:`spending_boundaries`; the "significance level approach" of Jennison & Turnbull 2000, ch. 3) then spend
  slightly more than alpha where the seed term dominates (the looks share their seeds' variance estimate), so the
  thresholds used are those of the exact group-sequential t-test of the seed means with S_k - 1 df
  (:func:`student_boundaries`; Jennison & Turnbull 1991), which hold alpha there and are conservative elsewhere.
  Comparing |t| with the normal z boundary (``calibration="z"``) ignores the df and is liberal.
- :func:`sequential_design`: both tests' thresholds at every look (:class:`SequentialDesign`), which
  :mod:`curricula.statistics.sequential_verdicts` applies.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy  # stats and optimize load at first use (scipy's lazy submodules), not when a plan imports this module

KINDS = ("obrien_fleming", "pocock")
THRESHOLDS = ("student", "normal")
#: the study's rounds of seeds (issue 45)
LOOKS = (5, 10, 15, 20)
_LOWER_SDS = 9.0  # a one-sided boundary's grid reaches this many SDs of W(t) below 0 (the rest is < 1e-18)


def information_fractions(looks: Sequence[int]) -> tuple[float, ...]:
    """t_k = S_k / S_K: the seeds at each look over those at the last. Var(mean d) is dominated by the seed term
    s2_seed / S, so the information 1 / Var grows about as S (see the module docstring for the query term). ``looks``
    are strictly increasing seed counts, each at least 2 (the seed-aware test needs two seeds for its seed term)."""
    looks = tuple(int(s) for s in looks)
    if not looks or looks[0] < 2 or any(b <= a for a, b in zip(looks, looks[1:])):
        raise ValueError(f"looks must be strictly increasing seed counts >= 2, got {looks}")
    return tuple(s / looks[-1] for s in looks)


def spending(fractions: Sequence[float], alpha: float, kind: str = "obrien_fleming") -> tuple[float, ...]:
    """The cumulative type-I error alpha(t) spent by each information fraction t (Lan & DeMets 1983):

        obrien_fleming:  alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))
        pocock:          alpha(t) = alpha ln(1 + (e - 1) t)

    both alpha at t = 1. ``alpha`` is the level of the test the boundaries are for (two-sided or one-sided)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    t = np.asarray(fractions, dtype=np.float64)
    if t.size == 0 or np.any(t <= 0) or np.any(t > 1):
        raise ValueError(f"information fractions must lie in (0, 1], got {tuple(fractions)}")
    if kind == "obrien_fleming":
        # 2 - 2 Phi(.), without cancellation
        spent = 2 * scipy.stats.norm.sf(scipy.stats.norm.isf(alpha / 2) / np.sqrt(t))
    elif kind == "pocock":
        spent = alpha * np.log1p((math.e - 1) * t)
    else:
        raise ValueError(f"unknown spending function {kind!r}; expected one of {', '.join(KINDS)}")
    return tuple(float(x) for x in spent)


def _simpson(lo: float, hi: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of Simpson's rule on [lo, hi] with spacing at most ``step`` (an odd number of nodes)."""
    n = max(3, 2 * math.ceil((hi - lo) / step / 2) + 1)
    x = np.linspace(lo, hi, n)
    w = np.full(n, 2.0)
    w[1::2] = 4.0
    w[0] = w[-1] = 1.0
    return x, w * (x[1] - x[0]) / 3


def _walk(fractions: Sequence[float], sides: int, boundary: Callable[[int, Callable[[float], float]], float]
          ) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The recursion of Armitage, McPherson & Rowe (1969) over the looks (Jennison & Turnbull 2000, ch. 19).

    The score W(t_k) = Z_k sqrt(t_k) is Brownian motion under the null: independent N(0, t_k - t_{k-1}) increments.
    Its sub-density on the continuation region of look k (paths that have not crossed yet) is held on a Simpson
    grid; ``boundary(k, exit)`` returns look k's z boundary given ``exit(c)``, the probability of a first crossing
    at look k if its boundary were c (|Z_k| >= c for ``sides=2``, Z_k >= c for ``sides=1``). Returns the z
    boundaries and the probability of a first crossing at each look."""
    if sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got {sides}")
    t = np.asarray(fractions, dtype=np.float64)
    if t.size == 0 or t[0] <= 0 or np.any(np.diff(t) <= 0):
        raise ValueError(f"information fractions must be positive and increasing, got {tuple(fractions)}")
    sd_step = np.sqrt(np.diff(t, prepend=0.0))
    step = min(0.02, float(sd_step.min()) / 12)
    bounds, exits = [], []
    x = mass = np.zeros(0)  # grid of W(t_{k-1}) on the continuation region, sub-density times Simpson weights
    for k, tk in enumerate(t):
        root, sd = math.sqrt(tk), sd_step[k]

        def exit_at(c: float, x: np.ndarray = x, mass: np.ndarray = mass, first: bool = k == 0) -> float:
            if first:
                return sides * float(scipy.stats.norm.sf(c))
            upper = float(mass @ scipy.stats.norm.sf((c * root - x) / sd))
            return upper + (float(mass @ scipy.stats.norm.cdf((-c * root - x) / sd)) if sides == 2 else 0.0)

        c = boundary(k, exit_at)
        bounds.append(c)
        exits.append(exit_at(c))
        if k == t.size - 1:
            break
        y, w = _simpson(-c * root if sides == 2 else -_LOWER_SDS * root, c * root, step)
        density = (scipy.stats.norm.pdf(y / root) / root if k == 0
                   else (scipy.stats.norm.pdf((y[:, None] - x[None, :]) / sd) / sd) @ mass)
        x, mass = y, w * density
    return tuple(bounds), tuple(exits)


def group_sequential_z(fractions: Sequence[float], alpha: float, kind: str = "obrien_fleming",
                       sides: int = 2) -> tuple[float, ...]:
    """The z boundaries c_k of a group-sequential test at information ``fractions`` that spends ``alpha`` by
    :func:`spending`: under the null the probability of a first crossing (|Z_k| >= c_k, or Z_k >= c_k one-sided) at
    look k is alpha(t_k) - alpha(t_{k-1}), so the probability of ever crossing is alpha (Lan & DeMets 1983; the
    recursion of :func:`_walk`). A look that is allotted no error (a repeated fraction cannot occur) would have an
    infinite boundary; the spending functions here allot every look some."""
    spent = np.diff(spending(fractions, alpha, kind), prepend=0.0)

    def solve(k: int, exit_at: Callable[[float], float]) -> float:
        return float(scipy.optimize.brentq(lambda c: exit_at(c) - spent[k], 0.0, 40.0, xtol=1e-10, rtol=1e-12))

    return _walk(fractions, sides, solve)[0]


def crossing_probabilities(fractions: Sequence[float], z: Sequence[float], sides: int = 2) -> tuple[float, ...]:
    """Under the null, the probability of a first crossing at each look of boundaries ``z`` (|Z_k| >= z_k, or
    Z_k >= z_k for ``sides=1``) at information ``fractions``: the forward recursion of :func:`group_sequential_z`.
    Their sum is the test's overall type-I error (e.g. the classical O'Brien & Fleming 1979 boundaries z_k = C /
    sqrt(t_k) with C = 2.024 at 4 equal looks give 0.05; Jennison & Turnbull 2000, table 2.3)."""
    if len(z) != len(fractions):
        raise ValueError(f"need one boundary per look, got {len(z)} for {len(fractions)} looks")
    return _walk(fractions, sides, lambda k, _: float(z[k]))[1]


def spending_boundaries(looks: Sequence[int], alpha: float = 0.05, kind: str = "obrien_fleming",
                        sides: int = 2) -> tuple[float, ...]:
    """Per-look nominal p thresholds of a group-sequential test at seed counts ``looks`` (information
    :func:`information_fractions`) spending ``alpha`` by ``kind``: two-sided p thresholds 2 (1 - Phi(c_k)) for
    ``sides=2`` (the test of no difference), one-sided 1 - Phi(c_k) for ``sides=1`` (each half of the two one-sided
    equivalence tests at level alpha). A look rejects when its p is below its threshold
    (:func:`~curricula.statistics.sequential_verdicts.sequential_decision`).
    E.g. looks (5, 10, 15, 20), alpha 0.05 two-sided, O'Brien-Fleming type: z 3.920, 2.774, 2.298, 2.043, p
    0.00009, 0.0055, 0.0215, 0.0411. (The convention of gsDesign's ``sfLDOF``, each side spending alpha / 2 = 0.025 by
    its own one-sided function, is ``group_sequential_z(..., 0.025, sides=1)``: 4.333, 2.963, 2.359, 2.014.)"""
    z = np.asarray(group_sequential_z(information_fractions(looks), alpha, kind, sides))
    return tuple(float(p) for p in sides * scipy.stats.norm.sf(z))


@functools.lru_cache(maxsize=512)  # a Holm step-down asks for one level per hypothesis count
def _student_boundaries(looks: tuple[int, ...], alpha: float, kind: str, sides: int, paths: int,
                        seed: int) -> tuple[float, ...]:
    fractions = information_fractions(looks)
    spent = np.diff(spending(fractions, alpha, kind), prepend=0.0)
    rng = np.random.default_rng(seed)
    total = np.zeros(paths)  # running sum and sum of squares of the seed means (standard normal under the null)
    squares = np.zeros(paths)
    alive = np.ones(paths, dtype=bool)
    thresholds, before = [], 0
    for k, s in enumerate(looks):
        new = s - before
        block = rng.standard_normal(paths) * math.sqrt(new)  # the new seeds' sum
        within = rng.chisquare(new - 1, paths) if new > 1 else np.zeros(paths)  # their squares about their mean
        total += block
        squares += within + block * block / new
        before = s
        sd = np.sqrt(np.maximum(squares - total * total / s, 0.0) / (s - 1))
        t = total / s / (sd / math.sqrt(s))
        p = 2 * scipy.stats.t.sf(np.abs(t), s - 1) if sides == 2 else scipy.stats.t.sf(t, s - 1)
        if k == 0:  # the first look's p is uniform: its threshold is its spend, exactly
            threshold = float(spent[0])
        else:  # the p below which spent[k] * paths of the paths still running cross
            candidates = np.sort(p[alive])
            allowed = int(round(spent[k] * paths))
            threshold = float(candidates[allowed]) if allowed < candidates.size else 1.0
        thresholds.append(threshold)
        alive &= p >= threshold
    return tuple(thresholds)


def student_boundaries(looks: Sequence[int], alpha: float = 0.05, kind: str = "obrien_fleming", sides: int = 2,
                       paths: int = 1_000_000, seed: int = 0) -> tuple[float, ...]:
    """Per-look nominal p thresholds, like :func:`spending_boundaries`, but for the Student t statistics of the seed
    means with S_k - 1 df at each look (the exact group-sequential t-test; Jennison & Turnbull 1991, "Exact
    calculations for sequential t, chi2 and F tests", *Biometrika* 78: 133-141), here by a seeded Monte-Carlo of
    ``paths`` null paths (deterministic for a ``seed``): at look k the threshold is the p below which a share
    alpha(t_k) - alpha(t_{k-1}) of all paths crosses for the first time. The seed-aware t is this t when the seed term
    dominates Var(mean d) (its df then fall to S - 1), where the normal thresholds compared with the t test's own p
    spend slightly more than alpha (the shared variance estimate makes the looks' p values more dependent than
    normal theory has them); with more df they are the normal thresholds or a little below (conservative). The
    Monte-Carlo SE of the overall level is sqrt(alpha (1 - alpha) / paths) (0.0002 at the default)."""
    looks = tuple(int(s) for s in looks)
    information_fractions(looks)
    if sides not in (1, 2) or paths < 1000:
        raise ValueError(f"need sides 1 or 2 and at least 1,000 paths, got {sides} and {paths}")
    return _student_boundaries(looks, float(alpha), kind, sides, int(paths), int(seed))


@dataclass(frozen=True)
class SequentialDesign:
    """The looks (seed counts) of a sequential study and each look's nominal p thresholds: ``difference`` for the
    two-sided test of no difference, ``equivalence`` for each of the two one-sided tests against the margin
    (:func:`sequential_design`). ``kind`` names where the thresholds came from."""

    looks: tuple[int, ...]
    alpha: float
    kind: str
    difference: tuple[float, ...]
    equivalence: tuple[float, ...]

    def __post_init__(self) -> None:
        information_fractions(self.looks)
        if not len(self.difference) == len(self.equivalence) == len(self.looks):
            raise ValueError(f"need one threshold per look for both tests, got {len(self.difference)} and "
                             f"{len(self.equivalence)} for {len(self.looks)} looks")


def sequential_design(looks: Sequence[int] = LOOKS, alpha: float = 0.05, kind: str = "obrien_fleming",
                      thresholds: str = "student") -> SequentialDesign:
    """The design of :func:`~curricula.statistics.sequential_verdicts.sequential_decision`: the two-sided difference
    thresholds and the one-sided equivalence thresholds, both spending ``alpha`` by ``kind``, for the Student t
    statistics of the seed means (``thresholds="student"``, :func:`student_boundaries`) or normal theory (``"normal"``,
    :func:`spending_boundaries`)."""
    looks = tuple(int(s) for s in looks)
    if thresholds not in THRESHOLDS:
        raise ValueError(f"unknown thresholds {thresholds!r}; expected one of {', '.join(THRESHOLDS)}")
    boundaries = student_boundaries if thresholds == "student" else spending_boundaries
    return SequentialDesign(looks, alpha, f"{kind}, {thresholds}", boundaries(looks, alpha, kind, 2),
                            boundaries(looks, alpha, kind, 1))


__all__ = [
    "KINDS",
    "LOOKS",
    "THRESHOLDS",
    "SequentialDesign",
    "crossing_probabilities",
    "group_sequential_z",
    "information_fractions",
    "sequential_design",
    "spending",
    "spending_boundaries",
    "student_boundaries",
]

"""Adding seeds in rounds without inflating the error rate: group-sequential seed-aware tests (issue 45, item 4).

A study trains a claim's (dataset, ranker) cell with the first look's seeds (e.g. 5), runs the seed-aware test of
:mod:`curricula.statistics.stats`, and trains more seeds (10, 15, 20) only where the verdict is still open. Testing at p < 0.05
after every round would let a true null cross by chance at one of the rounds (the optional-stopping problem;
Armitage, McPherson & Rowe 1969), more often the more looks there are (``docs/sequential.md``). Here each look has
its own nominal threshold, from an alpha-spending function (Lan & DeMets 1983, *Biometrika* 70: 659-663): the share
of alpha that may be spent by the time a fraction t of the information is in, with the boundaries at the looks
solved so that the probability of ever crossing under the null is alpha (Jennison & Turnbull 2000, *Group Sequential
Methods with Applications to Clinical Trials*, ch. 7).

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
- Calibration of the small df (measured by :func:`simulate_sequential`; ``docs/sequential.md``): the seed-aware t at
  look k has few df (at least S_k - 1). Its own p (Student's t with its df; ``calibration="t"``) is compared with the
  look's threshold. Normal-theory thresholds (:func:`spending_boundaries`; the "significance level approach" of
  Jennison & Turnbull 2000, ch. 3) then spend slightly more than alpha where the seed term dominates (the looks share
  their seeds' variance estimate), so the thresholds used are those of the exact group-sequential t-test of the seed
  means with S_k - 1 df (:func:`student_boundaries`; Jennison & Turnbull 1991), which hold alpha there and are
  conservative elsewhere. Comparing |t| with the normal z boundary (``calibration="z"``) ignores the df and is
  liberal.
- :func:`sequential_decision`: the verdict of one cell from the seed-aware results at the looks reached, stopping at
  the first crossing, with :func:`curricula.statistics.stats.verdict`'s words, or ``continue``.
- :func:`simulate_sequential`: whole seeds x queries matrices of the crossed normal model, the exact mean squares of
  the first S_k seeds at each look (:func:`look_mean_squares`, vectorised over draws), the seed-aware test of
  :func:`curricula.statistics.stats.mean_variance` and the sequential rule: rejection and equivalence rates, seeds used and the
  stopping looks.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm
from scipy.stats import t as student_t

from curricula.statistics.stats import INCONCLUSIVE, SeedAwareResult, equivalence_pvalue, mean_variance, verdict

CONTINUE = "continue"
KINDS = ("obrien_fleming", "pocock")
CALIBRATIONS = ("t", "z")
THRESHOLDS = ("student", "normal")
#: the study's rounds of seeds (issue 45)
LOOKS = (5, 10, 15, 20)
_CHUNK_BYTES = 32 << 20  # the simulated seeds x queries matrices per chunk (float64)
_LOWER_SDS = 9.0  # a one-sided boundary's grid reaches this many SDs of W(t) below 0 (the rest is < 1e-18)


# ------------------------------------------------------------------------------------------------- design
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
        spent = 2 * norm.sf(norm.isf(alpha / 2) / np.sqrt(t))  # 2 - 2 Phi(.), without cancellation
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
                return sides * float(norm.sf(c))
            upper = float(mass @ norm.sf((c * root - x) / sd))
            return upper + (float(mass @ norm.cdf((-c * root - x) / sd)) if sides == 2 else 0.0)

        c = boundary(k, exit_at)
        bounds.append(c)
        exits.append(exit_at(c))
        if k == t.size - 1:
            break
        y, w = _simpson(-c * root if sides == 2 else -_LOWER_SDS * root, c * root, step)
        density = norm.pdf(y / root) / root if k == 0 else (norm.pdf((y[:, None] - x[None, :]) / sd) / sd) @ mass
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
        return float(brentq(lambda c: exit_at(c) - spent[k], 0.0, 40.0, xtol=1e-10, rtol=1e-12))

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
    equivalence tests at level alpha). A look rejects when its p is below its threshold (:func:`sequential_decision`).
    E.g. looks (5, 10, 15, 20), alpha 0.05 two-sided, O'Brien-Fleming type: z 3.920, 2.774, 2.298, 2.043, p
    0.00009, 0.0055, 0.0215, 0.0411. (The convention of gsDesign's ``sfLDOF``, each side spending alpha / 2 = 0.025 by
    its own one-sided function, is ``group_sequential_z(..., 0.025, sides=1)``: 4.333, 2.963, 2.359, 2.014.)"""
    z = np.asarray(group_sequential_z(information_fractions(looks), alpha, kind, sides))
    return tuple(float(p) for p in sides * norm.sf(z))


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
        p = 2 * student_t.sf(np.abs(t), s - 1) if sides == 2 else student_t.sf(t, s - 1)
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
    """The design of :func:`sequential_decision`: the two-sided difference thresholds and the one-sided equivalence
    thresholds, both spending ``alpha`` by ``kind``, for the Student t statistics of the seed means
    (``thresholds="student"``, :func:`student_boundaries`) or normal theory (``"normal"``,
    :func:`spending_boundaries`)."""
    looks = tuple(int(s) for s in looks)
    if thresholds not in THRESHOLDS:
        raise ValueError(f"unknown thresholds {thresholds!r}; expected one of {', '.join(THRESHOLDS)}")
    boundaries = student_boundaries if thresholds == "student" else spending_boundaries
    return SequentialDesign(looks, alpha, f"{kind}, {thresholds}", boundaries(looks, alpha, kind, 2),
                            boundaries(looks, alpha, kind, 1))


# ----------------------------------------------------------------------------------------------- decision
@dataclass(frozen=True)
class SequentialDecision:
    """The verdict of one cell after the looks reached (:func:`sequential_decision`): the verdict word (one of
    :data:`curricula.statistics.stats.VERDICTS` or :data:`CONTINUE`), the look (0-based) it rests on (the first crossing, else
    the last look reached), its seeds, its p values and that look's thresholds."""

    verdict: str
    look: int
    seeds: int
    p: float
    p_equivalence: float
    p_boundary: float
    equivalence_boundary: float


def sequential_decision(results_by_look: Sequence[SeedAwareResult], design: SequentialDesign, expect: str,
                        margin: float) -> SequentialDecision:
    """The verdict of a (claim, dataset, ranker) cell from the seed-aware results (:func:`curricula.stats.
    seed_aware_test`) at the looks reached so far, in order, the k-th on the first ``design.looks[k]`` seeds.

    Stopping is by the first crossing: the looks are scanned in order and the first at which the difference test's
    p is below ``design.difference[k]`` or both one-sided equivalence p values against the absolute ``margin`` are
    below ``design.equivalence[k]`` (:func:`curricula.statistics.stats.equivalence_pvalue` is the larger of the two) decides,
    with :func:`curricula.statistics.stats.verdict`'s words on those crossings: ``reproduced`` / ``not reproduced`` by the
    effect's sign against ``expect``, with ``, below the margin`` when the equivalence tests also cross there, else
    ``equivalent``. Without a crossing: ``continue`` while looks remain, ``inconclusive`` at the last one. The p values
    are the seed-aware test's own (Student's t with its df), compared with the normal-theory thresholds as they are
    (``calibration="t"`` of :func:`simulate_sequential`, which keeps the type-I error at alpha)."""
    if not results_by_look:
        raise ValueError("no look reached yet: run the first look's seeds first")
    if len(results_by_look) > len(design.looks):
        raise ValueError(f"{len(results_by_look)} results for a design of {len(design.looks)} looks")
    for k, result in enumerate(results_by_look):
        seeds = result.components.seeds
        if seeds != design.looks[k]:
            raise ValueError(f"look {k + 1} should rest on {design.looks[k]} seeds, its result on {seeds}")
        p, p_eq = result.p, equivalence_pvalue(result, margin)
        crossed = math.isfinite(p) and p < design.difference[k] and result.effect != 0
        equivalent = math.isfinite(p_eq) and p_eq < design.equivalence[k]
        last = k == len(results_by_look) - 1
        if crossed or equivalent or last:
            word = verdict(result.effect, 0.0 if crossed else 1.0, expect, 0.0 if equivalent else 1.0)
            if word == INCONCLUSIVE and k < len(design.looks) - 1:
                word = CONTINUE
            return SequentialDecision(word, k, seeds, p, p_eq, design.difference[k], design.equivalence[k])
    raise AssertionError("unreachable: the last look always returns")


# ------------------------------------------------------------------------------------------- multiplicity
#: how a study's sequential cells share alpha (``study.multiplicity``): ``holm``, the sequential Holm procedure of
#: :func:`holm_design` over every cell's difference and equivalence hypotheses, or ``none`` (each cell at alpha)
SEQUENTIAL_MULTIPLICITIES = ("holm", "none")


#: one look's tests of a cell, as the rounds record them: (effect, difference p, equivalence p)
LookTests = tuple[float, float, float]


def look_tests(results_by_look: Sequence[SeedAwareResult], margin: float) -> list[LookTests]:
    """(effect, p, equivalence p against the absolute ``margin``) of each look's seed-aware result."""
    return [(result.effect, result.p, equivalence_pvalue(result, margin)) for result in results_by_look]


def crossings(tests: Sequence[LookTests], design: SequentialDesign) -> tuple[bool, bool]:
    """(the difference test crossed, the equivalence tests crossed) at any of the looks in ``tests``, each against
    its own threshold in ``design``, as :func:`sequential_decision` compares them."""
    diff = eq = False
    for k, (effect, p, p_eq) in enumerate(tests):
        diff |= math.isfinite(p) and p < design.difference[k] and effect != 0
        eq |= math.isfinite(p_eq) and p_eq < design.equivalence[k]
    return diff, eq


@dataclass(frozen=True)
class HolmDesign:
    """The outcome of :func:`holm_design`: the design at the level every open cell is judged at after the step-down
    (``design.alpha`` = the family's alpha / the cells with a hypothesis not rejected), the family's size in
    hypotheses (two per cell) and the hypotheses it rejected."""

    design: SequentialDesign
    hypotheses: int
    rejected: int


def holm_design(cells: Sequence[Sequence[LookTests]], looks: Sequence[int], alpha: float = 0.05,
                kind: str = "obrien_fleming", thresholds: str = "student") -> HolmDesign:
    """The sequential Holm procedure over a family of cells (Maurer & Bretz 2013, "Multiple testing in group
    sequential trials using graphical approaches", *Statistics in Biopharmaceutical Research* 5: 311-320), with
    Shaffer's count of the hypotheses that can be true together (Shaffer 1986, "Modified sequentially rejective
    multiple test procedures", *JASA* 81: 826-831).

    The family holds two hypotheses per cell, the difference test's (true effect 0) and the equivalence tests' (true
    effect at or beyond the margin), as the findings page's fixed family does. The two cannot both be true, so at most
    one true null per cell: each hypothesis not yet rejected is tested with its own group-sequential thresholds
    (:func:`sequential_design`) at the level alpha / r, r the number of cells that still have a hypothesis not
    rejected. ``cells`` holds each cell's tests at the looks it has reached (:func:`look_tests`; a cell decided at an
    earlier round keeps the looks it had and trains no more seeds). Starting from r = all cells, every hypothesis that
    crosses at any look it has reached (:func:`crossings`) is rejected, r is counted again, and the others are tested
    again at the larger level, on all their looks, until none is added. Every open cell is then judged by
    :func:`sequential_decision` at the final level: a hypothesis rejected on the way crosses there too, since each
    look's threshold grows with the level.

    Why the family-wise error holds at ``alpha`` whatever the dependence between cells: while no true null has been
    rejected, every cell with a true null still counts in r, so r is at least the number T of true nulls, and the first
    true null rejected crossed its thresholds at a level at most alpha / T. The chance that any of the T does so is at
    most T alpha / T (Bonferroni), since each hypothesis's thresholds form a group-sequential test at their level
    whatever the other cells do and a cell that stops early only loses looks. Re-testing earlier looks at the larger
    level is part of Maurer & Bretz's procedure. Simulated at the study's family size by :func:`simulate_family`
    (docs/sequential.md)."""
    if not cells:
        raise ValueError("no cells to adjust over")
    remaining = len(cells)
    while True:
        design = sequential_design(looks, alpha / remaining, kind, thresholds)
        crossed = [crossings(tests, design) for tests in cells]
        left = max(sum(1 for diff, eq in crossed if not (diff and eq)), 1)
        if left == remaining:
            return HolmDesign(design, 2 * len(cells), sum(diff + eq for diff, eq in crossed))
        remaining = left


# --------------------------------------------------------------------------------------------- simulation
def look_mean_squares(d: np.ndarray, looks: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, MS_seed, MS_query, MS_resid), each of shape (looks, draws), of the first ``looks[k]`` seeds of each
    draw of ``d`` (draws x seeds x queries): the two-way ANOVA of :func:`curricula.statistics.stats.seed_query_components`,
    from running sums over seeds (row sums, row sums of squares and column sums), with no loop over draws."""
    information_fractions(looks)
    d = np.asarray(d, dtype=np.float64)
    if d.ndim != 3 or d.shape[1] < looks[-1] or d.shape[2] < 2:
        raise ValueError(f"need draws x seeds x queries with at least {looks[-1]} seeds, got {d.shape}")
    q = d.shape[2]
    rows = np.cumsum(d.sum(axis=2), axis=1)  # running sums over seeds of the seed totals
    rows_sq = np.cumsum((d.sum(axis=2) ** 2), axis=1)
    cells_sq = np.cumsum(np.einsum("dsq,dsq->ds", d, d), axis=1)
    out = np.empty((4, len(looks), d.shape[0]))
    columns = np.zeros((d.shape[0], q))
    done = 0
    for k, s in enumerate(looks):
        columns += d[:, done:s].sum(axis=1)
        done = s
        n = s * q
        correction = rows[:, s - 1] ** 2 / n  # n * grand mean^2
        ss_total = cells_sq[:, s - 1] - correction
        ss_seed = rows_sq[:, s - 1] / q - correction
        ss_query = np.einsum("dq,dq->d", columns, columns) / s - correction
        out[0, k] = rows[:, s - 1] / n
        out[1, k] = ss_seed / (s - 1)
        out[2, k] = ss_query / (q - 1)
        out[3, k] = (ss_total - ss_seed - ss_query) / ((s - 1) * (q - 1))
    return out[0], out[1], out[2], out[3]


@dataclass(frozen=True)
class SequentialSimulation:
    """What :func:`simulate_sequential` measured over ``draws`` simulated cells.

    ``rejection``: the share whose sequential verdict is reproduced / not reproduced (the difference crossed at the
    stopping look; type-I error under a true mean 0, power otherwise); ``equivalence``: the share whose equivalence
    tests crossed at the stopping look (``equivalent`` or ``, below the margin``); ``mean_seeds``: the seeds trained
    on average; ``stops``: the share decided at each look; ``inconclusive``: the share never decided (these use the
    last look's seeds). For comparison on the same draws, single tests at level alpha: ``first_look_rejection`` at
    the first look's seeds alone, ``fixed_rejection`` and ``fixed_equivalence`` at the last look's (a fixed design
    with as many seeds as the most the sequential one trains)."""

    draws: int
    rejection: float
    equivalence: float
    mean_seeds: float
    stops: tuple[float, ...]
    inconclusive: float
    first_look_rejection: float
    fixed_rejection: float
    fixed_equivalence: float

    @property
    def decided(self) -> float:
        """The share decided at some look: ``1 - inconclusive``. Not ``rejection + equivalence``: a draw whose
        difference and equivalence tests both cross at its stopping look (an effect inside the margin, measured
        precisely) is one decided cell."""
        return 1.0 - self.inconclusive


def _look_pvalues(mean: np.ndarray, se: np.ndarray, df: np.ndarray, margin: float | None,
                  calibration: str) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided p of mean = 0 and the equivalence p (the larger one-sided p against +/-margin) from t = mean / se,
    by Student's t with ``df`` (``calibration="t"``) or by the normal (``"z"``, the df ignored)."""
    if calibration == "t":
        sf, cdf = (lambda x: student_t.sf(x, df)), (lambda x: student_t.cdf(x, df))
    elif calibration == "z":
        sf, cdf = norm.sf, norm.cdf
    else:
        raise ValueError(f"unknown calibration {calibration!r}; expected one of {', '.join(CALIBRATIONS)}")
    p = 2 * sf(np.abs(mean) / se)
    if margin is None:
        return p, np.ones_like(p)
    p_eq = np.maximum(sf((mean + margin) / se), cdf((mean - margin) / se))
    return p, p_eq


def simulated_look_pvalues(rng: np.random.Generator, looks: Sequence[int], queries: int, sd_seed: float,
                           sd_query: float, sd_resid: float, mu: float, n: int, *, margin: float | None,
                           calibration: str = "t") -> tuple[np.ndarray, np.ndarray]:
    """The difference test's p and the equivalence p (against the absolute ``margin``; ones when it is None) at
    every look, each of shape (looks, n), for ``n`` cells of the crossed normal model d[s, q] = mu + a_s + b_q + e_sq
    (:func:`simulate_sequential`), drawn as one (n, looks[-1], queries) array: keep n * looks[-1] * queries * 8
    bytes in mind."""
    most = looks[-1]
    d = rng.standard_normal((n, most, queries)) * sd_resid
    d += rng.standard_normal((n, most, 1)) * sd_seed
    d += rng.standard_normal((n, 1, queries)) * sd_query
    d += mu
    mean, ms_seed, ms_query, ms_resid = look_mean_squares(d, looks)
    p = np.empty((len(looks), n))
    p_eq = np.empty((len(looks), n))
    for k, s in enumerate(looks):
        scaled, df = mean_variance(ms_seed[k], ms_query[k], ms_resid[k], s, queries)
        p[k], p_eq[k] = _look_pvalues(mean[k], np.sqrt(scaled / (s * queries)), df, margin, calibration)
    return p, p_eq


def simulate_sequential(rng: np.random.Generator, looks: Sequence[int], queries: int, sd_seed: float, sd_query: float,
                        sd_resid: float, mu: float, draws: int, *, margin: float | None, alpha: float = 0.05,
                        kind: str = "obrien_fleming", calibration: str = "t",
                        design: SequentialDesign | None = None) -> SequentialSimulation:
    """The sequential seed-aware rule on ``draws`` simulated cells of the crossed normal model
    d[s, q] = mu + a_s + b_q + e_sq (SDs ``sd_seed``, ``sd_query``, ``sd_resid``; :func:`curricula.stats.
    seed_query_components`), ``queries`` test queries and up to ``looks[-1]`` seeds.

    Each draw is a whole seeds x queries matrix of the last look's size (drawn in chunks of about 32 MiB); the mean
    squares of its first S_k seeds are exact (:func:`look_mean_squares`), the seed-aware SE and df those of
    :func:`curricula.statistics.stats.mean_variance`, the p values Student's (``calibration="t"``, the rule of
    :func:`sequential_decision`) or the normal's (``"z"``). Each draw stops at its first look where the difference
    test's p is below the ``design``'s difference threshold or the equivalence p against the absolute ``margin`` is
    below its equivalence threshold. ``margin=None`` leaves the equivalence tests out: the difference test alone, the
    worst case for its type-I error (stopping for equivalence only ends draws that could still cross). ``design``
    defaults to :func:`sequential_design` (``looks``, ``alpha``, ``kind``); pass one to simulate other thresholds
    (e.g. p < 0.05 at every look)."""
    design = design or sequential_design(looks, alpha, kind)
    if tuple(int(s) for s in looks) != design.looks:
        raise ValueError(f"the design's looks {design.looks} are not the looks {tuple(looks)}")
    if draws < 1 or queries < 2:
        raise ValueError(f"need draws >= 1 and queries >= 2, got {draws} and {queries}")
    looks = design.looks
    n_looks, most = len(looks), looks[-1]
    chunk = max(1, _CHUNK_BYTES // (8 * most * queries))
    rejected = np.zeros(n_looks + 1)  # per stopping look; the last slot: never stopped
    equivalent = np.zeros(n_looks + 1)
    stopped = np.zeros(n_looks + 1)
    first = fixed = fixed_eq = 0.0
    for start in range(0, draws, chunk):
        n = min(chunk, draws - start)
        p, p_eq = simulated_look_pvalues(rng, looks, queries, sd_seed, sd_query, sd_resid, mu, n, margin=margin,
                                         calibration=calibration)
        crossed = p < np.asarray(design.difference)[:, None]
        crossed_eq = p_eq < np.asarray(design.equivalence)[:, None]
        first += float(np.count_nonzero(p[0] < alpha))
        fixed += float(np.count_nonzero(p[-1] < alpha))
        fixed_eq += float(np.count_nonzero(p_eq[-1] < alpha))
        decided = crossed | crossed_eq
        stop = np.where(decided.any(axis=0), decided.argmax(axis=0), n_looks)  # first crossing, or none
        at = np.minimum(stop, n_looks - 1)
        columns = np.arange(n)
        np.add.at(stopped, stop, 1.0)
        np.add.at(rejected, stop, crossed[at, columns] & (stop < n_looks))
        np.add.at(equivalent, stop, crossed_eq[at, columns] & (stop < n_looks))
    seeds = np.append(np.asarray(looks, dtype=np.float64), most)
    return SequentialSimulation(draws, float(rejected.sum()) / draws, float(equivalent.sum()) / draws,
                                float(stopped @ seeds) / draws, tuple(float(x) / draws for x in stopped[:-1]),
                                float(stopped[-1]) / draws, first / draws, fixed / draws, fixed_eq / draws)



#: how :func:`simulate_family` shares alpha over its cells: ``holm``, the sequential Holm procedure of
#: :func:`holm_design` (alpha / the cells with a hypothesis not rejected); ``holm_hypotheses``, the same counting
#: hypotheses instead (alpha / the hypotheses not rejected, Holm without Shaffer's count); ``bonferroni``, a fixed split
#: (alpha / cells); ``none``, every cell at alpha
FAMILY_RULES = ("holm", "holm_hypotheses", "bonferroni", "none")


@dataclass(frozen=True)
class SimulatedCell:
    """One cell of :func:`simulate_family`: its true mean difference ``mu``, the SDs of the crossed normal model
    (:func:`simulate_sequential`), its test queries and its absolute equivalence margin."""

    mu: float
    sd_seed: float
    sd_query: float
    sd_resid: float
    queries: int
    margin: float


@dataclass(frozen=True)
class FamilySimulation:
    """What :func:`simulate_family` measured over ``draws`` simulated families of cells.

    ``fwer``: the share of families in which some true null was rejected (a difference at a cell whose true effect is
    0, or equivalence at a cell whose true effect lies at or beyond its margin), counting every hypothesis that
    crossed at any look its cell reached under the last round's level, a superset of the verdicts' claims; per cell,
    in order: ``rejection`` / ``equivalence``, the share whose difference / equivalence hypothesis was so rejected,
    ``decided_share`` the share decided (either), ``seeds`` the seeds it trained on average; ``decided``: the mean
    number of cells decided; ``mean_seeds``: the seeds a cell trains on average; ``hypotheses``: two per cell."""

    draws: int
    cells: int
    hypotheses: int
    rule: str
    fwer: float
    rejection: tuple[float, ...]
    equivalence: tuple[float, ...]
    decided_share: tuple[float, ...]
    seeds: tuple[float, ...]
    decided: float
    mean_seeds: float


def _family_thresholds(looks: tuple[int, ...], hypotheses: int, cells: int, alpha: float, kind: str,
                       thresholds: str, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """(difference, equivalence) thresholds of shape (hypotheses + 1, looks): row r holds the design at alpha / r
    for the Holm rules, every row the design at alpha / cells for Bonferroni and at alpha for none (row 0 unused)."""
    levels = {"holm": [alpha / max(r, 1) for r in range(hypotheses + 1)],
              "holm_hypotheses": [alpha / max(r, 1) for r in range(hypotheses + 1)],
              "bonferroni": [alpha / cells] * (hypotheses + 1),
              "none": [alpha] * (hypotheses + 1)}[rule]
    used = set(levels[1:cells + 1]) if rule == "holm" else set(levels[1:])
    designs = {level: sequential_design(looks, level, kind, thresholds) for level in used}
    fill = designs[next(iter(used))]
    return (np.array([designs.get(level, fill).difference for level in levels]),
            np.array([designs.get(level, fill).equivalence for level in levels]))


def simulate_family(rng: np.random.Generator, looks: Sequence[int], cells: Sequence[SimulatedCell], draws: int, *,
                    alpha: float = 0.05, kind: str = "obrien_fleming", rule: str = "holm",
                    thresholds: str = "student") -> FamilySimulation:
    """A study's rounds on ``draws`` simulated families of independent ``cells`` (each its own crossed normal model,
    :class:`SimulatedCell`), judged as ``curricula.study.rounds`` judges a study: after each round the hypotheses are tested
    on every look each cell has reached (a cell decided at an earlier round keeps its looks and trains no more seeds)
    under the family ``rule`` (:data:`FAMILY_RULES`; ``holm`` is :func:`holm_design`, step-down within each round),
    and a cell with a crossing stops. The family-wise error, per-cell rejections and seeds of
    :class:`FamilySimulation`."""
    if rule not in FAMILY_RULES:
        raise ValueError(f"unknown rule {rule!r}; expected one of {', '.join(FAMILY_RULES)}")
    looks = tuple(int(s) for s in looks)
    information_fractions(looks)
    if draws < 1 or not cells:
        raise ValueError(f"need draws >= 1 and at least one cell, got {draws} and {len(cells)}")
    n_looks, n_cells, hypotheses = len(looks), len(cells), 2 * len(cells)
    diff_th, eq_th = _family_thresholds(looks, hypotheses, n_cells, alpha, kind, thresholds, rule)
    p = np.empty((n_looks, draws, n_cells))
    p_eq = np.empty((n_looks, draws, n_cells))
    for c, cell in enumerate(cells):
        chunk = max(1, _CHUNK_BYTES // (8 * looks[-1] * cell.queries))
        for start in range(0, draws, chunk):
            n = min(chunk, draws - start)
            p[:, start:start + n, c], p_eq[:, start:start + n, c] = simulated_look_pvalues(
                rng, looks, cell.queries, cell.sd_seed, cell.sd_query, cell.sd_resid, cell.mu, n, margin=cell.margin)
    stop = np.full((draws, n_cells), n_looks)  # the round a cell was decided at; n_looks: still open
    look_index = np.arange(n_looks)[:, None, None]
    for round_ in range(n_looks):
        reached = look_index <= np.minimum(stop, round_)[None]  # (looks, draws, cells)
        remaining = np.full(draws, {"holm": n_cells, "holm_hypotheses": hypotheses}.get(rule, 1))
        while True:
            cross = (p < diff_th[remaining].T[:, :, None]) & reached
            cross_eq = (p_eq < eq_th[remaining].T[:, :, None]) & reached
            rejected, rejected_eq = cross.any(axis=0), cross_eq.any(axis=0)
            if rule == "holm":
                left = np.maximum((~(rejected & rejected_eq)).sum(axis=1), 1)
            elif rule == "holm_hypotheses":
                left = np.maximum(hypotheses - rejected.sum(axis=1) - rejected_eq.sum(axis=1), 1)
            else:
                break
            if np.array_equal(left, remaining):
                break
            remaining = left
        stop[(stop == n_looks) & (rejected | rejected_eq)] = round_
    mu = np.array([cell.mu for cell in cells])
    null, null_eq = mu == 0, np.abs(mu) >= np.array([cell.margin for cell in cells])
    errors = (rejected & null).any(axis=1) | (rejected_eq & null_eq).any(axis=1)
    seeds = np.append(np.asarray(looks, dtype=np.float64), looks[-1])[stop]
    decided = rejected | rejected_eq
    return FamilySimulation(draws, n_cells, hypotheses, rule, float(errors.mean()),
                            tuple(float(x) for x in rejected.mean(axis=0)),
                            tuple(float(x) for x in rejected_eq.mean(axis=0)),
                            tuple(float(x) for x in decided.mean(axis=0)), tuple(float(x) for x in seeds.mean(axis=0)),
                            float(decided.sum(axis=1).mean()), float(seeds.mean()))


__all__ = ["CALIBRATIONS", "CONTINUE", "crossing_probabilities", "crossings", "FAMILY_RULES", "FamilySimulation",
           "group_sequential_z", "holm_design", "HolmDesign", "information_fractions", "KINDS", "look_mean_squares",
           "look_tests", "LOOKS", "LookTests", "sequential_decision", "sequential_design",
           "SEQUENTIAL_MULTIPLICITIES", "SequentialDecision", "SequentialDesign", "SequentialSimulation",
           "simulate_family", "simulate_sequential", "simulated_look_pvalues", "SimulatedCell", "spending",
           "spending_boundaries", "student_boundaries", "THRESHOLDS"]

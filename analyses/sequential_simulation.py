"""Simulations of the sequential seed-aware rule, one cell at a time and as a family of cells.

Analysis code, not a pipeline stage: the scripts beside it (``analyses/sequential_seeds.py``,
``analyses/sequential_family.py``, ``analyses/study_projection.py``) import it as ``sequential_simulation``, and no
module of ``curricula`` does; ``tests/test_sequential.py`` tests it.

- :func:`simulate_sequential`: whole seeds x queries matrices of the crossed normal model, the exact mean squares of
  the first S_k seeds at each look (:func:`look_mean_squares`, vectorised over draws), the seed-aware test of
  :func:`curricula.statistics.seed_aware.mean_variance` and the sequential rule of
  :mod:`curricula.statistics.sequential_verdicts`: rejection and equivalence rates, seeds used and the stopping
  looks (:class:`SequentialSimulation`).
- :func:`simulate_family`: a study's rounds on families of independent cells (:class:`SimulatedCell`) under a
  family rule of :data:`FAMILY_RULES` (``holm`` is :func:`curricula.statistics.sequential_verdicts.holm_design`):
  the family-wise error, per-cell rejections and seeds (:class:`FamilySimulation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from curricula.statistics.group_sequential import SequentialDesign, information_fractions, sequential_design
from curricula.statistics.seed_aware import mean_variance

CALIBRATIONS = ("t", "z")
_CHUNK_BYTES = 32 << 20  # the simulated seeds x queries matrices per chunk (float64)
#: how :func:`simulate_family` shares alpha over its cells: ``holm``, the sequential Holm procedure of
#: :func:`~curricula.statistics.sequential_verdicts.holm_design` (alpha / the cells with a hypothesis not rejected);
#: ``holm_hypotheses``, the same counting hypotheses instead (alpha / the hypotheses not rejected, Holm without
#: Shaffer's count); ``bonferroni``, a fixed split (alpha / cells); ``none``, every cell at alpha
FAMILY_RULES = ("holm", "holm_hypotheses", "bonferroni", "none")


def look_mean_squares(d: np.ndarray, looks: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mean, MS_seed, MS_query, MS_resid), each of shape (looks, draws), of the first ``looks[k]`` seeds of each
    draw of ``d`` (draws x seeds x queries): the two-way ANOVA of
    :func:`curricula.statistics.seed_aware.seed_query_components`, from running sums over seeds (row sums, row sums
    of squares and column sums), with no loop over draws."""
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
    d[s, q] = mu + a_s + b_q + e_sq (SDs ``sd_seed``, ``sd_query``, ``sd_resid``; :func:`curricula.statistics.
    seed_aware.seed_query_components`), ``queries`` test queries and up to ``looks[-1]`` seeds.

    Each draw is a whole seeds x queries matrix of the last look's size (drawn in chunks of about 32 MiB); the mean
    squares of its first S_k seeds are exact (:func:`look_mean_squares`), the seed-aware SE and df those of
    :func:`curricula.statistics.seed_aware.mean_variance`, the p values Student's (``calibration="t"``, the rule of
    :func:`~curricula.statistics.sequential_verdicts.sequential_decision`) or the normal's (``"z"``). Each draw stops at
    its first look where the difference test's p is below the ``design``'s difference threshold or the equivalence p
    against the absolute ``margin`` is below its equivalence threshold. ``margin=None`` leaves the equivalence tests
    out: the difference test alone, the worst case for its type-I error (stopping for equivalence only ends draws that
    could still cross). ``design`` defaults to :func:`sequential_design` (``looks``, ``alpha``, ``kind``); pass one to
    simulate other thresholds (e.g. p < 0.05 at every look)."""
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
    :class:`SimulatedCell`), judged as ``curricula.study.rounds`` judges a study: after each round the hypotheses are
    tested on every look each cell has reached (a cell decided at an earlier round keeps its looks and trains no more
    seeds) under the family ``rule`` (:data:`FAMILY_RULES`; ``holm`` is
    :func:`curricula.statistics.sequential_verdicts.holm_design`, step-down within each round), and a cell with a
    crossing stops. The family-wise error, per-cell rejections and seeds of
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


__all__ = [
    "CALIBRATIONS",
    "FAMILY_RULES",
    "FamilySimulation",
    "SequentialSimulation",
    "SimulatedCell",
    "look_mean_squares",
    "simulate_family",
    "simulate_sequential",
    "simulated_look_pvalues",
]

"""Verdicts of a sequential study: one cell's at the looks it reached, and the family's by the sequential Holm
procedure.

- :func:`sequential_decision`: the verdict of one cell from the seed-aware results at the looks reached, stopping at
  the first crossing of a :class:`~curricula.statistics.group_sequential.SequentialDesign`'s thresholds, with
  :func:`curricula.statistics.verdicts.verdict`'s words, or ``continue``.
- :func:`holm_design`: the sequential Holm procedure over a family of cells, two hypotheses each (Maurer & Bretz
  2013, *Statistics in Biopharmaceutical Research* 5: 311-320), with Shaffer's count of the hypotheses that can be
  true together (Shaffer 1986, *JASA* 81: 826-831); :func:`look_tests` and :func:`crossings` are its inputs and test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from curricula.statistics.group_sequential import SequentialDesign, sequential_design
from curricula.statistics.multiplicity import SEQUENTIAL_MULTIPLICITIES
from curricula.statistics.seed_aware import SeedAwareResult
from curricula.statistics.verdicts import INCONCLUSIVE, equivalence_pvalue, verdict

CONTINUE = "continue"


# ----------------------------------------------------------------------------------------------- decision
@dataclass(frozen=True)
class SequentialDecision:
    """The verdict of one cell after the looks reached (:func:`sequential_decision`): the verdict word (one of
    :data:`curricula.statistics.verdicts.VERDICTS` or :data:`CONTINUE`), the look (0-based) it rests on (the first
    crossing, else the last look reached), its seeds, its p values and that look's thresholds."""

    verdict: str
    look: int
    seeds: int
    p: float
    p_equivalence: float
    p_boundary: float
    equivalence_boundary: float


def sequential_decision(results_by_look: Sequence[SeedAwareResult], design: SequentialDesign, expect: str,
                        margin: float) -> SequentialDecision:
    """The verdict of a (claim, dataset, ranker) cell from the seed-aware results (:func:`curricula.statistics.
    seed_aware.seed_aware_test`) at the looks reached so far, in order, the k-th on the first ``design.looks[k]`` seeds.

    Stopping is by the first crossing: the looks are scanned in order and the first at which the difference test's
    p is below ``design.difference[k]`` or both one-sided equivalence p values against the absolute ``margin`` are
    below ``design.equivalence[k]`` (:func:`curricula.statistics.verdicts.equivalence_pvalue` is the larger of the
    two) decides, with :func:`curricula.statistics.verdicts.verdict`'s words on those crossings: ``reproduced`` /
    ``not reproduced`` by the effect's sign against ``expect``, with ``, below the margin`` when the equivalence tests
    also cross there, else ``equivalent``. Without a crossing: ``continue`` while looks remain, ``inconclusive`` at
    the last one. The p values are the seed-aware test's own (Student's t with its df), compared with the
    normal-theory thresholds as they are (``calibration="t"`` of
    :func:`analyses.sequential_simulation.simulate_sequential`, which keeps the type-I error at alpha)."""
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
    level is part of Maurer & Bretz's procedure. Simulated at the study's family size by
    :func:`~analyses.sequential_simulation.simulate_family` (docs/sequential.md)."""
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


__all__ = [
    "CONTINUE",
    "SEQUENTIAL_MULTIPLICITIES",
    "HolmDesign",
    "LookTests",
    "SequentialDecision",
    "crossings",
    "holm_design",
    "look_tests",
    "sequential_decision",
]

"""Adding seeds in rounds (issue 45, item 4): the spending boundaries against published tables and a brute-force
Monte-Carlo, the sequential seed-aware rule's type-I error, equivalence size and power across the looks (5, 10, 15, 20)
by seeded whole-matrix simulations (analyses/sequential_simulation.py), and the verdict words of
:func:`curricula.statistics.sequential_verdicts.sequential_decision`."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from curricula.statistics.group_sequential import (
    LOOKS,
    SequentialDesign,
    crossing_probabilities,
    group_sequential_z,
    information_fractions,
    sequential_design,
    spending,
    spending_boundaries,
    student_boundaries,
)
from curricula.statistics.seed_aware import SeedAwareResult, SeedQueryComponents, seed_query_components
from curricula.statistics.sequential_verdicts import CONTINUE, holm_design, sequential_decision
from curricula.statistics.verdicts import BELOW_MARGIN, EQUIVALENT, INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from tests.conftest import script_module

# the simulations are analysis code beside their scripts (not in the package), imported by name as those scripts do
script_module("analyses/sequential_simulation")
from sequential_simulation import (  # noqa: E402
    SimulatedCell,
    look_mean_squares,
    simulate_family,
    simulate_sequential,
)

DRAWS = 4000
BOUND = 0.05 + 3 * math.sqrt(0.05 * 0.95 / DRAWS)  # 5% + 3 Monte-Carlo SE: 6.03%
QUERIES, SD_QUERY, SD_RESID = 200, 0.05, 0.25
NAIVE = SequentialDesign(LOOKS, 0.05, "p < 0.05 at every look", (0.05,) * 4, (0.05,) * 4)


def _simulate(sd_seed: float, mu: float = 0.0, **kwargs):
    kwargs.setdefault("margin", None)
    return simulate_sequential(np.random.default_rng(round(1e4 * sd_seed) + 1), LOOKS, QUERIES, sd_seed, SD_QUERY,
                               SD_RESID, mu, DRAWS, **kwargs)


# ------------------------------------------------------------------------------------------------ boundaries
def test_information_fractions_and_spending():
    assert information_fractions(LOOKS) == (0.25, 0.5, 0.75, 1.0)
    for kind in ("obrien_fleming", "pocock"):
        spent = spending((0.25, 0.5, 0.75, 1.0), 0.05, kind)
        assert spent[-1] == pytest.approx(0.05, rel=1e-12) and all(np.diff(spent) > 0)
    assert spending((0.25,), 0.05)[0] == pytest.approx(2 * stats.norm.sf(1.959964 / 0.5), rel=1e-5)
    assert spending((0.25,), 0.05, "pocock")[0] == pytest.approx(0.05 * math.log(1 + (math.e - 1) / 4))
    for bad in [(), (1, 5), (5, 5), (10, 5)]:
        with pytest.raises(ValueError):
            information_fractions(bad)
    with pytest.raises(ValueError):
        spending((0.5, 1.0), 0.05, "haybittle")


def test_the_recursion_reproduces_the_published_boundaries():
    """The recursive integration against tables computed elsewhere: the classical constant-shape boundaries at 4 equal
    looks and alpha 0.05 two-sided (Jennison & Turnbull 2000, tables 2.1 and 2.3: Pocock C = 2.361, O'Brien & Fleming
    C = 2.024, i.e. z 4.048, 2.862, 2.337, 2.024), and the Lan-DeMets spending boundaries as gsDesign's ``sfLDOF``
    (one side at 0.025: 4.333, 2.963, 2.359, 2.014) and the spending-function literature (5 looks: O'Brien-Fleming
    type 4.88, 3.36, 2.68, 2.29, 2.03; Pocock type at 0.05 two-sided 2.44, 2.43, 2.41, 2.40, 2.39) print them."""
    t4 = information_fractions(LOOKS)
    assert sum(crossing_probabilities(t4, [2.024 / math.sqrt(t) for t in t4])) == pytest.approx(0.05, abs=2e-4)
    assert sum(crossing_probabilities(t4, [2.361] * 4)) == pytest.approx(0.05, abs=2e-4)
    np.testing.assert_allclose(group_sequential_z(t4, 0.025, "obrien_fleming", sides=1),
                               [4.333, 2.963, 2.359, 2.014], atol=1e-3)
    t5 = (0.2, 0.4, 0.6, 0.8, 1.0)
    np.testing.assert_allclose(group_sequential_z(t5, 0.025, "obrien_fleming", sides=1),
                               [4.88, 3.36, 2.68, 2.29, 2.03], atol=6e-3)
    np.testing.assert_allclose(group_sequential_z(t5, 0.05, "pocock"), [2.44, 2.43, 2.41, 2.40, 2.39], atol=6e-3)
    # this module's O'Brien-Fleming type spends alpha 0.05 over both sides: the first look is z_0.975 / sqrt(0.25)
    z = group_sequential_z(t4, 0.05)
    np.testing.assert_allclose(z, [3.920, 2.774, 2.298, 2.043], atol=1e-3)
    assert spending_boundaries(LOOKS) == pytest.approx(tuple(2 * stats.norm.sf(z)), rel=1e-9)


@pytest.mark.parametrize("kind", ["obrien_fleming", "pocock"])
@pytest.mark.parametrize("sides", [2, 1])
def test_the_boundaries_spend_alpha_on_brute_force_brownian_paths(kind, sides):
    """An independent reference: 400,000 seeded Brownian paths at the looks' information; the share first crossing
    by each look matches the spending function within 4 Monte-Carlo SE and ends at alpha."""
    paths = 400_000
    t = np.array(information_fractions(LOOKS))
    rng = np.random.default_rng(45)
    w = np.cumsum(rng.standard_normal((paths, t.size)) * np.sqrt(np.diff(t, prepend=0.0)), axis=1)
    z = w / np.sqrt(t)
    bounds = np.array(group_sequential_z(t, 0.05, kind, sides))
    crossed = (np.abs(z) if sides == 2 else z) >= bounds
    by_look = np.cumsum(np.bincount(np.where(crossed.any(1), crossed.argmax(1), t.size), minlength=t.size + 1))
    observed = by_look[:-1] / paths
    expected = np.array(spending(t, 0.05, kind))
    assert np.all(np.abs(observed - expected) <= 4 * np.sqrt(expected * (1 - expected) / paths) + 1e-6), (
        observed, expected)


@pytest.mark.slow  # a simulation of the error rate
def test_student_thresholds_hold_alpha_on_independent_t_paths():
    """The exact-t thresholds (seeded Monte-Carlo, seed 0) on fresh null paths of the t over seed means (seed 7):
    the sequential t-test crosses in 5% of them, where the normal-theory thresholds cross more often; and the
    thresholds are deterministic and not above the normal ones after the first look."""
    paths = 200_000
    student = student_boundaries(LOOKS, 0.05, "pocock")
    normal = spending_boundaries(LOOKS, 0.05, "pocock")
    assert student == student_boundaries(LOOKS, 0.05, "pocock")
    assert student[0] == pytest.approx(normal[0], rel=1e-3) and all(s <= n for s, n in zip(student[1:], normal[1:]))
    means = np.random.default_rng(7).standard_normal((paths, LOOKS[-1]))
    crossed = {"student": np.zeros(paths, bool), "normal": np.zeros(paths, bool)}
    for k, s in enumerate(LOOKS):
        p = stats.ttest_1samp(means[:, :s], 0.0, axis=1).pvalue
        crossed["student"] |= p < student[k]
        crossed["normal"] |= p < normal[k]
    se = math.sqrt(0.05 * 0.95 / paths)
    assert abs(crossed["student"].mean() - 0.05) <= 3 * se
    assert crossed["normal"].mean() > 0.05 + 3 * se  # the df matter: normal theory spends 5.36% here


def test_look_mean_squares_are_the_anova_of_the_first_seeds():
    rng = np.random.default_rng(3)
    d = rng.normal(size=(3, 12, 40)) + 0.3 * rng.normal(size=(3, 12, 1)) + 0.1 * rng.normal(size=(3, 1, 40))
    looks = (2, 5, 12)
    mean, ms_seed, ms_query, ms_resid = look_mean_squares(d, looks)
    for k, s in enumerate(looks):
        for i in range(3):
            c = seed_query_components(d[i, :s])
            np.testing.assert_allclose([mean[k, i], ms_seed[k, i], ms_query[k, i], ms_resid[k, i]],
                                       [c.mean, c.ms_seed, c.ms_query, c.ms_resid], rtol=1e-10, atol=1e-13)


# ------------------------------------------------------------------------------------------ simulated error rates
@pytest.mark.slow  # a simulation of the error rate
@pytest.mark.parametrize("sd_seed", [0.0, 0.01, 0.03])
def test_type_one_error_across_the_rounds_holds_where_testing_every_round_at_005_does_not(sd_seed):
    """Looks at 5, 10, 15 and 20 seeds, 200 queries, query SD 0.05, residual SD 0.25, a true difference of 0 and no
    equivalence stopping (the worst case for the difference test): both spending functions keep the chance of ever
    calling a difference at 5% + 3 SE. Testing at p < 0.05 at every look exceeds it where seeds vary (at seed SD 0
    the looks share their queries and are nearly the same test), and comparing |t| with the normal z boundaries,
    the df ignored, exceeds it where the seed term dominates."""
    for kind in ("obrien_fleming", "pocock"):
        result = _simulate(sd_seed, kind=kind)
        assert result.rejection <= BOUND, (kind, result)
        assert result.mean_seeds > 19  # under the null almost every cell runs all rounds
    naive = _simulate(sd_seed, design=NAIVE).rejection
    if sd_seed > 0:
        assert naive > BOUND + 0.01, naive  # 8.3% at seed SD 0.01, 11.1% at 0.03
    if sd_seed == 0.03:
        assert _simulate(sd_seed, kind="pocock", calibration="z").rejection > BOUND + 0.02  # 9.0%


@pytest.mark.slow  # a simulation of the error rate
@pytest.mark.parametrize("margin", [0.01, 0.02])
def test_sequential_equivalence_holds_its_size_at_the_margin(margin):
    """The true difference exactly at the margin (2% and 4% of 0.5 AP), seed SD 0.01: the two one-sided tests with
    their own spending call it equivalent (alone or as ', below the margin') at most 5% + 3 SE of the time, across
    the looks; and with the wider margin they have power at a true 0 (0.90 here)."""
    assert _simulate(0.01, mu=margin, margin=margin).equivalence <= BOUND
    assert _simulate(0.01, mu=-margin, margin=margin).equivalence <= BOUND
    if margin == 0.02:
        inside = _simulate(0.01, mu=0.0, margin=margin)
        assert inside.equivalence > 0.8 and inside.mean_seeds < 18  # equivalence also stops rounds early


@pytest.mark.slow  # a simulation of the power
def test_power_at_a_true_effect_beats_the_first_look_and_saves_seeds():
    """A true 3% effect (0.015 AP of 0.5) at seed SD 0.02, margin 0.01: the sequential rule finds it in 52% of cells,
    against 13% for the 5 seeds of the first look alone and 55% for a fixed design of 20 seeds on the same draws,
    with fewer seeds on average (18.1)."""
    result = _simulate(0.02, mu=0.015, margin=0.01)
    assert result.rejection > result.first_look_rejection + 0.3
    assert result.fixed_rejection - 0.05 < result.rejection <= result.fixed_rejection
    assert result.mean_seeds < 18.5 and sum(result.stops) + result.inconclusive == pytest.approx(1.0)


@pytest.mark.slow  # a simulation of the family's decisions
def test_a_cell_whose_difference_and_equivalence_both_cross_counts_once_as_decided():
    """An effect inside the margin, measured precisely (0.005 AP against a 0.01 margin, 2,000 test queries): most
    draws cross the difference test and the equivalence tests at the same look. ``decided`` counts each draw once
    (the looks' stopping shares), where ``rejection + equivalence`` would count 1.9 decided cells of one."""
    result = simulate_sequential(np.random.default_rng(1), LOOKS, 2000, 0.002, 0.0, 0.1, 0.005, DRAWS, margin=0.01)
    assert result.rejection + result.equivalence > 1.5
    assert result.decided == pytest.approx(sum(result.stops)) and result.decided == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------- multiplicity
def test_holm_steps_down_across_cells_and_re_tests_earlier_looks():
    """Three cells on looks (5, 10), Pocock spending, normal thresholds. A's difference and equivalence both cross at
    any level (a precise effect below the margin), so A holds no true null and the level of the others rises from
    alpha / 3 to alpha / 2 (Shaffer's count: one true null at most per cell); B's p at its first look lies between
    the thresholds at those levels, so it crosses then, on that earlier look; C crosses nothing. A cell with only its
    difference rejected (A') may still hold a true equivalence null and frees nothing."""
    looks, alpha = (5, 10), 0.05
    at = {r: sequential_design(looks, alpha / r, "pocock", "normal") for r in (2, 3)}
    between = (at[3].difference[0] + at[2].difference[0]) / 2
    a = [(0.005, 1e-12, 1e-12), (0.005, 1e-12, 1e-12)]
    a_only = [(0.1, 1e-12, 1.0), (0.1, 1e-12, 1.0)]
    b = [(0.02, between, 0.9), (0.02, 0.5, 0.9)]
    c = [(0.0, 0.8, 0.4), (0.0, 0.9, 0.3)]
    holm = holm_design([a, b, c], looks, alpha, "pocock", "normal")
    assert holm.hypotheses == 6 and holm.rejected == 3
    assert holm.design.alpha == pytest.approx(alpha / 2) and holm.design.difference == at[2].difference
    held = holm_design([a_only, b, c], looks, alpha, "pocock", "normal")
    assert held.rejected == 1 and held.design.alpha == pytest.approx(alpha / 3)  # B stays open
    decision = sequential_decision([_result(5, 0.02, 0.02 / stats.t.isf(between / 2, 4))], holm.design, "better",
                                   0.001)
    assert decision.verdict == REPRODUCED and decision.look == 0
    with pytest.raises(ValueError, match="no cells"):
        holm_design([], looks)


FAMILY_DRAWS = 2000
FAMILY_BOUND = 0.05 + 3 * math.sqrt(0.05 * 0.95 / FAMILY_DRAWS)  # 6.46%


def _family(cells, rule):
    return simulate_family(np.random.default_rng(7), LOOKS, cells, FAMILY_DRAWS, rule=rule, thresholds="normal")


@pytest.mark.slow  # a simulation of the family-wise error
def test_holm_over_the_rounds_holds_the_family_wise_error_where_no_adjustment_does_not():
    """Holm's worst case: eight cells, four true nulls (seed SD 0.02, 100 queries, a margin too narrow to stop them
    for equivalence, so they run every round) and four with a 0.04 effect measured so precisely inside a 0.08 margin
    that both their hypotheses are rejected: they hold no true null and pass all their alpha on, so the four nulls
    are tested at alpha / 4. The chance that any calls a difference stays within 5% + 3 SE over the four rounds (4.7%
    here), as it does for Holm over hypotheses and a fixed Bonferroni split (2.9%); judging each cell at alpha alone
    calls one in about a sixth of the families (17.9%)."""
    cells = ([SimulatedCell(0.0, 0.02, SD_QUERY, SD_RESID, 100, 0.002)] * 4
             + [SimulatedCell(0.04, 0.002, SD_QUERY, 0.1, 400, 0.08)] * 4)
    holm = _family(cells, "holm")
    assert holm.fwer <= FAMILY_BOUND, holm
    assert min(holm.equivalence[4:]) > 0.9 and min(holm.rejection[4:]) > 0.9  # their alpha moved on
    for rule in ("holm_hypotheses", "bonferroni"):
        other = _family(cells, rule)
        assert other.fwer <= holm.fwer, (rule, other)  # Shaffer's count spends more of alpha, not more than it
    assert _family(cells, "none").fwer > 0.12


# ------------------------------------------------------------------------------------------------- decisions
def _result(seeds: int, effect: float, se: float) -> SeedAwareResult:
    """A seed-aware result with t = effect / se on seeds - 1 df (the components are only carried along)."""
    df = seeds - 1.0
    t = effect / se
    half = stats.t.ppf(0.975, df) * se
    components = SeedQueryComponents(seeds, 200, effect, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    return SeedAwareResult(effect, se, df, t, float(2 * stats.t.sf(abs(t), df)), effect - half, effect + half,
                           components)


def test_the_decision_words_on_hand_made_results():
    design = sequential_design()  # O'Brien-Fleming type, p thresholds 0.0001, 0.0054, 0.0207, 0.0390
    margin = 0.01

    def decide(*looks: tuple[float, float], expect: str = "better"):
        results = [_result(LOOKS[k], effect, se) for k, (effect, se) in enumerate(looks)]
        return sequential_decision(results, design, expect, margin)

    assert decide((0.05, 0.004)).verdict == CONTINUE  # t 12.5 on 4 df: p 0.00024, above the first look's 0.0001
    first = decide((0.05, 0.002))  # t 25 on 4 df, p 1.5e-5 < 0.0001: decided at the first look
    assert (first.verdict, first.look, first.seeds) == (REPRODUCED, 0, 5)
    assert decide((-0.05, 0.002)).verdict == NOT_REPRODUCED
    assert decide((-0.05, 0.002), expect="worse").verdict == REPRODUCED
    assert decide((0.003, 0.0001)).verdict == REPRODUCED + BELOW_MARGIN  # real, and within +/-0.01
    assert decide((0.02, 0.01)).verdict == CONTINUE  # p 0.12 at 5 seeds
    # p 0.01 at 5 and 10 seeds stays open (thresholds 0.0001 and 0.0054); at 15 seeds it crosses (0.0207)
    p01 = [(stats.t.isf(0.005, s - 1) * 0.004, 0.004) for s in LOOKS]
    assert decide(*p01[:2]).verdict == CONTINUE
    assert (decide(*p01[:3]).verdict, decide(*p01[:3]).look) == (REPRODUCED, 2)
    # stopping is by the first crossing: what a later look says does not undo it
    assert decide(*p01[:3], (0.0, 0.004)).look == 2
    # p 0.045 at every look: a fixed 20-seed test would call it, the sequential one spends less at the last look
    p045 = [(stats.t.isf(0.0225, s - 1) * 0.004, 0.004) for s in LOOKS]
    assert decide(*p045[:3]).verdict == CONTINUE and decide(*p045).verdict == INCONCLUSIVE
    # equivalence: a null effect measured precisely; both one-sided p below the look's one-sided threshold
    assert decide((0.0, 0.004), (0.0, 0.002)).verdict == EQUIVALENT
    assert decide((0.0, 0.004)).verdict == CONTINUE  # at 5 seeds the one-sided threshold is 0.0001
    with pytest.raises(ValueError):
        sequential_decision([], design, "better", margin)
    with pytest.raises(ValueError):
        sequential_decision([_result(6, 0.01, 0.01)], design, "better", margin)  # not the first look's 5 seeds
    with pytest.raises(ValueError):  # more results than looks
        sequential_decision([_result(s, 0.0, 0.01) for s in LOOKS + (25,)], design, "better", margin)

"""The verdict of a claim: equivalence by two one-sided tests and the verdict words.

:func:`equivalence_pvalue` is the two one-sided tests (Schuirmann 1987) of |mean d| >= margin with a seed-aware
result's standard error and df, and :func:`equivalence_reachable` whether a design can show equivalence at all.
:func:`verdict` turns the difference test's p and the equivalence p into one of :data:`VERDICTS`, and
:func:`verdict_pvalues` names the p values a verdict rests on (those the multiplicity adjustment of
:mod:`curricula.statistics.multiplicity` must leave below alpha).
"""

from __future__ import annotations

import math

import scipy  # its stats module loads at first use (scipy's lazy submodules), not when a plan imports this one

from curricula.statistics.seed_aware import SeedAwareResult

REPRODUCED, NOT_REPRODUCED, EQUIVALENT, INCONCLUSIVE = "reproduced", "not reproduced", "equivalent", "inconclusive"
BELOW_MARGIN = ", below the margin"
#: every verdict word of :func:`verdict`, decided ones first
VERDICTS = (REPRODUCED, REPRODUCED + BELOW_MARGIN, NOT_REPRODUCED, NOT_REPRODUCED + BELOW_MARGIN, EQUIVALENT,
            INCONCLUSIVE)


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
    lower = float(scipy.stats.t.sf((result.effect + margin) / result.se, result.df))
    upper = float(scipy.stats.t.cdf((result.effect - margin) / result.se, result.df))
    return max(lower, upper)


def equivalence_reachable(result: SeedAwareResult, margin: float, alpha: float = 0.05) -> bool:
    """Whether the design of ``result`` can show equivalence at all: two one-sided tests at level ``alpha`` reject
    only when |d..| + t_{1-alpha, df} SE < margin, so with t_{1-alpha, df} SE >= margin no effect, not even 0, is
    judged equivalent and "inconclusive" is certain. False without a standard error."""
    if not (math.isfinite(result.se) and margin > 0):
        return False
    return float(scipy.stats.t.ppf(1 - alpha, result.df)) * result.se < margin


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

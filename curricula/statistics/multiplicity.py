"""Multiplicity: adjusted p values of one family of hypotheses (:data:`MULTIPLICITY`).

:func:`holm` is the Holm-Bonferroni step-down with Shaffer's count of the nulls that can be true together (Shaffer
1986, *JASA* 81: 826-831, method 1); :func:`adjust` dispatches to it, to Benjamini-Hochberg (scipy
``false_discovery_control``) or to none, leaving nan values out of the family.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

MULTIPLICITY = ("holm", "bh", "none")
#: how a study's sequential cells share alpha (``study.multiplicity``): ``holm``, the sequential Holm procedure of
#: :func:`curricula.statistics.sequential_verdicts.holm_design` over every cell's difference and equivalence
#: hypotheses, or ``none`` (each cell at alpha); here, beside :data:`MULTIPLICITY`, so that the start-up checks read
#: it without importing scipy
SEQUENTIAL_MULTIPLICITIES = ("holm", "none")


def holm(pvalues: Sequence[float] | np.ndarray, groups: Sequence[Any] | None = None) -> list[float]:
    """Holm-Bonferroni adjusted p values (step-down, monotone, capped at 1), in the input order.

    ``groups`` (one label per p value) declares hypotheses that cannot be true together: at most one null per group
    is true, as a cell's difference null (effect 0) and its equivalence null (effect at or beyond the margin). The
    multiplier of the k-th smallest p is then the number of groups among the hypotheses ranked k and after, not their
    number (Shaffer 1986, "Modified sequentially rejective multiple test procedures", *JASA* 81: 826-831, method 1:
    the most nulls that can be true given the k - 1 smaller ones are false). Without ``groups`` every hypothesis is
    its own group: Holm's procedure."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    m = len(p)
    labels = list(range(m)) if groups is None else list(groups)
    if len(labels) != m:
        raise ValueError(f"{len(labels)} group labels for {m} p values")
    remaining: dict[Any, int] = {}
    for label in labels:
        remaining[label] = remaining.get(label, 0) + 1
    adjusted = np.empty(m)
    running = 0.0
    for i in order:
        running = max(running, min(1.0, len(remaining) * p[i]))
        adjusted[i] = running
        remaining[labels[i]] -= 1
        if not remaining[labels[i]]:
            del remaining[labels[i]]
    return adjusted.tolist()


def adjust(pvalues: Sequence[float], method: str, groups: Sequence[Any] | None = None) -> list[float]:
    """Multiplicity-adjusted p values of one family, in the input order: ``holm`` (:func:`holm`, family-wise error;
    ``groups`` labels hypotheses of which at most one null is true, Shaffer's count), ``bh`` (Benjamini-Hochberg
    step-up, false discovery rate; scipy ``false_discovery_control``; ``groups`` unused) or ``none``. nan values stay
    nan and are left out of the family."""
    if method not in MULTIPLICITY:
        raise ValueError(f"unknown multiplicity adjustment {method!r}; expected one of {', '.join(MULTIPLICITY)}")
    p = np.asarray(pvalues, dtype=np.float64)
    out = p.copy()
    ok = np.isfinite(p)
    if method == "none" or not ok.any():
        return out.tolist()
    if groups is not None and len(groups) != len(p):
        raise ValueError(f"{len(groups)} group labels for {len(p)} p values")
    kept = None if groups is None else [label for label, finite in zip(groups, ok) if finite]
    if method == "holm":
        out[ok] = holm(p[ok], kept)
    else:
        from scipy.stats import false_discovery_control  # here: the Snakefile's start-up checks import this module

        out[ok] = false_discovery_control(p[ok], method="bh")
    return out.tolist()

"""Curriculum sample weights of MacAvaney et al. (2020), "Training Curricula for Open Domain Answer Re-Ranking".

Eq. 3 weights a training sample ``t`` at training iteration ``i`` (0-based) by

    W(t, i) = D(t) + (i / m) * (1 - D(t))   if i < m,    1   if i >= m,

where ``D(t)`` in [0, 1] is the sample's *ease* (1 = easy, 0 = difficult) and ``m`` is the iteration from which all
samples weigh the same; the loss of the sample is multiplied by ``W`` (eq. 4). §4.4 also tests ``m = inf``
(``W = D`` throughout) and §4.5 an anti-curriculum that replaces ``D`` with ``1 - D``.

Units: an *iteration* is 32 batches of 16 samples (§4), a *step* here is one batch (one optimiser update),
0-based, so ``iteration = step // 32`` (:func:`iteration_of`). The project's difficulty tables store difficulty
with 1 = hardest; convert with :func:`ease_from_difficulty` before weighting. Everything is numpy; callers that
need torch tensors convert the result.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["curriculum_weight", "ease_from_difficulty", "iteration_of"]


def _unit_interval(values: Any, what: str) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if np.any(np.isnan(a)) or np.any(a < 0.0) or np.any(a > 1.0):
        raise ValueError(f"{what} must be in [0, 1], got {values!r}")
    return a


def _m_value(m: float | str) -> float:
    if isinstance(m, str):
        if m.strip().lower() != "inf":
            raise ValueError(f"m must be a number > 0 or 'inf', got {m!r}")
        return math.inf
    if isinstance(m, bool) or not isinstance(m, numbers.Real) or math.isnan(m) or m <= 0:
        raise ValueError(f"m must be a number > 0 or 'inf', got {m!r}")
    return float(m)


def ease_from_difficulty(difficulty: Any) -> np.ndarray:
    """MacAvaney's ``D`` (1 = easy) from a difficulty in [0, 1] with 1 = hardest: ``1 - difficulty``, elementwise.

    Returns a float64 array of the input's shape; raises ``ValueError`` for values outside [0, 1] or NaN.
    """
    return 1.0 - _unit_interval(difficulty, "difficulty")


def curriculum_weight(ease: Any, iteration: Any, m: float | str, anti: bool = False) -> np.ndarray:
    """MacAvaney et al. (2020) eq. 3: ``W = D + (i / m)(1 - D)`` for ``i < m``, else 1; the per-sample loss factor.

    ``ease`` is ``D`` in [0, 1] with 1 = easy (use :func:`ease_from_difficulty` on difficulty tables);
    ``iteration`` is the 0-based training iteration ``i`` (32 batches each, :func:`iteration_of`), a number or an
    array broadcast against ``ease``; ``m`` > 0 is the iteration from which every sample weighs 1, and
    ``math.inf`` or ``"inf"`` keeps ``W = D`` at every iteration (§4.4). ``anti=True`` is the anti-curriculum of
    §4.5: ``D`` is replaced by ``1 - D`` and eq. 3 is otherwise unchanged, so hard samples weigh more first.
    Returns a float64 array of the broadcast shape with values in [0, 1]; raises ``ValueError`` for ease outside
    [0, 1], a negative iteration or ``m <= 0``.
    """
    d = _unit_interval(ease, "ease")
    m_val = _m_value(m)
    i = np.asarray(iteration, dtype=np.float64)
    if np.any(~np.isfinite(i)) or np.any(i < 0):
        raise ValueError(f"iteration must be finite and >= 0 (0-based), got {iteration!r}")
    if anti:
        d = 1.0 - d
    return np.where(i < m_val, d + (i / m_val) * (1.0 - d), 1.0)


def iteration_of(step: Any, iteration_steps: int = 32) -> np.ndarray:
    """The 0-based training iteration of a 0-based ``step``: ``step // iteration_steps``, elementwise.

    MacAvaney et al. (2020, §4): an iteration is 32 batches of 16 samples, so with one batch per step the default
    is 32. Returns an int64 array of the shape of ``step``; raises ``ValueError`` for negative or non-integer steps
    or ``iteration_steps < 1``.
    """
    if isinstance(iteration_steps, bool) or int(iteration_steps) != iteration_steps or iteration_steps < 1:
        raise ValueError(f"iteration_steps must be an integer >= 1, got {iteration_steps!r}")
    s = np.asarray(step)
    if s.dtype.kind not in "iu" and not (s.dtype.kind == "f" and np.all(np.isfinite(s)) and np.all(s == np.floor(s))):
        raise ValueError(f"steps must be whole numbers, got {step!r}")
    if np.any(s < 0):
        raise ValueError(f"steps must be >= 0, got {step!r}")
    return (s.astype(np.int64) // int(iteration_steps)).astype(np.int64)

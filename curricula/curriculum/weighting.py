"""Curriculum sample weights of MacAvaney et al. (2020), "Training Curricula for Open Domain Answer Re-Ranking".

Eq. 3 weights a training sample ``t`` at training iteration ``i`` (0-based) by

    W(t, i) = D(t) + (i / m) * (1 - D(t))   if i < m,    1   if i >= m,

where ``D(t)`` in [0, 1] is the sample's *ease* (1 = easy, 0 = difficult) and ``m`` is the iteration from which all
samples weigh the same; the loss of the sample is multiplied by ``W`` (eq. 4). §4.4 also tests ``m = inf``
(``W = D`` throughout) and §4.5 an anti-curriculum that replaces ``D`` with ``1 - D``.

Units: an *iteration* is 32 batches of 16 samples (§4), a *step* here is one batch (one optimiser update),
0-based, so ``iteration = step // 32`` (:func:`iteration_of`). The project's difficulty tables store difficulty
with 1 = hardest; :func:`ease_from_difficulty` converts. :class:`PairEase` looks up the ease of the pairs a training
batch scores (pointwise D_point, or MacAvaney's pairwise D_pair for the pair-level functions) and
:meth:`PairEase.weights` turns it into eq. 3's weights for one step. Everything is numpy; callers that need torch
tensors convert the result.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from curricula.difficulty import FUNCTIONS, check_names
from curricula.difficulty.macavaney import HEURISTICS, pairwise
from curricula.plumbing.errors import whole_number
from curricula.training.losses import POINTWISE

__all__ = ["DEFAULT_M", "PairEase", "Weighting", "curriculum_weight", "ease_from_difficulty", "iteration_of", "m_value",
           "resolve_weighting"]

#: m when an experiment's ``weighting`` leaves it out (MacAvaney et al. 2020 tune m in {1, 5, 10, 20, 50, 100})
DEFAULT_M = 10
#: steps per iteration when ``weighting.iteration_steps`` is left out (MacAvaney §4: 32 batches)
DEFAULT_ITERATION_STEPS = 32


def _unit_interval(values: Any, what: str) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if np.any(np.isnan(a)) or np.any(a < 0.0) or np.any(a > 1.0):
        raise ValueError(f"{what} must be in [0, 1], got {values!r}")
    return a


def m_value(m: float | str) -> float:
    """Eq. 3's m as a float: a number > 0, or ``"inf"`` / ``math.inf`` (W = D throughout, §4.4)."""
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
    m_val = m_value(m)
    i = np.asarray(iteration, dtype=np.float64)
    if np.any(~np.isfinite(i)) or np.any(i < 0):
        raise ValueError(f"iteration must be finite and >= 0 (0-based), got {iteration!r}")
    if anti:
        d = 1.0 - d
    return np.where(i < m_val, d + (i / m_val) * (1.0 - d), 1.0)


def weighting_steps(m: float | str, iteration_steps: int = DEFAULT_ITERATION_STEPS) -> float:
    """Steps until eq. 3's weights are all 1 (the end of MacAvaney's curriculum): ``m`` iterations of
    ``iteration_steps`` steps; ``inf`` for ``m = inf`` (W = D throughout, the curriculum never ends)."""
    m = m_value(m)
    return math.inf if math.isinf(m) else math.ceil(m * int(iteration_steps))


def iteration_of(step: Any, iteration_steps: int = 32) -> np.ndarray:
    """The 0-based training iteration of a 0-based ``step``: ``step // iteration_steps``, elementwise.

    MacAvaney et al. (2020, §4): an iteration is 32 batches of 16 samples, so with one batch per step the default
    is 32. Returns an int64 array of the shape of ``step``; raises ``ValueError`` for negative or non-integer steps
    or ``iteration_steps < 1``.
    """
    iteration_steps = whole_number(iteration_steps, "iteration_steps")
    s = np.asarray(step)
    if s.dtype.kind not in "iu" and not (s.dtype.kind == "f" and np.all(np.isfinite(s)) and np.all(s == np.floor(s))):
        raise ValueError(f"steps must be whole numbers, got {step!r}")
    if np.any(s < 0):
        raise ValueError(f"steps must be >= 0, got {step!r}")
    return (s.astype(np.int64) // iteration_steps).astype(np.int64)


_WEIGHTING_KEYS = ("scoring", "m", "anti", "iteration_steps")


@dataclass(frozen=True)
class Weighting:
    """An experiment's ``weighting`` section resolved once: the difficulty function whose ease D weighs the loss,
    eq. 3's ``m`` (a float; ``inf`` = W = D throughout, §4.4), the anti-curriculum (§4.5, D -> 1 - D) and the steps
    per iteration. Build it with :func:`resolve_weighting`."""

    scoring: str
    m: float
    anti: bool
    iteration_steps: int

    @property
    def end(self) -> float:
        """Steps until every weight is 1 (:func:`weighting_steps`; ``inf`` for m = inf)."""
        return weighting_steps(self.m, self.iteration_steps)


def resolve_weighting(section: Mapping[str, Any], where: str = "weighting") -> Weighting:
    """The :class:`Weighting` of a ``weighting`` section ({scoring, m, anti, iteration_steps}; defaults m =
    :data:`DEFAULT_M`, no anti-curriculum, :data:`DEFAULT_ITERATION_STEPS`). ValueError naming the key under
    ``where`` for an unknown key, an unknown difficulty function, a bad m or a bad iteration length."""
    unknown = set(section) - set(_WEIGHTING_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; known: {list(_WEIGHTING_KEYS)}")
    scoring = section.get("scoring")
    check_names([scoring], f"{where}.scoring")
    assert scoring is not None  # check_names refuses a missing one: None is no function's name
    try:
        m = m_value(section.get("m", DEFAULT_M))
    except ValueError as err:
        raise ValueError(f"{where}.m: {err}") from None
    steps = section.get("iteration_steps", DEFAULT_ITERATION_STEPS)
    try:
        iteration_of(0, steps)  # validates the iteration length
    except ValueError as err:
        raise ValueError(f"{where}.iteration_steps: {err}") from None
    return Weighting(scoring, m, bool(section.get("anti", False)), int(steps))


class PairEase:
    """Ease D in [0, 1] (1 = easy) of training pairs from one function's difficulty table, for eq. 3 weights.

    Pointwise losses weigh each (q, d) by its own D_point = 1 - difficulty. Pairwise losses weigh (q, d+, d-) by
    MacAvaney's D_pair = (h(d+) - h(d-) + 1) / 2 (eq. 7/9/11) for the pair-level functions, whose raw value is
    the heuristic h; for query-level functions every pair of a query has the query's ease. Lookups are a binary
    search in a sorted key array: O(B log N) per batch.
    """

    def __init__(self, table: pl.DataFrame, scoring: str, q_of: Mapping[str, int], code_of: Mapping[str, int],
                 n_docs: int, *, m: float | str = DEFAULT_M, anti: bool = False,
                 iteration_steps: int = DEFAULT_ITERATION_STEPS):
        self.scoring = scoring
        self.m = m_value(m)
        self.anti = anti
        self.iteration_steps = int(iteration_steps)
        self.pair_level = FUNCTIONS[scoring].pair_level
        q = np.array([q_of.get(x, -1) for x in table["qid"].to_list()], dtype=np.int64)
        d = np.array([code_of.get(x, -1) for x in table["docid"].to_list()], dtype=np.int64)
        keep = (q >= 0) & (d >= 0)
        keys = q[keep] * n_docs + d[keep]
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.n_docs = n_docs
        self.difficulty = table[scoring].to_numpy()[keep][order].astype(np.float64)
        self.raw = table[f"{scoring}_raw"].to_numpy()[keep][order].astype(np.float64)
        self.unlisted = 0  # fallback negatives outside the table, weighed with h = 0 (:meth:`ease`)

    def _rows(self, q: np.ndarray, d: np.ndarray, unlisted: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """(table row of each (q, d), where it was found). A pair that is missing is a KeyError unless ``unlisted``
        (same shape, or None) allows it there."""
        keys = q * self.n_docs + d
        rows = np.searchsorted(self.keys, keys)
        rows = np.minimum(rows, len(self.keys) - 1)
        found = self.keys[rows] == keys
        lacking = ~found if unlisted is None else ~found & ~unlisted
        if np.any(lacking):
            raise KeyError(f"{int(lacking.sum())} trained pair(s) have no {self.scoring!r} "
                           "difficulty (negatives outside the difficulty table's training pairs)")
        return rows, found

    def ease(self, q: np.ndarray, docs: np.ndarray, loss: str, fallback: np.ndarray | None = None) -> np.ndarray:
        """Ease per loss element: (B, 1 + m) for pointwise losses, (B, m) for pairwise ones.

        ``q`` is (B,) query codes, ``docs`` (B, 1 + m) doc codes with the positive in column 0. ``fallback`` (B,)
        marks the instances whose negatives the sampler drew from the pool because their ranked list had none left
        (:attr:`curricula.curriculum.negatives.NegativeSampler.last_fallback`). For MacAvaney's heuristics such a
        negative may
        be outside the table (neither a candidate nor in the BM25 run): it is then a doc outside the ranked list D
        with no BM25 score, whose h is 0 (eq. 5's 1/rank as the rank grows;
        :func:`curricula.difficulty.macavaney.macavaney_heuristics` maps a missing score to 0), so raw 0 and
        difficulty 0 (D_point = 1 - h = 1, an easy negative). Any other missing pair is a KeyError.
        """
        width = docs.shape[1] if loss in POINTWISE else docs.shape[1] - 1
        if not self.pair_level:  # one value per query: the positive's row carries it
            rows, _ = self._rows(q, docs[:, 0])
            return np.repeat(ease_from_difficulty(self.difficulty[rows])[:, None], width, axis=1)
        unlisted = None
        if fallback is not None and self.scoring in HEURISTICS:
            unlisted = np.zeros(docs.shape, dtype=bool)
            unlisted[:, 1:] = np.asarray(fallback, dtype=bool)[:, None]
        rows, found = self._rows(np.repeat(q[:, None], docs.shape[1], axis=1), docs, unlisted)
        self.unlisted += int((~found).sum())
        if loss in POINTWISE:
            return ease_from_difficulty(np.where(found, self.difficulty[rows], 0.0))
        h = np.where(found, self.raw[rows], 0.0)
        return np.asarray(pairwise(h[:, :1], h[:, 1:]), dtype=np.float64)

    @classmethod
    def from_weighting(cls, table: pl.DataFrame, weighting: Weighting, q_of: Mapping[str, int],
                       code_of: Mapping[str, int], n_docs: int) -> PairEase:
        """The ease of an experiment's resolved :class:`Weighting`."""
        return cls(table, weighting.scoring, q_of, code_of, n_docs, m=weighting.m, anti=weighting.anti,
                   iteration_steps=weighting.iteration_steps)

    def weights(self, q: np.ndarray, docs: np.ndarray, loss: str, step: int,
                fallback: np.ndarray | None = None) -> np.ndarray:
        """Eq. 3's W(t, i) of each loss element of a batch at 0-based ``step`` (shape of :meth:`ease`, which reads
        ``fallback``), with this object's m, anti-curriculum (§4.5) and iteration length."""
        return curriculum_weight(self.ease(q, docs, loss, fallback), iteration_of(step, self.iteration_steps),
                                 self.m, anti=self.anti)

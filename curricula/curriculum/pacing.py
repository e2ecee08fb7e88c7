"""Pacing functions: how much of the easiest-first training data a curriculum may use at a given step.

Sources:

* Penha & Hauff (2020), "Curriculum Learning Strategies for IR", Table 3 and Fig. 2: ``standard`` (their
  *baseline_training*), ``step``, ``linear``, ``root_n`` and ``geom_progression``, with the hyper-parameters
  ``delta`` (share of the data available at step 0) and ``T`` (step at which all data is available). Their §4 fixes
  ``T`` at 90% of the training steps and ``delta = 0.33``; these are the defaults of :func:`resolve_pacing`.
* Su et al. (2021), "Dialogue Response Selection with Hierarchical Curriculum Learning", §3.2-3.3: the
  corpus-level pacing ``f_p(t)`` (:func:`hcl_corpus_pace`) and the instance-level pacing ``h_p(t)``
  (:func:`hcl_instance_pace`) with ``k0 = log10 |D|`` (:func:`hcl_k0`); §5.3 uses ``r0 = 0.4``, ``T0 = 2,000``,
  ``T = 20,000`` and ``k_T = 3`` out of 40,000 training steps.

Conventions shared by every function here:

* A *step* is one optimiser update, counted from 0. ``T`` and ``T0`` are in the same unit.
* ``step`` may be a Python number or an array of step numbers (non-negative). It goes through ``np.asarray`` and
  the result is always a float64 ``np.ndarray`` of the same shape (a 0-d array for a scalar step; ``float(x)``
  turns it into a Python float). Integer results (:meth:`InstancePacing.k`) are int64 arrays under the same rule.
* The Penha functions and ``f_p`` are non-decreasing in ``step`` and return values in ``(0, 1]``; ``h_p`` is
  non-increasing (it shrinks the pool negatives are drawn from, i.e. makes them harder).

The two papers read their value differently, see :func:`pace_mode`: Penha samples uniformly from the easiest
``f(s)`` *fraction* of the training data sorted by difficulty; Su keeps the instances whose corpus difficulty
``f_d`` (in [0, 1], 0 = easiest) is at most ``f_p(t)`` (a *threshold* on the difficulty value).
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any

import numpy as np

from curricula.plugins import load_environment_plugins
from curricula.plumbing.errors import whole_number

__all__ = [
    "PACINGS",
    "InstancePacing",
    "Pacing",
    "PacingFunction",
    "geom_progression",
    "hcl_corpus_pace",
    "hcl_instance_pace",
    "hcl_k0",
    "linear",
    "pace_mode",
    "register_pacing",
    "resolve_instance_pacing",
    "resolve_pacing",
    "resolve_steps",
    "root",
    "standard",
    "step_pace",
    "unregister_pacing",
]


def _steps(step: Any) -> np.ndarray:
    """``step`` as a float64 array; rejects negative or non-finite steps."""
    s = np.asarray(step, dtype=np.float64)
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"steps must be finite and >= 0 (0-based optimiser updates), got {step!r}")
    return s


def _check_delta_T(delta: float, T: float) -> None:
    if not 0.0 < delta <= 1.0:
        raise ValueError(f"delta must be in (0, 1], got {delta!r}")
    if not T > 0:
        raise ValueError(f"T must be > 0 steps, got {T!r}")


# --------------------------------------------------------------------------------------------------------------------
# Penha & Hauff (2020), Table 3
# --------------------------------------------------------------------------------------------------------------------


def standard(step: Any, delta: float = 0.33, T: float = 1.0) -> np.ndarray:
    """No curriculum (Penha & Hauff 2020, Table 3, *baseline_training*): ``f(s) = 1`` at every step.

    ``delta`` and ``T`` are accepted (and ignored) so every Penha function has the same call signature.
    Returns the fraction of the easiest-sorted training data available, 1.0 everywhere, shape of ``step``.
    """
    return np.ones_like(_steps(step))


def step_pace(step: Any, delta: float, T: float, groups: int = 3) -> np.ndarray:
    """Penha & Hauff (2020), Table 3, *step*: the data is added in ``groups`` (their S) fixed-size chunks.

    Group ``g = 0`` has value ``delta``; group ``g >= 1`` starts once ``step > T * g / groups`` and has value
    ``delta + (1 - delta) * g / (groups - 1)``, so the last group (value 1) starts after ``T * (groups-1)/groups``
    steps and ``f(T) = 1``. Units: ``step`` and ``T`` in optimiser updates (0-based); the result is the fraction of
    the easiest-sorted training data available, in (0, 1], non-decreasing in ``step``.

    Table 3 prints the S = 3 case with break points ``T * 0.33`` and ``T * 0.66`` and a middle value of 0.66; this
    rule uses the exact thirds ``T/3``, ``2T/3`` and gives ``0.33 + 0.67 / 2 = 0.665`` for ``delta = 0.33``.
    """
    _check_delta_T(delta, T)
    groups = whole_number(groups, "groups", minimum=2)
    s = _steps(step)
    # g = how many group boundaries T*k/groups (k = 1..groups-1) the step is strictly past
    bounds = T * np.arange(1, groups) / groups
    g = np.sum(s[..., None] > bounds, axis=-1)
    return np.where(g == 0, delta, delta + (1.0 - delta) * g / (groups - 1)).astype(np.float64)


def root(step: Any, delta: float, T: float, n: float) -> np.ndarray:
    """Penha & Hauff (2020), Table 3, *root* (Platanios et al. 2019): ``min(1, (s (1 - δ^n) / T + δ^n)^(1/n))``.

    ``f(0) = delta``, ``f(T) = 1`` (returned exactly for ``step >= T``); larger ``n`` adds harder data earlier
    (Fig. 2: with δ = 0.33, T = 1000, *root_10* passes 0.8 at ~108 steps by Table 3's formula; the text says
    "after 125 iterations", read off the figure). Units: ``step`` and ``T`` in optimiser
    updates (0-based); the result is the fraction of the easiest-sorted data available, in (0, 1], non-decreasing.
    """
    _check_delta_T(delta, T)
    if not n > 0:
        raise ValueError(f"n must be > 0, got {n!r}")
    s = _steps(step)
    dn = delta**n
    value = (np.minimum(s, T) * (1.0 - dn) / T + dn) ** (1.0 / n)
    return np.where(s >= T, 1.0, np.minimum(1.0, value))


def linear(step: Any, delta: float, T: float) -> np.ndarray:
    """Penha & Hauff (2020), Table 3, *linear* = ``root(s, n=1)``: ``min(1, delta + s (1 - delta) / T)``.

    Slope ``(1 - delta) / T`` per optimiser update; ``f(0) = delta``, ``f(T) = 1``. Result: fraction of the
    easiest-sorted training data available, in (0, 1], non-decreasing in ``step``.
    """
    return root(step, delta, T, 1)


def geom_progression(step: Any, delta: float, T: float) -> np.ndarray:
    """Penha & Hauff (2020), Table 3, *geom_progression*: ``min(1, 2^(s (log2 1 - log2 δ) / T + log2 δ))``.

    Equal to ``delta * (1/delta)^(s/T)``: easy data gets most of the time, hard data arrives late (Fig. 2: with
    δ = 0.33, T = 1000 it reaches 0.8 at ~800 steps). ``f(0) = delta``, ``f(T) = 1`` (exactly, for ``step >= T``).
    Units: ``step``/``T`` in optimiser updates (0-based); result: fraction of the easiest-sorted data available,
    in (0, 1], non-decreasing.
    """
    _check_delta_T(delta, T)
    s = _steps(step)
    value = 2.0 ** (np.minimum(s, T) * (math.log2(1.0) - math.log2(delta)) / T + math.log2(delta))
    return np.where(s >= T, 1.0, np.minimum(1.0, value))


# --------------------------------------------------------------------------------------------------------------------
# Su et al. (2021), hierarchical curriculum learning
# --------------------------------------------------------------------------------------------------------------------


def hcl_corpus_pace(step: Any, r0: float, T0: float, T: float) -> np.ndarray:
    """Su et al. (2021), §3.2, corpus-level pacing ``f_p(t)``.

    ``r0`` for ``t <= T0`` (warm-up), then linear ``(1 - r0) / (T - T0) * (t - T0) + r0`` up to 1 at ``t = T``,
    1 afterwards. Units: ``t``, ``T0``, ``T`` in optimiser updates (0-based; the paper uses 2,000 and 20,000).
    The result, in (0, 1] and non-decreasing, is a threshold on the corpus-level difficulty ``f_d`` (0 = easiest):
    step ``t`` may use the pairs with ``f_d <= f_p(t)`` (Algorithm 1, line 2).
    """
    if not 0.0 < r0 <= 1.0:
        raise ValueError(f"r0 must be in (0, 1], got {r0!r}")
    if not 0 <= T0 < T:
        raise ValueError(f"need 0 <= T0 < T, got T0={T0!r}, T={T!r}")
    s = _steps(step)
    ramp = (1.0 - r0) / (T - T0) * (s - T0) + r0
    return np.where(s <= T0, r0, np.where(s >= T, 1.0, ramp))


def hcl_instance_pace(step: Any, k0: float, kT: float, T: float) -> np.ndarray:
    """Su et al. (2021), §3.3, instance-level pacing: ``h_p(t) = -(k0 - kT) / T * (t - T) + kT`` if ``t <= T``, else kT.

    The value is log10 of the negative-sampling space size: negatives are drawn from the ``10 ** h_p(t)``
    responses most similar to the context (Algorithm 1, line 4). It decreases linearly from ``k0`` (``log10 |D|``,
    see :func:`hcl_k0`; the whole corpus) at ``t = 0`` to ``kT`` at ``t = T`` (paper: 3, i.e. the top 1000) and stays
    there, so negatives get harder over training. Units: ``t`` and ``T`` in optimiser updates (0-based).
    """
    if not k0 >= kT >= 0:
        raise ValueError(f"need k0 >= kT >= 0 (log10 sizes, decreasing), got k0={k0!r}, kT={kT!r}")
    if not T > 0:
        raise ValueError(f"T must be > 0 steps, got {T!r}")
    s = _steps(step)
    return np.where(s <= T, -(k0 - kT) / T * (s - T) + kT, float(kT))


def hcl_k0(n_responses: int) -> float:
    """Su et al. (2021), §3.3: ``k0 = log10 |D|``, the log10 of the number of candidate responses."""
    if not n_responses >= 1:
        raise ValueError(f"n_responses must be >= 1, got {n_responses!r}")
    return math.log10(n_responses)


# --------------------------------------------------------------------------------------------------------------------
# Registry and config specs
# --------------------------------------------------------------------------------------------------------------------

_SPEC_KEYS = ("name", "select")  # keys of a pacing spec that are not function parameters
_STEP_KEYS = ("T0", "T")  # given as a fraction of total_steps or an absolute count, see resolve_steps
_MODES = ("fraction", "threshold")


@dataclass(frozen=True)
class PacingFunction:
    """One registered pacing function; see :func:`register_pacing` for the fields. Calling it calls ``function``."""

    name: str
    function: Callable[..., np.ndarray] = field(repr=False)
    knobs: Mapping[str, Any]
    mode: str = "fraction"
    citation: str = ""

    def __call__(self, step: Any, **knobs: Any) -> np.ndarray:
        """The pacing value at ``step`` (0-based optimiser updates) with these knob values (``T``/``T0`` in steps)."""
        return self.function(step, **knobs)


#: Pacing functions by config name, in registration order (:func:`register_pacing`)
PACINGS: dict[str, PacingFunction] = {}


def register_pacing(name: str, function: Callable[..., np.ndarray], *, knobs: Mapping[str, Any],
                    mode: str = "fraction", citation: str = "") -> PacingFunction:
    """Register a pacing function under ``name`` (a config ``pacing.name``); returns its entry.

    * ``function(step, **knobs) -> np.ndarray``: vectorised in ``step`` (0-based optimiser updates, a number or an
      array; :func:`_steps` checks it), float64 of the shape of ``step``, in (0, 1], non-decreasing, and 1 from
      ``T`` on; it raises ValueError for knob values it refuses (checked at start-up, at step 0).
    * ``knobs``: ``{knob: default}``, the keyword arguments a spec may set (no other key is accepted) and their
      defaults. A knob named ``T`` or ``T0`` is a step count: the config gives it as a fraction (<= 1) of the
      curriculum's length or an absolute count (:func:`resolve_steps`), and ``function`` receives steps.
    * ``mode``: how the value selects training data (:func:`pace_mode`): ``"fraction"`` of the easiest-sorted data
      (Penha) or ``"threshold"`` on the difficulty value (Su); a spec's ``select`` overrides it.
    * ``citation``: the paper and table or equation it implements.

    A name registered twice, a mode not in ``fraction``/``threshold``, a knob ``name``/``select`` or knobs
    ``function`` does not take are a ValueError (:func:`unregister_pacing` first).
    """
    if name in PACINGS:
        raise ValueError(f"pacing function {name!r} is already registered")
    if mode not in _MODES:
        raise ValueError(f"pacing {name}: mode must be one of {list(_MODES)}, got {mode!r}")
    clash = sorted(set(knobs) & set(_SPEC_KEYS))
    if clash:
        raise ValueError(f"pacing {name}: {clash} are keys of the pacing spec, not knobs")
    try:
        inspect.signature(function).bind(0, **knobs)
    except TypeError as err:
        raise ValueError(f"pacing {name}: the function does not take the knobs {sorted(knobs)} ({err})") from None
    entry = PacingFunction(name, function, MappingProxyType(dict(knobs)), mode, citation)
    PACINGS[name] = entry
    return entry


def unregister_pacing(name: str) -> PacingFunction:
    """Remove a registered pacing function (tests registering a toy one clean up with this); returns it."""
    if name not in PACINGS:
        raise ValueError(f"unknown pacing function {name!r}; known: {sorted(PACINGS)}")
    return PACINGS.pop(name)


_PENHA = {"delta": 0.33, "T": 0.9}  # Penha & Hauff §4: delta = 0.33, T = 90% of the training steps
_TABLE3 = "Penha & Hauff 2020, Table 3"
register_pacing("standard", standard, knobs=_PENHA, citation=f"{_TABLE3} (baseline_training)")
register_pacing("step", step_pace, knobs={**_PENHA, "groups": 3}, citation=_TABLE3)
register_pacing("linear", linear, knobs=_PENHA, citation=_TABLE3)
register_pacing("root_n", root, knobs={**_PENHA, "n": 2}, citation=_TABLE3)
# root with n fixed (Penha's Fig. 2 names)
register_pacing("root_2", partial(root, n=2), knobs=_PENHA, citation=_TABLE3)
register_pacing("root_5", partial(root, n=5), knobs=_PENHA, citation=_TABLE3)
register_pacing("root_10", partial(root, n=10), knobs=_PENHA, citation=_TABLE3)
register_pacing("geom_progression", geom_progression, knobs=_PENHA, citation=_TABLE3)
# Su's corpus-level f_p, a threshold on the corpus difficulty f_d (Algorithm 1, line 2)
register_pacing("hcl", hcl_corpus_pace, knobs={"r0": 0.4, "T0": 0.1, "T": 0.9}, mode="threshold",
                citation="Su et al. 2021, §3.2")


def resolve_steps(value: float, total_steps: int) -> int:
    """A step count from a config value: ``<= 1.0`` is a fraction of ``total_steps``, ``> 1`` an absolute count.

    Fractions are rounded half up and give at least 1 step (so ``1`` or ``1.0`` means all of ``total_steps``, not
    one step). Absolute counts must be whole numbers. Used for ``T`` and ``T0``: Penha's ``T = 0.9`` and Su's
    ``T0 = 2000``, ``T = 20000`` are both valid.
    """
    total_steps = whole_number(total_steps, "total_steps")
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"step value must be a number > 0 (fraction <= 1 or absolute count > 1), got {value!r}")
    if value <= 1.0:
        return max(1, math.floor(value * total_steps + 0.5))
    if value != int(value):
        raise ValueError(f"an absolute step count (> 1) must be a whole number, got {value!r}")
    return int(value)


def _check_spec(spec: Mapping[str, Any], allowed: Mapping[str, Any], extra: tuple[str, ...], what: str) -> None:
    unknown = [k for k in spec if k not in allowed and k not in extra]
    if unknown:
        known = sorted([*allowed, *extra])
        raise ValueError(f"unknown key(s) {unknown} for {what}; known keys: {known}")


def _pacing_name(spec: Mapping[str, Any]) -> str:
    name = spec.get("name")
    if name not in PACINGS:
        raise ValueError(f"unknown pacing function {name!r}; known: {sorted(PACINGS)}")
    _check_spec(spec, PACINGS[name].knobs, _SPEC_KEYS, f"pacing {name!r}")
    return name


@dataclass(frozen=True)
class Pacing:
    """A pacing spec resolved once against its curriculum's length: a function of the step alone.

    ``params`` are the pacing function's keyword arguments with every default filled in and ``T`` / ``T0`` in
    optimiser updates (:func:`resolve_steps` applied); ``mode`` is :func:`pace_mode`'s answer. Build it with
    :func:`resolve_pacing`."""

    name: str
    mode: str
    params: tuple[tuple[str, float], ...]

    def value(self, step: Any) -> np.ndarray:
        """The pacing value at ``step`` (0-based optimiser updates): float64 array of the shape of ``step``, in
        (0, 1]; a fraction of the easiest-sorted data or a difficulty threshold, as :attr:`mode` says."""
        return PACINGS[self.name](step, **dict(self.params))


def resolve_pacing(spec: Mapping[str, Any], total_steps: int) -> Pacing:
    """The :class:`Pacing` of a config mapping such as ``{"name": "root_n", "n": 2, "delta": 0.33, "T": 0.9}``,
    ``{"name": "root_2"}``, ``{"name": "hcl", "r0": 0.4, "T0": 0.1, "T": 0.9}`` or ``{"name": "standard"}`` (it may
    also hold ``select``, see :func:`pace_mode`), with ``T`` and ``T0`` resolved against ``total_steps``, the
    curriculum's length (:func:`resolve_steps`: fractions of it, or absolute counts such as Su's 2,000 / 20,000).
    Defaults: ``delta = 0.33`` and ``T = 0.9`` (Penha §4), ``n = 2``, ``groups = 3``; for ``hcl`` ``r0 = 0.4``,
    ``T0 = 0.1``, ``T = 0.9``. Raises ``ValueError`` for an unknown name or key, listing the known ones, and for
    parameters the function refuses (checked here, at step 0, so a bad spec fails before training)."""
    name = _pacing_name(spec)
    kwargs: dict[str, Any] = {**PACINGS[name].knobs, **{k: v for k, v in spec.items() if k not in _SPEC_KEYS}}
    for key in _STEP_KEYS:
        if key in kwargs:
            kwargs[key] = resolve_steps(kwargs[key], total_steps)
    pacing = Pacing(name, pace_mode(spec), tuple(sorted(kwargs.items())))
    pacing.value(0)
    return pacing


def pace_mode(spec: Mapping[str, Any]) -> str:
    """How a pacing value selects training data: ``"fraction"`` or ``"threshold"``.

    ``"fraction"`` (Penha functions): sample uniformly from the easiest ``f(s)`` fraction of the training data sorted
    by difficulty. ``"threshold"`` (``hcl``, Su Algorithm 1): sample uniformly from the instances whose corpus
    difficulty ``f_d <= f_p(t)``. A ``select: fraction|threshold`` key in ``spec`` overrides the default.
    """
    name = _pacing_name(spec)
    mode = spec.get("select", PACINGS[name].mode)
    if mode not in _MODES:
        raise ValueError(f"unknown select mode {mode!r}; known: {list(_MODES)}")
    return mode


_INSTANCE_DEFAULTS = {"k0": None, "kT": 3.0, "T": 0.9}


@dataclass(frozen=True)
class InstancePacing:
    """Su et al.'s instance-level pacing resolved against its curriculum's length: ``k0`` (None = ``log10`` of the
    response pool, :func:`hcl_k0`, known only to the sampler), ``kT`` and ``T`` in optimiser updates. Build it with
    :func:`resolve_instance_pacing`."""

    k0: float | None
    kT: float
    T: int

    def k(self, step: Any, n_responses: int) -> np.ndarray:
        """The negative-sampling space size ``k = 10 ** h_p(t)`` at ``step`` (0-based optimiser updates) for a pool
        of ``n_responses``: rounded half up and clipped to ``[1, n_responses]``; when ``kT > k0`` (fewer than
        ``10 ** kT`` responses) ``kT`` is lowered to ``k0``, so the whole pool is used at every step. Returns an
        int64 array of the shape of ``step``, non-increasing."""
        n_responses = whole_number(n_responses, "n_responses")
        k0 = hcl_k0(n_responses) if self.k0 is None else float(self.k0)
        h = hcl_instance_pace(step, k0, min(self.kT, k0), self.T)
        return np.clip(np.floor(10.0**h + 0.5), 1, n_responses).astype(np.int64)


def resolve_instance_pacing(spec: Mapping[str, Any], total_steps: int) -> InstancePacing:
    """The :class:`InstancePacing` of a mapping like ``{"kT": 3, "T": 0.9}`` (optional ``k0``; defaults ``kT = 3``,
    Su §5.3, and ``T = 0.9``), ``T`` resolved against ``total_steps`` by :func:`resolve_steps`. Raises ValueError
    for an unknown key."""
    _check_spec(spec, _INSTANCE_DEFAULTS, (), "the instance-level pacing")
    params = {**_INSTANCE_DEFAULTS, **spec}
    return InstancePacing(None if params["k0"] is None else float(params["k0"]), float(params["kT"]),
                          resolve_steps(params["T"], total_steps))


# a plugin module named by the config's `plugins` registers its pacing functions in a job's process too
# (curricula.plugins)
load_environment_plugins()

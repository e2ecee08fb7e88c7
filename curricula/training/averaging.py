"""Weight averaging for :func:`curricula.training.core.fit`: a running average of the weights (:class:`WeightAverage`,
an EMA or SWA's uniform average) that evaluations score and the run keeps instead of the trained weights
(``FitConfig.averaging``), and the diagnostic shadow averages (:class:`ShadowAverages`, ``FitConfig.shadow_averages``)
that record the curve such a run would draw while the trained weights themselves are kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from curricula.plumbing.contracts import SHADOW_KEYS, SHADOW_KINDS
from curricula.training.checkpoints import load_weights

#: weight averaging (:class:`WeightAverage`): none (the trained weights themselves), ema, swa (the averages whose
#: shadow columns the dev curve's contract allows, :data:`curricula.plumbing.contracts.SHADOW_KINDS`)
AVERAGING = ("none", *SHADOW_KINDS)
#: the EMA's decay per step when a spec names none (a window of about 1 / (1 - 0.999) = 1,000 steps)
DEFAULT_EMA_DECAY = 0.999


class WeightAverage:
    """A running average of a module's weights, as a second copy beside the trained ones (on their device).

    ``kind`` ``ema``: an exponential moving average, ``avg <- decay * avg + (1 - decay) * w`` for every weight vector
    it is given (one per step in :func:`~curricula.training.core.fit`): the exponentially weighted form of iterate
    averaging (Polyak & Juditsky 1992, "Acceleration of Stochastic Approximation by Averaging", SIAM J. Control
    Optim. 30(4), average the iterates uniformly; a constant ``decay`` forgets the early ones, as torch's
    ``get_ema_multi_avg_fn`` (``torch.optim.swa_utils``) and Morales-Brotons et al. 2024, "Exponential Moving
    Average of Weights in Deep Learning", arXiv 2411.18704, do). ``kind`` ``swa``: the uniform average of every
    weight vector it is given, ``avg <- avg + (w - avg) / n`` for the n-th (Izmailov et al. 2018, "Averaging Weights
    Leads to Wider Optima and Better Generalization", UAI, eq. 2, after a burn-in; torch's ``AveragedModel``
    default; one per evaluation in :func:`~curricula.training.core.fit`). The first weights given become the
    average. Floating-point entries of the state dict are averaged (parameters and float buffers, as
    ``AveragedModel(use_buffers=True)``); integer buffers are copied; ``skip`` (frozen parameters, constant) stays
    out. ``count`` is how many weight vectors went in.
    """

    def __init__(self, kind: str, decay: float = DEFAULT_EMA_DECAY, skip: frozenset[str] = frozenset()):
        if kind not in AVERAGING[1:]:
            raise ValueError(f"weight average {kind!r}: expected one of {list(AVERAGING[1:])}")
        self.kind, self.decay, self.skip = kind, float(decay), skip
        self.state: dict[str, torch.Tensor] | None = None
        self.count = 0

    @torch.no_grad()
    def update(self, module: torch.nn.Module) -> None:
        """Take the module's current weights into the average."""
        current = {k: v.detach() for k, v in module.state_dict().items() if k not in self.skip}
        self.count += 1
        if self.state is None:
            self.state = {k: v.clone() for k, v in current.items()}
            return
        for key, avg in self.state.items():
            weight = current[key]
            if not avg.is_floating_point():
                avg.copy_(weight)
            elif self.kind == "ema":
                avg.mul_(self.decay).add_(weight, alpha=1.0 - self.decay)
            else:
                avg.add_(weight - avg, alpha=1.0 / self.count)

    def checkpoint(self) -> dict[str, Any]:
        """What a checkpoint keeps of the average: its count and a CPU copy of its weights (None before any)."""
        state = None if self.state is None else {k: v.to("cpu").clone() for k, v in self.state.items()}
        return {"kind": self.kind, "count": self.count, "state": state}

    def restore(self, saved: Mapping[str, Any], device: torch.device | str) -> None:
        """Resume from :meth:`checkpoint`'s dict (ValueError when it is another kind of average)."""
        if saved["kind"] != self.kind:
            raise ValueError(f"the checkpoint holds a {saved['kind']} average, not {self.kind}")
        self.count = int(saved["count"])
        self.state = None if saved["state"] is None else {k: v.to(device) for k, v in saved["state"].items()}


def swapped_in(module: torch.nn.Module, state: Mapping[str, torch.Tensor], skip: frozenset[str]
               ) -> dict[str, torch.Tensor]:
    """Load ``state`` into ``module`` and return a copy (on the module's device) of the weights it replaced."""
    saved = {k: v.detach().clone() for k, v in module.state_dict().items() if k not in skip}
    load_weights(module, state, skip)
    return saved


def shadow_columns(module: torch.nn.Module, shadows: Mapping[str, WeightAverage],
                   evaluate: Callable[[int], Mapping[str, Any]], done: int, row: Mapping[str, Any],
                   skip: frozenset[str]) -> dict[str, Any]:
    """The curve columns ``<kind>_<key>`` (:data:`SHADOW_KEYS`) of each shadow average at an evaluation after
    ``done`` steps: ``evaluate(done)`` with the average swapped into ``module`` (the trained weights swapped back
    after), or the trained weights' own ``row`` values while the average is still empty (before its first step:
    what a run with that ``averaging`` evaluates then, :func:`~curricula.training.core.fit`)."""
    out: dict[str, Any] = {}
    for kind, shadow in shadows.items():
        if shadow.state is None:
            values = row
        else:
            trained = swapped_in(module, shadow.state, skip)
            values = evaluate(done)
            load_weights(module, trained, skip)
        out.update({f"{kind}_{key}": values[key] for key in SHADOW_KEYS if key in row})
    return out


def takes_in(average: WeightAverage, done: int, average_from: int, evaluation_step: bool) -> bool:
    """Whether ``average`` takes in the weights after ``done`` steps: only from step ``average_from`` on, an EMA
    after every step and SWA at every evaluation step (every ``eval_every`` steps and the last)."""
    return done >= average_from and (average.kind == "ema" or evaluation_step)


class ShadowAverages:
    """The diagnostic shadow averages of one run (``FitConfig.shadow_averages``), a hook that
    :func:`~curricula.training.core.fit` installs only when there are some: one :class:`WeightAverage` per kind
    beside the trained weights, taking weights in from ``average_from`` as a run with that ``averaging`` would
    (:func:`takes_in`), evaluated at every evaluation into the curve columns ``<kind>_<key>``
    (:func:`shadow_columns`) and kept in checkpoints under ``shadows``. They train nothing, select nothing and are
    never kept."""

    def __init__(self, kinds: tuple[str, ...], decay: float, average_from: int, skip: frozenset[str]):
        self.shadows = {kind: WeightAverage(kind, decay, skip) for kind in kinds}
        self.average_from, self.skip = average_from, skip

    def after_step(self, module: torch.nn.Module, done: int, evaluation_step: bool) -> None:
        """Take the module's weights after ``done`` steps into each average that takes them in."""
        for shadow in self.shadows.values():
            if takes_in(shadow, done, self.average_from, evaluation_step):
                shadow.update(module)

    def columns(self, module: torch.nn.Module, evaluate: Callable[[int], Mapping[str, Any]], done: int,
                row: Mapping[str, Any]) -> dict[str, Any]:
        """The curve columns of the shadows at the evaluation ``row`` after ``done`` steps (:func:`shadow_columns`)."""
        return shadow_columns(module, self.shadows, evaluate, done, row, self.skip)

    def checkpoint(self) -> dict[str, Any]:
        """What a checkpoint keeps of the shadows: ``{"shadows": {kind: WeightAverage.checkpoint()}}``."""
        return {"shadows": {kind: shadow.checkpoint() for kind, shadow in self.shadows.items()}}

    def restore(self, saved: Mapping[str, Any], device: torch.device | str) -> None:
        """Resume from a checkpoint holding :meth:`checkpoint`'s entries."""
        for kind, shadow in self.shadows.items():
            shadow.restore(saved["shadows"][kind], device)

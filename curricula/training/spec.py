"""The typed parts of a training spec that the training core, the rankers and the job runtime read.

A run's ``train`` knobs (config ``train`` with one experiment's overrides, resolved by
:mod:`curricula.experiments.specs`) are parsed once, at the boundary (plan time and job start), into a
:class:`curricula.experiments.spec.TrainSpec` made of these frozen parts and the curriculum's; below the parser code
reads fields, never the mapping. No torch here: Snakemake imports these classes while it parses the workflow.

Each field's default is the schema's (``schemas/config.schema.yaml``, ``train``; a test holds them equal). Which
fields a job's params (and so its digests) hold is one generic rule (:func:`curricula.experiments.spec.spec_params`):
every field of the first params format, and a field added later (:func:`knob` with ``added=True``) only while it
differs from its default, so adding a knob re-runs nothing; a field read only in some settings (``used_when``, e.g.
``ema_decay`` under an EMA) exactly while it is read; runtime-only fields (``params=False``: threads) never.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field
from typing import Any

def knob(default: Any = MISSING, *, added: bool = False, params: bool = True, used_when: str | None = None) -> Any:
    """A spec field with its (schema) default; ``added``: introduced after the first params format, so a job's
    params hold it only while it differs from ``default``; ``params=False``: a runtime-only knob, never in params;
    ``used_when``: the name of a boolean property of its part saying when the field is read at all: the params hold
    it exactly while that holds (whatever its value), and the parser resets it to ``default`` otherwise (a value
    nothing reads must not tell two runs apart)."""
    meta = {"added": added, "params": params, "used_when": used_when}
    if isinstance(default, (list, dict)):
        raise TypeError("a spec default must be immutable (tuple, not list)")
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RankerSpec:
    """The ranker a run trains: ``ranker`` (a registered name, :data:`curricula.models.RANKERS`), the packaged
    transformer ``model`` whose weights or word-piece embeddings it starts from, the cross-encoder's ``layers`` (None =
    all), ``pooling`` (None = the model's) and ``max_length`` (word pieces per pair), and ``architecture``: the
    resolved knobs of a non-transformer ranker as ordered (name, value) pairs (:func:`arch`). ``arithmetic``: the
    version of the ranker's arithmetic the run computes with, set by the parser from the ranker registry (never by a
    config; :func:`curricula.models.registry.register_ranker`), in params only above 1."""

    ranker: str = knob("cross_encoder")
    model: str = knob("minilm")
    layers: int | None = knob(None)
    pooling: str | None = knob(None)
    max_length: int = knob(64)
    architecture: tuple[tuple[str, Any], ...] = knob(())
    arithmetic: int = knob(1, added=True)

    def arch(self) -> dict[str, Any]:
        """The architecture knobs as a dict (lists where the config wrote lists, e.g. ``ngrams``)."""
        return {key: list(value) if isinstance(value, tuple) else value for key, value in self.architecture}


@dataclass(frozen=True)
class Objective:
    """What one step optimises: the per-element ``loss`` (:data:`curricula.training.losses.LOSSES`), its ``margin``
    (hinge only) and ``batch_size`` positives per step."""

    loss: str = knob("pointwise_ce")
    margin: float = knob(1.0)
    batch_size: int = knob(8)


@dataclass(frozen=True)
class Evaluation:
    """Model selection on dev: ``eval_metric`` (an ir-measures name, higher = better) on ``dev_queries`` dev queries
    (None = all), scored ``score_batch_size`` pairs at a time; ``diagnostic_test`` also scores every test query at each
    evaluation (recorded, never selected on)."""

    eval_metric: str = knob("AP")
    dev_queries: int | None = knob(100)
    score_batch_size: int = knob(128)
    diagnostic_test: bool = knob(False, added=True)


@dataclass(frozen=True)
class FitSpec:
    """The step budget, optimiser, schedule and weight averaging of a run, in optimiser updates (steps).

    ``steps`` is the curriculum's length (the pacing's fractions resolve against it) and the budget unless
    ``max_steps`` (None = ``steps``) is larger; ``patience`` (None or 0 = off) dev evaluations without improvement
    stop a run, counted only after ``min_steps`` (the grid's longest curriculum; None when nothing counts
    evaluations). ``lr`` is resolved (the ranker's default when the config leaves it null), as is ``schedule``.
    ``averaging`` (none, ema, swa), ``ema_decay`` (per step; read only by an EMA, the average or a shadow one),
    ``diagnostic_averages`` (shadow averages) and ``keep`` (best, last) came after the first params format."""

    steps: int = knob(300)
    max_steps: int | None = knob(None)
    patience: int | None = knob(None)
    min_steps: int | None = knob(None)
    lr: float = knob(5.0e-5)
    eps: float = knob(1e-8)
    weight_decay: float = knob(0.0)
    schedule: str = knob("linear")
    warmup: float = knob(0.1)
    optimizer: str = knob("adamw")
    eval_every: int = knob(50)
    checkpoint_every: int = knob(50)
    averaging: str = knob("none", added=True)
    ema_decay: float = knob(0.999, added=True, used_when="uses_ema")
    diagnostic_averages: tuple[str, ...] = knob((), added=True)
    keep: str = knob("best", added=True)

    @property
    def averages(self) -> bool:
        """Whether the run averages its weights (``averaging`` other than ``none``)."""
        return self.averaging != "none"

    @property
    def uses_ema(self) -> bool:
        """Whether an exponential moving average reads ``ema_decay`` (the average, or a shadow one)."""
        return self.averaging == "ema" or "ema" in self.diagnostic_averages

    @property
    def uses_min_steps(self) -> bool:
        """Whether the run needs the grid's ``min_steps``: early stopping counts evaluations only after it, and a
        weight average (or a shadow one) takes weights in only after it. A diagnostic run records it too
        (``diagnostic_test``, :meth:`curricula.experiments.spec.TrainSpec.needs_min_steps`)."""
        return bool(self.patience or self.averages or self.diagnostic_averages)


@dataclass(frozen=True)
class Runtime:
    """How a job runs: ``device`` (auto, cpu, cuda), ``precision`` (auto, fp32, bf16: the autocast dtype of a
    transformer), ``threads`` (torch's intra-op threads; runtime only, never in params; None = leave torch's count
    as it is, for a caller outside a job: a job always has its rule's) and ``deterministic`` (deterministic CUDA
    kernels). ``device`` and ``precision`` were in the first params format (the autocast
    dtype changes the arithmetic), so they stay in params; ``deterministic`` only while true."""

    device: str = knob("auto")
    precision: str = knob("auto")
    threads: int | None = knob(None, params=False)
    deterministic: bool = knob(False, added=True)

    @classmethod
    def of_section(cls, section: Mapping[str, Any], threads: int | None = None) -> Runtime:
        """The runtime of a job configured by a config section or a rule's knobs (``device``, ``precision``,
        ``deterministic``; each absent one its default) and run on ``threads``."""
        return cls(device=section.get("device", "auto"), precision=section.get("precision", "auto"),
                   threads=threads, deterministic=bool(section.get("deterministic", False)))


__all__ = ["Evaluation", "FitSpec", "Objective", "RankerSpec", "Runtime", "knob"]

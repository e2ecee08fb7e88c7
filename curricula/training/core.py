"""One training core for every model the pipeline trains: the ranker, the teacher, the bi-encoder, each active fit.

A caller says what one step's loss is (``step_loss(step) -> tensor``: draw the step's batch, run the model, reduce
the loss) and, if the model is selected on dev, what one evaluation is (``evaluate(step) -> {"value": ...}``);
:func:`fit` owns everything else, once:

* the optimiser (Adam or AdamW over the trainable parameters, the fused kernel where asked) and the learning-rate
  schedule: ``linear``, a linear warm-up over ``round(warmup * steps)`` steps then linear decay to 0 at ``steps``
  (:func:`warmup_steps`, the schedule of BERT fine-tuning that Penha & Hauff and MacAvaney et al. use), or
  ``constant``, the peak rate at every step with no warm-up (MacAvaney et al.'s ConvKNRM: Adam at 1e-3);
* the steps themselves (zero_grad, backward, optional gradient-norm clipping, optimiser and schedule step), with a
  progress bar and per-step losses;
* dev evaluation every ``eval_every`` steps and after the last, the best-on-dev weights kept and restored at the
  end (model selection on dev: MacAvaney et al. 2020 §4 roll back to the best validation model), and early
  stopping after ``patience`` evaluations without improvement (MacAvaney et al.: 15 iterations);
* optionally an average of the weights (:class:`WeightAverage`: an exponential moving average, or SWA's uniform
  average of the weights at each evaluation), started only after step ``average_from`` (a grid's longest curriculum)
  so that every arm averages the same phase of training; dev evaluations then evaluate the averaged weights, and
  the averaged weights of the kept evaluation are the model;
* checkpoints every ``checkpoint_every`` steps (model, optimiser, schedule, torch RNG, the curve, the best weights,
  the weight average and the caller's own sampler state) from which a killed job resumes and ends with the same
  weights.

Resuming is exact when the caller's batches are a pure function of (seed, step), or when the caller hands its
sampler state to the checkpoint (``sampler_state`` / ``restore_sampler``). Checkpoints are plain tensors and
containers, loaded with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from curricula.plumbing.contracts import SHADOW_KEYS, SHADOW_KINDS
from curricula.training.checks import averages, check_keep, check_min_steps

log = logging.getLogger(__name__)

OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("constant", "linear")
#: weight averaging (:class:`WeightAverage`): none (the trained weights themselves), ema, swa (the averages whose
#: shadow columns the dev curve's contract allows, :data:`curricula.plumbing.contracts.SHADOW_KINDS`)
AVERAGING = ("none", *SHADOW_KINDS)
#: the EMA's decay per step when a spec names none (a window of about 1 / (1 - 0.999) = 1,000 steps)
DEFAULT_EMA_DECAY = 0.999
#: which weights a run keeps (:attr:`FitConfig.keep`): its best dev evaluation's, or those after its last step
KEEP = ("best", "last")


@dataclass(frozen=True)
class FitConfig:
    """The knobs of one training run. ``steps`` optimiser updates (one batch each); ``lr`` peak learning rate.

    ``steps`` is the budget: training ends there unless ``patience`` (0 = off) evaluations in a row fail to beat
    the best dev value first. Only evaluations after step ``min_steps`` count (a curriculum's length; for the train
    jobs of a grid, its longest curriculum: the model gets ``patience`` evaluations on all the data before it may
    stop), though the rollback may still pick an earlier best evaluation. ``schedule`` is the learning rate's
    course (:func:`schedule_factor`): ``linear`` (warm-up, then decay to 0 at ``steps``) or ``constant`` (``lr`` at
    every step, whatever the budget); ``warmup`` is the fraction of ``steps`` with a linear warm-up (ignored under
    ``constant``); ``clip_norm`` (None = off) clips the gradient's global L2 norm; ``eval_every`` /
    ``checkpoint_every`` are in steps (0 = never);
    ``fused`` uses torch's fused Adam kernel (same update rule, about 4x faster on CPU for large embedding tables,
    different last float bits).

    ``averaging`` (:data:`AVERAGING`; :class:`WeightAverage`) evaluates and keeps an average of the weights instead
    of the weights themselves: ``ema`` updates an exponential moving average with ``ema_decay`` (per step, in
    (0, 1)) after every step, ``swa`` a uniform average at every evaluation step (every ``eval_every`` steps and the
    last); both take in only the weights after step ``average_from`` and later (steps done, at most ``steps``).
    ``none`` (the default) trains exactly as before averaging existed.

    ``keep`` (:data:`KEEP`) is which weights a run ends with: ``best`` (the default) the weights of its best dev
    evaluation, ``last`` those after its last step (the average there, with ``averaging``), with no selection on
    dev; dev evaluations still draw the curve. ``last`` needs ``patience`` off: early stopping selects on dev too.

    ``shadow_averages`` (kinds of :data:`AVERAGING` other than ``none``, each at most once; a diagnostic, issue 45)
    keeps such averages of the trained weights beside them from the same ``average_from`` and with the same
    ``ema_decay``, and evaluates each at every evaluation into the curve columns ``<kind>_<key>`` (e.g.
    ``ema_value``); they train nothing, select nothing and are never kept, so one run yields the curve a run with
    ``averaging: <kind>`` would have recorded (the trajectory is the same: an average never feeds back into it).
    """

    steps: int
    lr: float
    optimizer: str = "adamw"
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup: float = 0.1
    schedule: str = "linear"
    clip_norm: float | None = None
    eval_every: int = 0
    checkpoint_every: int = 0
    fused: bool = False
    patience: int = 0
    min_steps: int = 0
    averaging: str = "none"
    ema_decay: float = DEFAULT_EMA_DECAY
    average_from: int = 0
    shadow_averages: tuple[str, ...] = ()
    keep: str = "best"

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps={self.steps}: expected >= 1")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr}: expected > 0")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer {self.optimizer!r}: expected one of {list(OPTIMIZERS)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule {self.schedule!r}: expected one of {list(SCHEDULES)}")
        if not 0 <= self.warmup <= 1:
            raise ValueError(f"warmup={self.warmup}: expected a fraction of the steps in [0, 1]")
        if self.eval_every < 0 or self.checkpoint_every < 0 or self.patience < 0:
            raise ValueError(f"eval_every={self.eval_every}, checkpoint_every={self.checkpoint_every}, "
                             f"patience={self.patience}: expected >= 0")
        if not 0 <= self.min_steps <= self.steps:
            raise ValueError(f"min_steps={self.min_steps}: expected between 0 and steps={self.steps}")
        if self.patience and not self.eval_every:
            raise ValueError(f"patience={self.patience} counts dev evaluations: set eval_every too")
        if self.averaging not in AVERAGING:
            raise ValueError(f"averaging {self.averaging!r}: expected one of {list(AVERAGING)}")
        if not 0 < self.ema_decay < 1:
            raise ValueError(f"ema_decay={self.ema_decay}: expected a decay per step in (0, 1)")
        if not 0 <= self.average_from <= self.steps:
            raise ValueError(f"average_from={self.average_from}: expected between 0 and steps={self.steps}")
        if self.keep not in KEEP:
            raise ValueError(f"keep {self.keep!r}: expected one of {list(KEEP)}")
        check_keep(self.keep, self.patience)
        shadows = list(self.shadow_averages)
        if any(kind not in AVERAGING[1:] for kind in shadows) or len(set(shadows)) != len(shadows):
            raise ValueError(f"shadow_averages {shadows}: expected distinct kinds among {list(AVERAGING[1:])}")
        if shadows and self.averaging != "none":
            raise ValueError(f"shadow_averages {shadows} beside averaging {self.averaging!r}: the shadows replay "
                             f"averaging runs from one run of the trained weights; set averaging none")

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], length: int | None = None, **overrides: Any) -> FitConfig:
        """The run of a resolved ranker spec (config ``train`` / an experiment; fused Adam, as the ranker uses).

        The budget is ``max_steps`` (null = ``steps``); with ``patience`` (null = off) evaluations count only after
        the curriculum's ``length`` (default ``steps``; :func:`budget`). ``schedule`` is the spec's when present
        (a spec resolved by :func:`curricula.experiments.specs.resolve_ranker` always has one), else ``linear``. A spec's
        ``averaging`` (absent = ``none``) starts after the same ``length`` (:func:`average_start`), with its
        ``ema_decay`` (absent = :data:`DEFAULT_EMA_DECAY`)."""
        total, least = budget(spec, length)
        knobs = {"steps": total, "lr": float(spec["lr"]), "optimizer": spec["optimizer"],
                 "eps": float(spec["eps"]), "weight_decay": float(spec["weight_decay"]),
                 "warmup": float(spec["warmup"]), "schedule": spec.get("schedule") or "linear",
                 "eval_every": int(spec["eval_every"]),
                 "checkpoint_every": int(spec.get("checkpoint_every") or 0), "fused": True,
                 "patience": int(spec.get("patience") or 0), "min_steps": least,
                 "averaging": spec.get("averaging") or "none",
                 "ema_decay": float(spec.get("ema_decay") or DEFAULT_EMA_DECAY),
                 "average_from": average_start(spec, length),
                 "shadow_averages": tuple(spec.get("diagnostic_averages") or ()),
                 "keep": spec.get("keep") or "best"}
        return cls(**{**knobs, **overrides})


def budget(spec: Mapping[str, Any], length: int | None = None) -> tuple[int, int]:
    """(budget, least) in steps of a ranker spec: ``max_steps`` (null = ``steps``) and the step after which early
    stopping counts evaluations (the curriculum's ``length``, default ``steps``, capped at the budget, when
    ``patience`` is on; else 0).

    A ``max_steps`` below ``steps`` would cut the curriculum short, and with ``patience`` a spec's ``min_steps``
    (the grid's longest curriculum, :func:`curricula.experiments.specs.experiment_runs`) above the budget would leave
    early stopping nothing to count: ValueError for both."""
    total = total_steps(spec)
    if not spec.get("patience"):
        return total, 0
    return total, phase_end(spec, total, length)


def total_steps(spec: Mapping[str, Any]) -> int:
    """A ranker spec's budget in steps: ``max_steps`` (null = ``steps``); ValueError when below ``steps`` (it would
    cut the curriculum short)."""
    steps = int(spec["steps"])
    total = int(spec.get("max_steps") or steps)
    if total < steps:
        raise ValueError(f"max_steps={total} is below steps={steps}: the budget must cover the curriculum")
    return total


def phase_end(spec: Mapping[str, Any], total: int, length: int | None = None) -> int:
    """The step (steps done) at which the curriculum phase of a spec with budget ``total`` ends: its ``length``
    (default ``steps``; the pipeline passes the grid's longest curriculum, ``min_steps``), capped at the budget.
    ValueError when the spec's ``min_steps`` lies above the budget (:func:`check_min_steps`)."""
    check_min_steps(spec.get("min_steps"), total)
    return min(total, int(spec["steps"]) if length is None else int(length))


def average_start(spec: Mapping[str, Any], length: int | None = None) -> int:
    """The step (steps done) after which a spec's weight average takes weights in: the end of the curriculum phase
    (:func:`phase_end`; the pipeline's ``min_steps``, the grid's longest curriculum, so that every arm averages
    the same phase of training, never one arm's easy-only data), 0 without ``averaging`` or the diagnostic
    ``diagnostic_averages`` (:attr:`FitConfig.shadow_averages`), which start at the same step.

    Izmailov et al. 2018 ("Averaging Weights Leads to Wider Optima and Better Generalization", UAI) start SWA
    after a burn-in of ordinary training; starting at the longest curriculum's end is that burn-in here."""
    if not averages(spec) and not spec.get("diagnostic_averages"):
        return 0
    return phase_end(spec, total_steps(spec), length)


def warmup_steps(warmup: float, steps: int) -> int:
    """Steps of linear warm-up: ``round(warmup * steps)`` (``warmup`` a fraction of ``steps``, in [0, 1])."""
    return int(round(warmup * steps))


def linear_schedule_factor(step: int, warm: int, steps: int) -> float:
    """The learning-rate multiplier at 0-based ``step``: ``step / warm`` during warm-up, then linear decay to 0.

    The schedule of ``transformers.get_linear_schedule_with_warmup``: 0 at step 0 when there is a warm-up, 1 at
    ``warm``, 0 at ``steps``.
    """
    if step < warm:
        return step / max(1, warm)
    return max(0.0, (steps - step) / max(1, steps - warm))


def schedule_factor(schedule: str, step: int, warm: int, steps: int) -> float:
    """The learning-rate multiplier of ``schedule`` at 0-based ``step``: 1.0 at every step for ``constant`` (no
    warm-up: ``warm`` and ``steps`` are ignored), :func:`linear_schedule_factor` for ``linear``."""
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return linear_schedule_factor(step, warm, steps)
    raise ValueError(f"schedule {schedule!r}: expected one of {list(SCHEDULES)}")


def make_optimizer(params, cfg: FitConfig) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """Adam/AdamW over ``params`` with ``cfg.schedule`` (:func:`schedule_factor`) as a LambdaLR, constant included,
    so every checkpoint holds the same optimiser and scheduler state."""
    params = [p for p in params if p.requires_grad]
    cls = torch.optim.AdamW if cfg.optimizer == "adamw" else torch.optim.Adam
    optim = cls(params, lr=cfg.lr, eps=cfg.eps, weight_decay=cfg.weight_decay, fused=cfg.fused or None)
    warm = warmup_steps(cfg.warmup, cfg.steps)
    schedule, steps = cfg.schedule, cfg.steps
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: schedule_factor(schedule, step, warm, steps))
    return optim, sched


def frozen_names(module: torch.nn.Module) -> frozenset[str]:
    """State-dict keys of the parameters training never changes (``requires_grad`` False, e.g. frozen embeddings)."""
    return frozenset(name for name, p in module.named_parameters() if not p.requires_grad)


def state_dict_cpu(module: torch.nn.Module, skip: frozenset[str] = frozenset()) -> dict[str, torch.Tensor]:
    """A detached CPU copy of the module's weights but ``skip`` (what rollback and checkpoints keep: a frozen
    30522 x 384 embedding table is the same at every step, so copying it would only cost time and disk)."""
    return {k: v.detach().to("cpu").clone() for k, v in module.state_dict().items() if k not in skip}


def load_weights(module: torch.nn.Module, state: Mapping[str, torch.Tensor], skip: frozenset[str]) -> None:
    """Load a :func:`state_dict_cpu` copy: every key but the frozen ones must be present, and nothing else."""
    result = module.load_state_dict(state, strict=False)
    if set(result.missing_keys) - skip or result.unexpected_keys:
        raise RuntimeError(f"weights do not fit the module: missing {sorted(set(result.missing_keys) - skip)}, "
                           f"unexpected {result.unexpected_keys}")


def _save_atomic(obj: Any, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


class Checkpointer:
    """``checkpoint.pt`` in a folder: the whole training state of :func:`fit`, under a fingerprint.

    The folder sits beside the job's outputs, not among them, so Snakemake does not delete it when a job dies.
    A checkpoint whose fingerprint differs from the job's (the configuration changed) is ignored and replaced.
    """

    def __init__(self, folder: str | Path, fingerprint: str):
        self.folder = Path(folder)
        self.fingerprint = fingerprint

    def save(self, state: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        _save_atomic({**state, "fingerprint": self.fingerprint}, self.folder / "checkpoint.pt")

    def load(self) -> dict[str, Any] | None:
        path = self.folder / "checkpoint.pt"
        if not path.exists():
            return None
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("fingerprint") != self.fingerprint:
            log.info("ignoring checkpoint %s: it belongs to another configuration", path)
            return None
        return state

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class WeightAverage:
    """A running average of a module's weights, as a second copy beside the trained ones (on their device).

    ``kind`` ``ema``: an exponential moving average, ``avg <- decay * avg + (1 - decay) * w`` for every weight vector
    it is given (one per step in :func:`fit`): the exponentially weighted form of iterate averaging (Polyak &
    Juditsky 1992, "Acceleration of Stochastic Approximation by Averaging", SIAM J. Control Optim. 30(4), average
    the iterates uniformly; a constant ``decay`` forgets the early ones, as torch's ``get_ema_multi_avg_fn``
    (``torch.optim.swa_utils``) and Morales-Brotons et al. 2024, "Exponential Moving Average of Weights in Deep
    Learning", arXiv 2411.18704, do). ``kind`` ``swa``: the uniform average of every weight vector it is given,
    ``avg <- avg + (w - avg) / n`` for the n-th (Izmailov et al. 2018, "Averaging Weights Leads to Wider Optima and
    Better Generalization", UAI, eq. 2, after a burn-in; torch's ``AveragedModel`` default; one per evaluation in
    :func:`fit`). The first weights given become the average. Floating-point entries of the state dict are
    averaged (parameters and float buffers, as ``AveragedModel(use_buffers=True)``); integer buffers are copied;
    ``skip`` (frozen parameters, constant) stays out. ``count`` is how many weight vectors went in.
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
    what a run with that ``averaging`` evaluates then, :func:`fit`)."""
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


@dataclass
class FitResult:
    """What :func:`fit` returns: per-step training losses, the dev curve rows and the best evaluation.

    ``curve`` rows are the ``evaluate`` dicts plus ``step`` (1-based count of steps done) and ``train_loss`` (mean
    loss of the steps since the previous evaluation). ``best_step`` is -1 and ``best_value`` -inf without dev
    evaluation (the final weights are kept). ``stopped`` says why training ended: ``"budget"`` (all ``steps``) or
    ``"patience"`` (early stopping, at step ``len(losses)``).
    """

    losses: list[float] = field(default_factory=list)
    curve: list[dict[str, Any]] = field(default_factory=list)
    best_step: int = -1
    best_value: float = -math.inf
    seconds: float = 0.0
    stopped: str = "budget"

    def evaluations_since_best(self, min_steps: int = 0) -> int:
        """Dev evaluations after the best one and after step ``min_steps`` (what ``patience`` counts)."""
        return sum(1 for row in self.curve if row["step"] > max(self.best_step, min_steps))


def fit(
    module: torch.nn.Module,
    step_loss: Callable[[int], torch.Tensor],
    cfg: FitConfig,
    *,
    seed: int,
    evaluate: Callable[[int], Mapping[str, Any]] | None = None,
    checkpoint: Checkpointer | None = None,
    sampler_state: Callable[[], Any] | None = None,
    restore_sampler: Callable[[Any], None] | None = None,
    on_step: Callable[[int], None] | None = None,
    progress: bool = True,
    desc: str = "train",
) -> FitResult:
    """Train ``module`` for ``cfg.steps`` steps of ``step_loss``; leave it in eval mode with the best-on-dev weights
    (with ``cfg.keep`` ``last``: the weights after the last step).

    ``step_loss(step)`` (0-based step) returns the scalar loss of that step's batch with the module in train mode.
    ``evaluate(done)`` (steps done so far) returns a dict with the dev metric under ``"value"`` (higher = better)
    and any other curve columns; it runs every ``cfg.eval_every`` steps and after the last step, and the weights of
    the best evaluation (the first, on ties) are restored at the end. ``torch.manual_seed(seed)`` is set before the
    first step (dropout masks). With ``checkpoint`` the state is saved every ``cfg.checkpoint_every`` steps and a
    re-run resumes from it; ``sampler_state()`` / ``restore_sampler(state)`` carry the caller's batch sampler
    state when its batches are not a pure function of the step. ``on_step(done)`` runs after every step (tests use
    it to simulate a killed job).

    With ``cfg.averaging`` (:class:`WeightAverage`), once weights after step ``cfg.average_from`` have entered the
    average, every evaluation evaluates the averaged weights (the trained ones are swapped back for the next step),
    the kept weights are the average at the best evaluation, and without ``evaluate`` the final average is kept.
    Evaluations before that evaluate the trained weights, as without averaging.
    """
    t_start = time.time()
    frozen = frozen_names(module)
    optim, sched = make_optimizer(module.parameters(), cfg)
    clip_params = [p for p in module.parameters() if p.requires_grad] if cfg.clip_norm else []
    torch.manual_seed(seed)
    result = FitResult()
    best_state: dict[str, torch.Tensor] | None = None
    average = WeightAverage(cfg.averaging, cfg.ema_decay, frozen) if cfg.averaging != "none" else None
    shadows = {kind: WeightAverage(kind, cfg.ema_decay, frozen) for kind in cfg.shadow_averages}
    start = 0
    state = checkpoint.load() if checkpoint is not None else None
    if state is not None:
        load_weights(module, state["model"], frozen)
        optim.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        if restore_sampler is not None:
            restore_sampler(state["sampler"])
        start = int(state["step"])
        result.losses, result.curve = list(state["losses"]), list(state["curve"])
        result.best_step, result.best_value = int(state["best_step"]), float(state["best_value"])
        best_state = state["best_state"]
        if average is not None:
            average.restore(state["average"], next(module.parameters()).device)
        for kind, shadow in shadows.items():
            shadow.restore(state["shadows"][kind], next(module.parameters()).device)
        log.info("resuming from the checkpoint at step %d of %d (best dev %.4f at step %d)", start, cfg.steps,
                 result.best_value, result.best_step)

    module.train()
    bar = tqdm(range(start, cfg.steps), total=cfg.steps, initial=start, desc=desc, disable=not progress, unit="step",
               mininterval=2.0)
    for step in bar:
        loss = step_loss(step)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(clip_params, cfg.clip_norm)
        optim.step()
        sched.step()
        result.losses.append(float(loss.detach()))
        done = step + 1
        stop = False
        evaluation_step = bool(cfg.eval_every and done % cfg.eval_every == 0) or done == cfg.steps
        for running in ([average] if average is not None else []) + list(shadows.values()):
            if done >= cfg.average_from and (running.kind == "ema" or evaluation_step):
                running.update(module)
        if evaluate is not None and evaluation_step:
            since = result.curve[-1]["step"] if result.curve else 0  # the curve's train_loss: steps since then
            averaged = average is not None and average.state is not None  # evaluate (and keep) the average
            trained = swapped_in(module, average.state, frozen) if averaged else None
            row = {"step": done, **evaluate(done), "train_loss": float(np.mean(result.losses[since:]))}
            if cfg.keep == "best" and row["value"] > result.best_value:
                best_state = state_dict_cpu(module, frozen)
                result.best_step, result.best_value = done, float(row["value"])
            if trained is not None:
                load_weights(module, trained, frozen)
            row.update(shadow_columns(module, shadows, evaluate, done, row, frozen))
            result.curve.append(row)
            bar.set_postfix(dev=f"{row['value']:.4f}", refresh=False)
            log.info("step %d/%d: %s; %.1f s", done, cfg.steps,  # the scalars (a diagnostic's per-query lists: not)
                     ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                               if k != "step" and not isinstance(v, list)), time.time() - t_start)
            module.train()
            stop = bool(cfg.patience) and result.evaluations_since_best(cfg.min_steps) >= cfg.patience
            if stop:
                result.stopped = "patience"
                log.info("stopping at step %d: %d evaluations without improvement on dev (best %.4f at step %d)",
                         done, cfg.patience, result.best_value, result.best_step)
        elif evaluate is None:
            bar.set_postfix(loss=f"{result.losses[-1]:.4f}", refresh=False)
        if (checkpoint is not None and cfg.checkpoint_every and done % cfg.checkpoint_every == 0 and done < cfg.steps
                and not stop):
            checkpoint.save({
                "step": done, "model": state_dict_cpu(module, frozen),
                "optimizer": optim.state_dict(), "scheduler": sched.state_dict(), "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                "sampler": sampler_state() if sampler_state is not None else None,
                "losses": result.losses, "curve": result.curve, "best_step": result.best_step,
                "best_value": result.best_value, "best_state": best_state,
                **({"average": average.checkpoint()} if average is not None else {}),
                **({"shadows": {k: v.checkpoint() for k, v in shadows.items()}} if shadows else {}),
            })
        if on_step is not None:
            on_step(done)
        if stop:
            break
    bar.close()
    if cfg.keep == "last" and result.curve:  # the last evaluation (after the last step) is the kept one
        result.best_step, result.best_value = int(result.curve[-1]["step"]), float(result.curve[-1]["value"])
    if best_state is None and average is not None and average.state is not None:
        best_state = average.state  # no evaluation chose: the final average is the model
    if best_state is not None:
        load_weights(module, best_state, frozen)
    module.eval()
    result.seconds = time.time() - t_start
    if evaluate is not None:
        log.info("best dev %.4f at step %d; stopped by %s at step %d of %d; %.1f s", result.best_value,
                 result.best_step, result.stopped, len(result.losses), cfg.steps, result.seconds)
    return result

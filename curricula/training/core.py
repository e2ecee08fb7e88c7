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
* optionally an average of the weights (:class:`~curricula.training.averaging.WeightAverage`: an exponential moving
  average, or SWA's uniform average of the weights at each evaluation), started only after step ``average_from`` (a
  grid's longest curriculum) so that every arm averages the same phase of training; dev evaluations then evaluate
  the averaged weights, and the averaged weights of the kept evaluation are the model; diagnostic runs install
  shadow averages beside the trained weights (:class:`~curricula.training.averaging.ShadowAverages`);
* checkpoints every ``checkpoint_every`` steps (:class:`~curricula.training.checkpoints.Checkpointer`: model,
  optimiser, schedule, torch RNG, the curve, the best weights, the weight average and the caller's own sampler
  state) from which a killed job resumes and ends with the same weights.

Resuming is exact when the caller's batches are a pure function of (seed, step), or when the caller hands its
sampler state to the checkpoint (``sampler_state`` / ``restore_sampler``). Checkpoints are plain tensors and
containers, loaded with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from curricula.training.averaging import (
    AVERAGING,
    DEFAULT_EMA_DECAY,
    ShadowAverages,
    WeightAverage,
    swapped_in,
    takes_in,
)
from curricula.training.budget import average_start, budget
from curricula.training.checkpoints import Checkpointer, frozen_names, load_weights, state_dict_cpu
from curricula.training.checks import check_keep
from curricula.training.determinism import device_rng_state, restore_device_rng
from curricula.training.spec import FitSpec
from curricula.training.transfer import host_floats

log = logging.getLogger(__name__)

OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("constant", "linear")
#: which weights a run keeps (:attr:`FitConfig.keep`): its best dev evaluation's, or those after its last step
KEEP = ("best", "last")
#: steps between updates of the progress bar's loss in a run without dev evaluations (each update waits for the
#: device: the losses are kept on it until a reader needs them, :meth:`_Run.flush_losses`)
LOSS_POSTFIX_EVERY = 50


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
    def of(cls, fit: FitSpec, length: int | None = None, **overrides: Any) -> FitConfig:
        """The run of a fit (:class:`~curricula.training.spec.FitSpec`; fused Adam, as the ranker uses).

        The budget is ``max_steps`` (null = ``steps``); with ``patience`` (null = off) evaluations count only after
        the curriculum's ``length`` (default ``steps``; :func:`budget`). A fit's ``averaging`` starts after the same
        ``length`` (:func:`average_start`), with its ``ema_decay``."""
        total, least = budget(fit, length)
        knobs = {"steps": total, "lr": float(fit.lr), "optimizer": fit.optimizer, "eps": float(fit.eps),
                 "weight_decay": float(fit.weight_decay), "warmup": float(fit.warmup), "schedule": fit.schedule,
                 "eval_every": fit.eval_every, "checkpoint_every": fit.checkpoint_every, "fused": True,
                 "patience": int(fit.patience or 0), "min_steps": least, "averaging": fit.averaging,
                 "ema_decay": float(fit.ema_decay), "average_from": average_start(fit, length),
                 "shadow_averages": fit.diagnostic_averages, "keep": fit.keep}
        return cls(**{**knobs, **overrides})


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



@dataclass
class _Run:
    """What one :func:`fit` changes as it goes and its checkpoints keep (but the caller's sampler): the optimiser and
    schedule, the result so far, the best dev weights, the weight average and the installed hooks (the diagnostic
    shadow averages, :class:`ShadowAverages`, only when ``cfg.shadow_averages`` names some); ``start`` is the first
    step to run (after a resumed checkpoint's). ``pending`` holds the losses of the steps since the last
    :meth:`flush_losses` as detached tensors on the module's device (no per-step wait for the GPU)."""

    module: torch.nn.Module
    cfg: FitConfig
    frozen: frozenset[str]
    optim: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    clip_params: list[torch.nn.Parameter]
    average: WeightAverage | None
    hooks: list[ShadowAverages]
    result: FitResult = field(default_factory=FitResult)
    best_state: dict[str, torch.Tensor] | None = None
    start: int = 0
    pending: list[torch.Tensor] = field(default_factory=list)

    @classmethod
    def begin(cls, module: torch.nn.Module, cfg: FitConfig, seed: int) -> _Run:
        """A fresh run: the optimiser and schedule (:func:`make_optimizer`), ``torch.manual_seed(seed)``, an empty
        weight average with ``cfg.averaging`` and the shadow-average hook with ``cfg.shadow_averages``."""
        frozen = frozen_names(module)
        optim, sched = make_optimizer(module.parameters(), cfg)
        clip_params = [p for p in module.parameters() if p.requires_grad] if cfg.clip_norm else []
        torch.manual_seed(seed)
        average = WeightAverage(cfg.averaging, cfg.ema_decay, frozen) if cfg.averaging != "none" else None
        hooks = [ShadowAverages(cfg.shadow_averages, cfg.ema_decay, cfg.average_from, frozen)
                 ] if cfg.shadow_averages else []
        return cls(module, cfg, frozen, optim, sched, clip_params, average, hooks)

    def restore(self, saved: Mapping[str, Any], restore_sampler: Callable[[Any], None] | None) -> None:
        """Resume from a checkpoint of :meth:`snapshot`: weights, optimiser, schedule, RNGs, the caller's sampler,
        the result so far, the best weights, the average and the hooks' state."""
        load_weights(self.module, saved["model"], self.frozen)
        self.optim.load_state_dict(saved["optimizer"])
        self.sched.load_state_dict(saved["scheduler"])
        device = next(self.module.parameters()).device
        torch.set_rng_state(saved["torch_rng"])
        restore_device_rng(device, saved["cuda_rng"])
        if restore_sampler is not None:
            restore_sampler(saved["sampler"])
        self.start, result = int(saved["step"]), self.result
        result.losses, result.curve = list(saved["losses"]), list(saved["curve"])
        result.best_step, result.best_value = int(saved["best_step"]), float(saved["best_value"])
        self.best_state = saved["best_state"]
        if self.average is not None:
            self.average.restore(saved["average"], device)
        for hook in self.hooks:
            hook.restore(saved, device)
        log.info("resuming from the checkpoint at step %d of %d (best dev %.4f at step %d)", self.start,
                 self.cfg.steps, result.best_value, result.best_step)

    def take_step(self, loss: torch.Tensor) -> None:
        """One optimiser update on ``loss``: zero_grad, backward, optional gradient-norm clipping, optimiser and
        schedule step; the loss (detached, on its device) joins :attr:`pending`."""
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.clip_norm:
            torch.nn.utils.clip_grad_norm_(self.clip_params, self.cfg.clip_norm)
        self.optim.step()
        self.sched.step()
        self.pending.append(loss.detach())

    def flush_losses(self) -> list[float]:
        """``result.losses`` with :attr:`pending` appended as floats, all with one device-to-host copy
        (:func:`host_floats`; each exactly ``float(loss)``): what the curve, the log, a checkpoint and the end read."""
        if self.pending:
            self.result.losses.extend(host_floats(self.pending))
            self.pending.clear()
        return self.result.losses

    def evaluation_step(self, done: int) -> bool:
        """Whether the run evaluates after ``done`` steps: every ``eval_every`` steps and after the last."""
        return bool(self.cfg.eval_every and done % self.cfg.eval_every == 0) or done == self.cfg.steps

    def after_step(self, done: int, evaluation_step: bool) -> None:
        """The weight average and the hooks take in the weights after ``done`` steps (:func:`takes_in`)."""
        if self.average is not None and takes_in(self.average, done, self.cfg.average_from, evaluation_step):
            self.average.update(self.module)
        for hook in self.hooks:
            hook.after_step(self.module, done, evaluation_step)

    def evaluate(self, evaluate: Callable[[int], Mapping[str, Any]], done: int) -> dict[str, Any]:
        """The curve row after ``done`` steps: ``evaluate(done)`` of the average once it holds weights (else of the
        trained weights, swapped back after), ``train_loss`` the mean loss since the previous row, and the hooks'
        columns; a better dev value than the best so far (with ``keep`` ``best``) keeps the evaluated weights."""
        result, module = self.result, self.module
        since = result.curve[-1]["step"] if result.curve else 0  # the curve's train_loss: steps since then
        averaged = None if self.average is None else self.average.state  # evaluate (and keep) the average, if any
        trained = swapped_in(module, averaged, self.frozen) if averaged is not None else None
        row = {"step": done, **evaluate(done), "train_loss": float(np.mean(self.flush_losses()[since:]))}
        if self.cfg.keep == "best" and row["value"] > result.best_value:
            self.best_state = state_dict_cpu(module, self.frozen)
            result.best_step, result.best_value = done, float(row["value"])
        if trained is not None:
            load_weights(module, trained, self.frozen)
        for hook in self.hooks:
            row.update(hook.columns(module, evaluate, done, row))
        result.curve.append(row)
        return row

    def patience_spent(self, done: int) -> bool:
        """Whether ``cfg.patience`` evaluations after ``cfg.min_steps`` failed to beat the best (early stopping:
        ``result.stopped`` becomes ``patience``)."""
        cfg, result = self.cfg, self.result
        if not cfg.patience or result.evaluations_since_best(cfg.min_steps) < cfg.patience:
            return False
        result.stopped = "patience"
        log.info("stopping at step %d: %d evaluations without improvement on dev (best %.4f at step %d)",
                 done, cfg.patience, result.best_value, result.best_step)
        return True

    def observe(self, done: int, evaluate: Callable[[int], Mapping[str, Any]] | None, bar: Any,
                t_start: float) -> bool:
        """After step ``done``: update the averages, evaluate on dev when due (the progress bar and the log show
        it), and say whether the patience ran out (the loop stops). Without ``evaluate`` the bar shows the last loss
        every :data:`LOSS_POSTFIX_EVERY` steps and after the last."""
        evaluation_step = self.evaluation_step(done)
        self.after_step(done, evaluation_step)
        if evaluate is None:
            if done % LOSS_POSTFIX_EVERY == 0 or done == self.cfg.steps:
                bar.set_postfix(loss=f"{self.flush_losses()[-1]:.4f}", refresh=False)
            return False
        if not evaluation_step:
            return False
        row = self.evaluate(evaluate, done)
        bar.set_postfix(dev=f"{row['value']:.4f}", refresh=False)
        log_evaluation(row, self.cfg.steps, t_start)
        self.module.train()
        return self.patience_spent(done)

    def checkpoint_due(self, done: int, stop: bool) -> bool:
        """Whether a checkpoint is saved after ``done`` steps: every ``checkpoint_every``, never after the last
        step or an early stop (the job ends there)."""
        every = self.cfg.checkpoint_every
        return bool(every and done % every == 0 and done < self.cfg.steps and not stop)

    def snapshot(self, done: int, sampler_state: Callable[[], Any] | None) -> dict[str, Any]:
        """The whole training state after ``done`` steps, as a checkpoint keeps it (CPU tensors and containers):
        the RNG states are the CPU's and, on CUDA, that of the module's card alone (:func:`device_rng_state`)."""
        result, losses = self.result, self.flush_losses()
        return {
            "step": done, "model": state_dict_cpu(self.module, self.frozen),
            "optimizer": self.optim.state_dict(), "scheduler": self.sched.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": device_rng_state(next(self.module.parameters()).device),
            "sampler": sampler_state() if sampler_state is not None else None,
            "losses": losses, "curve": result.curve, "best_step": result.best_step,
            "best_value": result.best_value, "best_state": self.best_state,
            **({"average": self.average.checkpoint()} if self.average is not None else {}),
            **{key: value for hook in self.hooks for key, value in hook.checkpoint().items()},
        }

    def finish(self) -> None:
        """Load the kept weights (the best evaluation's; with ``keep`` ``last`` or without evaluations the last
        weights, or the final average), convert the pending losses and put the module in eval mode."""
        self.flush_losses()
        cfg, result, best_state = self.cfg, self.result, self.best_state
        if cfg.keep == "last" and result.curve:  # the last evaluation (after the last step) is the kept one
            result.best_step, result.best_value = int(result.curve[-1]["step"]), float(result.curve[-1]["value"])
        if best_state is None and self.average is not None and self.average.state is not None:
            best_state = self.average.state  # no evaluation chose: the final average is the model
        if best_state is not None:
            load_weights(self.module, best_state, self.frozen)
        self.module.eval()


def log_evaluation(row: Mapping[str, Any], steps: int, t_start: float) -> None:
    """Log a curve row's scalars (a diagnostic's per-query lists: not) and the seconds since ``t_start``."""
    log.info("step %d/%d: %s; %.1f s", row["step"], steps,
             ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()
                       if k != "step" and not isinstance(v, list)), time.time() - t_start)


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
    run = _Run.begin(module, cfg, seed)
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is not None:
        run.restore(saved, restore_sampler)
    result = run.result
    module.train()
    bar = tqdm(range(run.start, cfg.steps), total=cfg.steps, initial=run.start, desc=desc, disable=not progress,
               unit="step", mininterval=2.0)
    for step in bar:
        run.take_step(step_loss(step))
        done = step + 1
        stop = run.observe(done, evaluate, bar, t_start)
        if checkpoint is not None and run.checkpoint_due(done, stop):
            checkpoint.save(run.snapshot(done, sampler_state))
        if on_step is not None:
            on_step(done)
        if stop:
            break
    bar.close()
    run.finish()
    result.seconds = time.time() - t_start
    if evaluate is not None:
        log.info("best dev %.4f at step %d; stopped by %s at step %d of %d; %.1f s", result.best_value,
                 result.best_step, result.stopped, len(result.losses), cfg.steps, result.seconds)
    return result

"""The training core (curricula.training.core, .budget, .checkpoints): schedule, optimiser steps, dev selection with
rollback, patience and the budget, resume (weight averages: tests/test_averaging.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import get_linear_schedule_with_warmup

from curricula.experiments.spec import parse_train_spec
from curricula.experiments.specs import resolve_ranker
from curricula.training.budget import budget
from curricula.training.checkpoints import Checkpointer
from curricula.training.core import (
    FitConfig,
    fit,
    linear_schedule_factor,
    make_optimizer,
    schedule_factor,
    warmup_steps,
)
from curricula.training.spec import FitSpec
from tests.toy_fit import SPEC, Killed, averaging_fit, batch_loss, full_loss, model, same, weights


@pytest.mark.parametrize("steps,warmup", [(10, 0.1), (8, 0.1), (7, 0.0), (20, 0.35), (5, 1.0)])
def test_schedule_is_transformers_linear_warmup(steps, warmup):
    warm = warmup_steps(warmup, steps)
    assert warm == round(warmup * steps)
    ours, _ = make_optimizer(torch.nn.Linear(2, 1).parameters(), FitConfig(steps=steps, lr=1.0, warmup=warmup))
    ref = torch.optim.AdamW(torch.nn.Linear(2, 1).parameters(), lr=1.0)
    ref_sched = get_linear_schedule_with_warmup(ref, warm, steps)
    for step in range(steps):
        assert linear_schedule_factor(step, warm, steps) == ref_sched.lr_lambdas[0](step)
        assert schedule_factor("linear", step, warm, steps) == ref_sched.lr_lambdas[0](step)


def stepped_rates(cfg: FitConfig, steps: int) -> list[float]:
    """The learning rate the optimiser of :func:`make_optimizer` applies at each of ``steps`` optimiser steps."""
    net = torch.nn.Linear(2, 1)
    optim, sched = make_optimizer(net.parameters(), cfg)
    rates = []
    for _ in range(steps):
        rates.append(optim.param_groups[0]["lr"])
        net(torch.ones(1, 2)).sum().backward()
        optim.step()
        sched.step()
    return rates


def test_constant_schedule_keeps_the_peak_rate_at_every_step_and_ignores_warmup():
    # MacAvaney et al. 2020 §4 (OpenNIR): ConvKNRM trains with a constant Adam rate of 1e-3, whatever the budget
    cfg = FitConfig(steps=40, lr=1e-3, optimizer="adam", warmup=0.25, schedule="constant")
    rates = stepped_rates(cfg, 40)
    assert rates[0] == rates[1] == rates[20] == rates[39] == 1e-3
    assert all(rate == 1e-3 for rate in rates)
    _, sched = make_optimizer(torch.nn.Linear(2, 1).parameters(), cfg)
    assert isinstance(sched, torch.optim.lr_scheduler.LambdaLR)  # checkpoints keep the scheduler's layout
    assert [schedule_factor("constant", s, 10, 40) for s in (0, 1, 39, 40, 500)] == [1.0] * 5
    # the linear schedule of the same knobs warms up from 0 and decays: its rate depends on the step and the budget
    linear = stepped_rates(FitConfig(steps=40, lr=1e-3, optimizer="adam", warmup=0.25), 40)
    assert linear[0] == 0.0 and linear[10] == pytest.approx(1e-3) and linear[39] == pytest.approx(1e-3 / 30)
    with pytest.raises(ValueError, match="schedule 'cosine'"):
        schedule_factor("cosine", 0, 0, 10)


def test_fit_equals_a_bare_torch_loop():
    """Same weights, bit for bit, as the hand-written loop the core replaced (AdamW, clipping, HF schedule)."""
    cfg = FitConfig(steps=12, lr=0.05, optimizer="adamw", weight_decay=0.01, warmup=0.25, clip_norm=1.0)
    rng = np.random.default_rng(3)
    rows = [rng.choice(64, 8) for _ in range(cfg.steps)]

    ref = model()
    optim = torch.optim.AdamW(ref.parameters(), lr=cfg.lr, eps=cfg.eps, weight_decay=cfg.weight_decay)
    sched = get_linear_schedule_with_warmup(optim, warmup_steps(cfg.warmup, cfg.steps), cfg.steps)
    torch.manual_seed(5)
    ref.train()
    ref_losses = []
    for step in range(cfg.steps):
        loss = batch_loss(ref, rows[step])
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(ref.parameters()), cfg.clip_norm)
        optim.step()
        sched.step()
        ref_losses.append(float(loss.detach()))

    net = model()
    result = fit(net, lambda step: batch_loss(net, rows[step]), cfg, seed=5, progress=False)
    assert result.losses == ref_losses
    assert all(torch.equal(a, b) for a, b in zip(weights(net), weights(ref)))
    assert not net.training and result.curve == [] and result.best_step == -1


def test_rollback_restores_the_best_dev_weights_and_records_the_curve():
    net = model()
    dev = iter([0.2, 0.5, 0.4, 0.5])  # best at the 2nd evaluation; a later tie does not replace it
    snapshots = {}
    cfg = FitConfig(steps=8, lr=0.05, eval_every=2)
    result = fit(net, lambda step: batch_loss(net, np.arange(step, step + 8)), cfg, seed=1, progress=False,
                 evaluate=lambda done: {"value": next(dev), "metric": "AP"},
                 on_step=lambda done: snapshots.__setitem__(done, weights(net)))
    assert [r["step"] for r in result.curve] == [2, 4, 6, 8]
    assert [r["value"] for r in result.curve] == [0.2, 0.5, 0.4, 0.5]
    assert result.curve[0]["metric"] == "AP"
    np.testing.assert_allclose(result.curve[1]["train_loss"], np.mean(result.losses[2:4]))
    assert (result.best_step, result.best_value) == (4, 0.5)
    assert all(torch.equal(a, b) for a, b in zip(weights(net), snapshots[4]))
    assert not all(torch.equal(a, b) for a, b in zip(snapshots[4], snapshots[8]))


def test_keep_last_ends_with_the_weights_after_the_last_step_and_marks_that_evaluation():
    net = model()
    dev = iter([0.2, 0.5, 0.4, 0.3])  # the best is the 2nd evaluation; keep last ignores it
    snapshots = {}
    result = fit(net, lambda step: batch_loss(net, np.arange(step, step + 8)), FitConfig(steps=8, lr=0.05,
                 eval_every=2, keep="last"), seed=1, progress=False, evaluate=lambda done: {"value": next(dev)},
                 on_step=lambda done: snapshots.__setitem__(done, weights(net)))
    assert (result.best_step, result.best_value) == (8, 0.3)
    assert all(torch.equal(a, b) for a, b in zip(weights(net), snapshots[8]))
    # the same run keeping its best evaluation: the same training, another kept model
    best = model()
    dev = iter([0.2, 0.5, 0.4, 0.3])
    kept = fit(best, lambda step: batch_loss(best, np.arange(step, step + 8)), FitConfig(steps=8, lr=0.05,
               eval_every=2), seed=1, progress=False, evaluate=lambda done: {"value": next(dev)})
    assert kept.losses == result.losses and kept.best_step == 4
    # with an average, the average after the last step is kept
    net, result, trained, seen = averaging_fit("swa", 5, keep="last", falling=True)
    assert result.best_step == 10 and same(net.state_dict(), seen[10])
    assert averaging_fit("swa", 5, falling=True)[1].best_step == 3  # keeping the best: the first evaluation
    with pytest.raises(ValueError, match="keep last with patience=2: early stopping selects"):
        FitConfig(steps=8, lr=0.05, eval_every=2, patience=2, keep="last")
    with pytest.raises(ValueError, match="keep 'first'"):
        FitConfig(steps=8, lr=0.05, keep="first")
    assert FitConfig.of(replace(SPEC, patience=None, keep="last")).keep == "last"
    assert FitConfig.of(SPEC).keep == "best"


def test_the_last_step_is_always_evaluated():
    net = model()
    result = fit(net, lambda step: batch_loss(net, np.arange(8)), FitConfig(steps=5, lr=0.01, eval_every=2),
                 seed=0, progress=False, evaluate=lambda done: {"value": float(done)})
    assert [r["step"] for r in result.curve] == [2, 4, 5] and result.best_step == 5


def run(tmp_path, kill_at: int | None = None):
    """A fit whose batches come from a sequential numpy RNG (state handed to the checkpoint), dropout on."""
    net = model()
    rng = np.random.default_rng(11)
    cfg = FitConfig(steps=9, lr=0.05, eval_every=3, checkpoint_every=2, fused=True)

    def stop(done: int) -> None:
        if done == kill_at:
            raise Killed

    def restore(state) -> None:
        rng.bit_generator.state = state

    result = fit(net, lambda step: batch_loss(net, rng.choice(64, 8)), cfg, seed=2, progress=False,
                 evaluate=lambda done: {"value": -full_loss(net)},
                 checkpoint=Checkpointer(tmp_path / "ckpt", "abc"), sampler_state=lambda: rng.bit_generator.state,
                 restore_sampler=restore, on_step=stop)
    return net, result


def test_a_killed_fit_resumes_to_the_uninterrupted_weights(tmp_path):
    whole, expected = run(tmp_path / "a")
    with pytest.raises(Killed):
        run(tmp_path / "b", kill_at=5)
    state = torch.load(tmp_path / "b" / "ckpt" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 4 and [r["step"] for r in state["curve"]] == [3]
    resumed, result = run(tmp_path / "b")
    assert result.losses == expected.losses and result.curve == expected.curve
    assert result.best_step == expected.best_step
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed), weights(whole)))


def test_a_checkpoint_with_another_fingerprint_is_ignored(tmp_path):
    Checkpointer(tmp_path, "old").save({"step": 3})
    assert Checkpointer(tmp_path, "new").load() is None
    assert Checkpointer(tmp_path, "old").load()["step"] == 3


@pytest.mark.parametrize("knobs", [{"steps": 0}, {"lr": 0.0}, {"optimizer": "sgd"}, {"warmup": 1.5},
                                   {"eval_every": -1}, {"schedule": "cosine"}])
def test_bad_knobs_are_clear_errors(knobs):
    with pytest.raises(ValueError):
        FitConfig(**{"steps": 3, "lr": 0.1, **knobs})


DEV_BY_STEP = {2: 0.2, 4: 0.5, 6: 0.4, 8: 0.6, 10: 0.5, 12: 0.55, 14: 0.9, 16: 0.1}


def patient_fit(net, tmp_path=None, kill_at=None, patience=2, snapshots=None, min_steps=0):
    """Evaluations every 2 steps read DEV_BY_STEP (a pure function of the step, so a resumed fit sees the same)."""
    def hook(done: int) -> None:
        if snapshots is not None:
            snapshots[done] = weights(net)
        if done == kill_at:
            raise Killed

    cfg = FitConfig(steps=16, lr=0.05, eval_every=2, checkpoint_every=3, patience=patience, min_steps=min_steps)
    return fit(net, lambda step: batch_loss(net, np.arange(step, step + 8) % 64), cfg, seed=4, progress=False,
               evaluate=lambda done: {"value": DEV_BY_STEP[done]}, on_step=hook,
               checkpoint=Checkpointer(tmp_path, "p") if tmp_path is not None else None)


def test_patience_stops_after_evaluations_without_improvement_and_rolls_back():
    net, snapshots = model(), {}
    result = patient_fit(net, snapshots=snapshots)
    # best 0.6 at step 8; 0.5 (step 10) and 0.55 (step 12) do not beat it: stop at step 12, never see step 14's 0.9
    assert result.stopped == "patience" and len(result.losses) == 12
    assert [r["step"] for r in result.curve] == [2, 4, 6, 8, 10, 12] and result.best_step == 8
    assert all(torch.equal(a, b) for a, b in zip(weights(net), snapshots[8]))
    assert result.evaluations_since_best() == 2
    longer = patient_fit(model(), patience=3)  # step 14's 0.9 resets the count; the budget ends it at 16
    assert longer.stopped == "budget" and len(longer.losses) == 16 and longer.best_step == 14
    budget = patient_fit(model(), patience=0)
    assert budget.stopped == "budget" and len(budget.losses) == 16 and budget.best_step == 14


def test_a_killed_fit_with_patience_resumes_to_the_same_stop_and_weights(tmp_path):
    whole = model()
    expected = patient_fit(whole)
    with pytest.raises(Killed):
        patient_fit(model(), tmp_path, kill_at=10)
    resumed = model()
    result = patient_fit(resumed, tmp_path)
    assert result.stopped == "patience" and result.losses == expected.losses and result.curve == expected.curve
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed), weights(whole)))


def test_patience_counts_only_evaluations_after_the_curriculum():
    # min_steps 9: steps 10 and 12 come after both the best (8) and the curriculum, so the stop stays at 12
    assert len(patient_fit(model(), min_steps=9).losses) == 12
    # min_steps 10: only step 12 counts at step 12, so training goes on to step 14, whose 0.9 is a new best
    late = patient_fit(model(), min_steps=10)
    assert late.best_step == 14 and late.stopped == "budget" and len(late.losses) == 16
    # the rollback still may pick an evaluation inside the curriculum
    net, snapshots = model(), {}
    early = patient_fit(net, snapshots=snapshots, min_steps=4)
    assert early.best_step == 8 and early.stopped == "patience"
    assert all(torch.equal(a, b) for a, b in zip(weights(net), snapshots[8]))


def test_budget_of_a_spec():
    assert budget(FitSpec(steps=600)) == (600, 0)
    assert budget(FitSpec(steps=600, max_steps=None, patience=3)) == (600, 600)
    assert budget(FitSpec(steps=600, max_steps=4000, patience=3)) == (4000, 600)
    assert budget(FitSpec(steps=600, max_steps=4000, patience=None)) == (4000, 0)
    # MacAvaney's weights may end after the pacing (Arm.end): patience waits for that, within the budget
    assert budget(FitSpec(steps=600, max_steps=4000, patience=3), length=640) == (4000, 640)
    assert budget(FitSpec(steps=600, max_steps=700, patience=3), length=3200) == (700, 700)
    assert budget(FitSpec(steps=600, max_steps=4000), length=640) == (4000, 0)
    with pytest.raises(ValueError, match="max_steps=500 is below steps=600"):
        budget(FitSpec(steps=600, max_steps=500))
    cfg = FitConfig.of(SPEC)
    assert (cfg.steps, cfg.min_steps, cfg.patience, cfg.fused, cfg.schedule) == (4000, 600, 3, True, "linear")
    assert FitConfig.of(replace(SPEC, schedule="constant")).schedule == "constant"
    # a null schedule is resolved when the spec is parsed (the ranker's default; the cross-encoder's is linear)
    parsed = parse_train_spec(resolve_ranker({"steps": 600, "max_steps": 4000, "patience": 3, "schedule": None}))
    assert FitConfig.of(parsed.fit).schedule == "linear"
    with pytest.raises(ValueError, match="min_steps"):
        FitConfig(steps=3, lr=0.1, min_steps=4)


def test_a_grids_min_steps_is_the_least_budget_and_may_not_exceed_the_budget():
    # the pipeline's min_steps (the grid's longest curriculum) is the length train.py hands over
    assert budget(replace(SPEC, min_steps=640), length=640) == (4000, 640)
    assert FitConfig.of(replace(SPEC, min_steps=640), length=640).min_steps == 640
    assert budget(replace(SPEC, min_steps=4000), length=4000) == (4000, 4000)
    with pytest.raises(ValueError, match="min_steps=4001 is above max_steps=4000"):
        budget(replace(SPEC, min_steps=4001), length=4001)
    with pytest.raises(ValueError, match="min_steps=640 is above max_steps=600"):  # null max_steps: the budget is steps
        FitConfig.of(replace(SPEC, max_steps=None, min_steps=640), length=640)
    # without patience nothing waits for min_steps: no error, no least
    assert budget(replace(SPEC, patience=None, min_steps=4001), length=4001) == (4000, 0)


def test_patience_needs_evaluations():
    with pytest.raises(ValueError, match="eval_every"):
        FitConfig(steps=3, lr=0.1, patience=2)


def test_frozen_parameters_stay_out_of_checkpoints_and_rollback(tmp_path):
    """A frozen layer is never copied (it cannot change), and a killed fit still resumes to the same weights."""
    def frozen_model():
        net = model()
        first = next(iter(net.parameters()))
        first.requires_grad_(False)
        return net, first

    whole, _ = frozen_model()
    cfg = FitConfig(steps=8, lr=0.05, eval_every=2, checkpoint_every=3)
    expected = fit(whole, lambda step: batch_loss(whole, np.arange(step, step + 8) % 64), cfg, seed=4, progress=False,
                   evaluate=lambda done: {"value": DEV_BY_STEP[done]})

    class Stop(Exception):
        pass

    def stop(done):
        if done == 5:
            raise Stop

    net, first = frozen_model()
    with pytest.raises(Stop):
        fit(net, lambda step: batch_loss(net, np.arange(step, step + 8) % 64), cfg, seed=4, progress=False,
            evaluate=lambda done: {"value": DEV_BY_STEP[done]}, checkpoint=Checkpointer(tmp_path, "f"), on_step=stop)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    frozen_key = next(k for k, v in net.state_dict().items() if v.data_ptr() == first.data_ptr())
    assert frozen_key not in state["model"] and frozen_key not in state["best_state"]
    resumed, _ = frozen_model()
    result = fit(resumed, lambda step: batch_loss(resumed, np.arange(step, step + 8) % 64), cfg, seed=4,
                 progress=False, evaluate=lambda done: {"value": DEV_BY_STEP[done]},
                 checkpoint=Checkpointer(tmp_path, "f"))
    assert result.curve == expected.curve
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed), weights(whole)))

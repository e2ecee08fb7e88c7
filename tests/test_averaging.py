"""Weight averaging in the training core (curricula.training.averaging, fit's averaging knobs): idle knobs change no
bit of a fit, EMA and SWA against hand values, when each takes in weights, the average evaluated and kept from
average_from on, resume after a kill, the knobs of a spec, and shadow averages that record the averaging run's curve
and change nothing else."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from curricula.training.averaging import WeightAverage, takes_in
from curricula.training.checkpoints import Checkpointer
from curricula.training.core import FitConfig, FitResult, fit
from tests.toy_fit import SPEC, Killed, averaging_fit, batch_loss, full_loss, model, same


BUMP = {3: 0.0, 6: 8.0, 9: 0.0, 12: 0.0}  # the dev value of step 6 lifted above the later ones: a real rollback


def pinned_fit(**knobs) -> tuple[str, FitResult]:
    """A tiny fit and a sha256 of its losses, dev curve, kept step, stop reason and final weights (``knobs`` go to
    its FitConfig). The digest was checked equal before and after weight averaging existed (a58556b), but it is
    not pinned here: float bits differ between CPU classes (AVX2, AVX512), on which CI may run."""
    import hashlib

    net = model()
    cfg = FitConfig(steps=12, lr=0.05, eval_every=3, patience=2, min_steps=4, warmup=0.2, **knobs)
    result = fit(net, lambda step: batch_loss(net, np.arange(step, step + 8) % 64), cfg, seed=6, progress=False,
                 evaluate=lambda done: {"value": -full_loss(net) + BUMP[done]})
    digest = hashlib.sha256(repr((result.losses, result.curve, result.best_step, result.stopped)).encode())
    for value in net.state_dict().values():
        digest.update(value.numpy().tobytes())
    return digest.hexdigest(), result


def test_the_default_fit_is_the_fit_without_averaging_knobs():
    digest, result = pinned_fit()
    assert result.best_step == 6 and result.stopped == "patience"
    assert digest == pinned_fit(averaging="none", ema_decay=0.5, average_from=3)[0]  # idle knobs change no bit



class Toy(torch.nn.Module):
    """One float parameter and one integer buffer: what WeightAverage averages and what it copies."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(2))
        self.register_buffer("calls", torch.zeros(1, dtype=torch.int64))


def averaged(kind: str, vectors: list[list[float]], decay: float = 0.75) -> tuple[torch.Tensor, torch.Tensor, int]:
    toy, average = Toy(), WeightAverage(kind, decay)
    for i, vector in enumerate(vectors):
        with torch.no_grad():
            toy.w.copy_(torch.tensor(vector))
            toy.calls.fill_(i + 1)
        average.update(toy)
    return average.state["w"], average.state["calls"], average.count


def test_ema_and_swa_against_hand_values():
    # EMA at decay 0.75: [4, 8]; 0.75 [4, 8] + 0.25 [8, 0] = [5, 6]; 0.75 [5, 6] + 0.25 [1, 2] = [4, 5]
    w, calls, count = averaged("ema", [[4, 8], [8, 0], [1, 2]])
    assert torch.equal(w, torch.tensor([4.0, 5.0])) and calls.item() == 3 and count == 3
    # SWA, the uniform mean: [1, 2]; [2, 4]; ([1, 2] + [3, 6] + [8, 1]) / 3 = [4, 3]
    w, calls, count = averaged("swa", [[1, 2], [3, 6], [8, 1]])
    assert torch.equal(w, torch.tensor([4.0, 3.0])) and calls.item() == 3 and count == 3
    assert torch.equal(averaged("ema", [[4, 8]])[0], torch.tensor([4.0, 8.0]))  # the first weights are the average
    with pytest.raises(ValueError, match="weight average 'none'"):
        WeightAverage("none")


def test_an_ema_takes_in_every_step_and_swa_every_evaluation_step_from_average_from_on():
    ema, swa = WeightAverage("ema"), WeightAverage("swa")
    assert [done for done in range(1, 8) if takes_in(ema, done, 4, done % 3 == 0)] == [4, 5, 6, 7]
    assert [done for done in range(1, 8) if takes_in(swa, done, 4, done % 3 == 0)] == [6]
    assert takes_in(swa, 3, 0, True) and not takes_in(swa, 3, 4, True)


def by_hand(kind: str, vectors: list[dict[str, torch.Tensor]], decay: float = 0.9) -> dict[str, torch.Tensor]:
    """The EMA / uniform average of state dicts, with the same float operations as WeightAverage."""
    out = {k: v.clone() for k, v in vectors[0].items()}
    for n, vector in enumerate(vectors[1:], start=2):
        for key, avg in out.items():
            if kind == "ema":
                avg.mul_(decay).add_(vector[key], alpha=1.0 - decay)
            else:
                avg.add_(vector[key] - avg, alpha=1.0 / n)
    return out


@pytest.mark.parametrize("kind", ["ema", "swa"])
def test_averaging_starts_at_average_from_and_evaluates_and_keeps_the_average(kind):
    plain = averaging_fit("none", 0)
    net, result, trained, seen = averaging_fit(kind, 5)
    # the average never steers training: the same losses and the same trained weights after every step
    assert result.losses == plain[1].losses and all(same(trained[s], plain[2][s]) for s in trained)
    # evaluations before step 5 saw the trained weights; later ones the average of the weights from step 5 on
    # (EMA: after every step; SWA: at each evaluation step, 6, 9 and the last, 10)
    assert same(seen[3], trained[3])
    taken = list(range(5, 11)) if kind == "ema" else [6, 9, 10]
    for done in (6, 9, 10):
        assert same(seen[done], by_hand(kind, [trained[s] for s in taken if s <= done]))
    assert not same(seen[9], trained[9])
    # the kept model: the average at the best (last) evaluation
    assert result.best_step == 10 and same(net.state_dict(), seen[10])
    # without evaluations the final average is kept
    bare, _, trained, _ = averaging_fit(kind, 5, evaluate=False)
    assert same(bare.state_dict(), by_hand(kind, [trained[s] for s in taken]))


def test_a_killed_fit_with_averaging_resumes_to_the_same_average(tmp_path):
    whole, expected, _, _ = averaging_fit("ema", 2)
    with pytest.raises(Killed):
        averaging_fit("ema", 2, tmp_path=tmp_path, kill_at=9)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["step"] == 8 and state["average"]["kind"] == "ema" and state["average"]["count"] == 7
    resumed, result, _, _ = averaging_fit("ema", 2, tmp_path=tmp_path)
    assert result.losses == expected.losses and result.curve == expected.curve
    assert same(resumed.state_dict(), whole.state_dict())


def test_the_averaging_knobs_of_a_spec():
    cfg = FitConfig.of(SPEC)
    assert (cfg.averaging, cfg.ema_decay, cfg.average_from) == ("none", 0.999, 0)
    # the average starts where the curriculum phase ends: the grid's longest curriculum, with or without patience
    cfg = FitConfig.of(replace(SPEC, averaging="ema", ema_decay=0.99, min_steps=640), length=640)
    assert (cfg.averaging, cfg.ema_decay, cfg.average_from) == ("ema", 0.99, 640)
    assert FitConfig.of(replace(SPEC, averaging="swa", patience=None)).average_from == 600
    with pytest.raises(ValueError, match="min_steps=4001 is above max_steps=4000"):
        FitConfig.of(replace(SPEC, averaging="swa", patience=None, min_steps=4001), length=4001)
    for knobs in ({"averaging": "polyak"}, {"ema_decay": 1.0}, {"average_from": 4}):
        with pytest.raises(ValueError):
            FitConfig(**{"steps": 3, "lr": 0.1, **knobs})


def shadow_fit(averaging: str, shadows: tuple[str, ...], *, tmp_path=None, kill_at=None):
    """averaging_fit's 10-step run whose dev and test values are functions of the weights evaluated, with the given
    averaging or shadow averages (from step 5)."""
    net = model()

    def hook(done: int) -> None:
        if done == kill_at:
            raise Killed

    def dev(done: int) -> dict[str, float]:
        weights = torch.cat([p.detach().flatten() for p in net.parameters()])
        return {"value": float(weights.sum()), "test_value": float(weights.abs().mean()), "other": done}

    cfg = FitConfig(steps=10, lr=0.05, eval_every=3, checkpoint_every=4, averaging=averaging, ema_decay=0.9,
                    average_from=5, shadow_averages=shadows)
    result = fit(net, lambda step: batch_loss(net, np.arange(step, step + 8) % 64), cfg, seed=3, progress=False,
                 evaluate=dev, on_step=hook, checkpoint=Checkpointer(tmp_path, "shadow") if tmp_path else None)
    return net, result


def test_a_shadow_average_records_the_curve_of_the_run_that_averages_and_changes_nothing_else():
    plain_net, plain = shadow_fit("none", ())
    net, shadowed = shadow_fit("none", ("ema", "swa"))
    # the trained run is untouched: losses, its own curve columns, the kept step and weights
    assert shadowed.losses == plain.losses and shadowed.best_step == plain.best_step
    assert [{k: row[k] for k in plain.curve[0]} for row in shadowed.curve] == plain.curve
    assert same(net.state_dict(), plain_net.state_dict())
    for kind in ("ema", "swa"):
        _, averaged = shadow_fit(kind, ())
        # the shadow columns are the averaging run's dev and test values, evaluation by evaluation, bit for bit
        assert [row[f"{kind}_value"] for row in shadowed.curve] == [row["value"] for row in averaged.curve]
        assert [row[f"{kind}_test_value"] for row in shadowed.curve] == [row["test_value"] for row in averaged.curve]
        assert f"{kind}_other" not in shadowed.curve[0]  # only the dev and test values are the average's
    # before the average's first step (the evaluation at step 3) the shadows read the trained weights' values
    assert shadowed.curve[0]["ema_value"] == shadowed.curve[0]["value"]
    assert shadowed.curve[1]["ema_value"] != shadowed.curve[1]["value"]


def test_a_killed_fit_with_shadow_averages_resumes_to_the_same_curve(tmp_path):
    _, whole = shadow_fit("none", ("ema", "swa"))
    with pytest.raises(Killed):
        shadow_fit("none", ("ema", "swa"), tmp_path=tmp_path, kill_at=9)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["shadows"]["ema"]["count"] == 4 and state["shadows"]["swa"]["count"] == 1  # steps 5-8; step 6
    _, resumed = shadow_fit("none", ("ema", "swa"), tmp_path=tmp_path)
    assert resumed.curve == whole.curve and resumed.losses == whole.losses


def test_shadow_averages_are_checked_and_read_from_a_spec():
    with pytest.raises(ValueError, match="distinct kinds"):
        FitConfig(steps=10, lr=0.1, shadow_averages=("ema", "ema"))
    with pytest.raises(ValueError, match="distinct kinds"):
        FitConfig(steps=10, lr=0.1, shadow_averages=("none",))
    with pytest.raises(ValueError, match="set averaging none"):
        FitConfig(steps=10, lr=0.1, averaging="ema", shadow_averages=("swa",))
    cfg = FitConfig.of(replace(SPEC, diagnostic_averages=("ema", "swa"), min_steps=640), length=640)
    assert (cfg.averaging, cfg.shadow_averages, cfg.average_from) == ("none", ("ema", "swa"), 640)

"""Readiness for a GPU, checked on the CPU (curricula.training.determinism, .transfer, .checkpoints): the opt-in
deterministic mode, the one device's RNG state a checkpoint keeps, the refusal of a checkpoint of another device
type or dtype, and host-device copies that do not wait (pinned memory, one copy for many losses)."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest
import torch

from curricula.experiments.spec import parse_train_spec, spec_params
from curricula.experiments.specs import merge_experiment
from curricula.experiments.train import spec_fingerprint
from curricula.models import runtime
from curricula.models.hf import autocast_dtype
from curricula.models.runtime import use_deterministic
from curricula.models.teacher import TeacherConfig
from curricula.pipeline.plan import dataset_plan
from curricula.plumbing.config import SCHEMA, merge, read_yaml, validate_config
from curricula.training.checkpoints import Checkpointer
from curricula.training.core import FitConfig, fit
from curricula.training.determinism import arithmetic, device_rng_state, restore_device_rng
from curricula.training.transfer import batch_to_device, host_floats, to_device

DATA = torch.from_numpy(np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32))
TARGET = DATA @ torch.arange(1.0, 5.0)
CPU32 = {"device": "cpu", "dtype": "float32"}


class Killed(Exception):
    pass


def toy_fit(folder, recorded: dict[str, str] | None, kill_at: int | None = None, seen: list[int] | None = None):
    """A 6-step fit with dropout and a checkpoint every 2 steps under arithmetic ``recorded``; ``seen`` collects the
    steps it ran (a resumed run starts after its checkpoint's)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))

    def on_step(done: int) -> None:
        if seen is not None:
            seen.append(done)
        if done == kill_at:
            raise Killed

    cfg = FitConfig(steps=6, lr=0.05, eval_every=3, checkpoint_every=2)
    result = fit(net, lambda step: (net(DATA[step::6]).squeeze(-1) - TARGET[step::6]).pow(2).mean(), cfg, seed=3,
                 evaluate=lambda done: {"value": -float(done % 4)}, progress=False,
                 checkpoint=Checkpointer(folder, "fp", recorded), on_step=on_step)
    return result, [p.detach().clone() for p in net.state_dict().values()]


def killed_at_5(folder, recorded: dict[str, str] | None) -> None:
    with pytest.raises(Killed):
        toy_fit(folder, recorded, kill_at=5)


# ------------------------------------------------------------------------------- the checkpoint's arithmetic
@pytest.mark.parametrize("written", [{"device": "cuda", "dtype": "float32"}, {"device": "cpu", "dtype": "bfloat16"}])
def test_a_checkpoint_of_another_device_or_dtype_is_not_resumed(tmp_path, caplog, written):
    whole, whole_weights = toy_fit(tmp_path / "whole", CPU32)
    killed_at_5(tmp_path / "ck", written)
    assert torch.load(tmp_path / "ck" / "checkpoint.pt", weights_only=True)["device"] == written["device"]
    seen: list[int] = []
    with caplog.at_level(logging.INFO):
        again, weights = toy_fit(tmp_path / "ck", CPU32, seen=seen)
    assert seen[0] == 1  # restarted from step 0
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1 and "ignoring checkpoint" in warning[0]
    assert f"device {written['device']}, dtype {written['dtype']}" in warning[0]  # what it was computed on
    assert "device cpu, dtype float32" in warning[0]  # and what this run computes on
    assert not any("resuming" in r.getMessage() for r in caplog.records)
    assert again.losses == whole.losses and all(torch.equal(a, b) for a, b in zip(weights, whole_weights))


def test_a_checkpoint_of_the_same_arithmetic_or_of_none_recorded_is_resumed(tmp_path):
    whole, whole_weights = toy_fit(tmp_path / "whole", CPU32)
    for name, written in [("same", CPU32), ("legacy", None)]:  # None: a checkpoint from before it was recorded
        killed_at_5(tmp_path / name, written)
        state = torch.load(tmp_path / name / "checkpoint.pt", weights_only=True)
        assert ("device" in state) == (written is not None)
        seen: list[int] = []
        resumed, weights = toy_fit(tmp_path / name, CPU32, seen=seen)
        assert seen[0] == 5  # resumed after the checkpoint at step 4
        assert resumed.losses == whole.losses and all(torch.equal(a, b) for a, b in zip(weights, whole_weights))


def test_the_arithmetic_is_the_device_type_and_the_autocast_dtype():
    """Under autocast the record also says the heads run in fp32, so a checkpoint written when a cross-encoder's head
    ran in bf16 is not resumed by a run whose head runs in fp32; without autocast the record is as it always was."""
    assert arithmetic(torch.device("cpu"), autocast_dtype("cpu", "fp32", transformer=True)) == CPU32
    bf16 = {"dtype": "bfloat16", "head": "float32"}
    assert arithmetic("cpu", autocast_dtype("cpu", "bf16")) == {"device": "cpu", **bf16}
    assert arithmetic(torch.device("cuda", 1), torch.bfloat16) == {"device": "cuda", **bf16}


def test_the_fingerprint_of_a_default_spec_is_unchanged_and_deterministic_enters_only_when_true():
    train = {"steps": 5, "lr": 1e-3, "device": "auto", "precision": "auto", "threads": 2}
    default = parse_train_spec(merge_experiment(train, {}))
    off = parse_train_spec(merge_experiment({**train, "deterministic": False}, {}))
    assert "deterministic" not in spec_params(default) and "deterministic" not in spec_params(off)
    assert spec_fingerprint(off, 1) == spec_fingerprint(default, 1)
    on = parse_train_spec(merge_experiment({**train, "deterministic": True}, {}))
    assert spec_params(on)["deterministic"] is True and spec_fingerprint(on, 1) != spec_fingerprint(default, 1)


# ------------------------------------------------------------------------------------------------ RNG states
def test_only_the_modules_cards_rng_state_is_saved_a_single_state(monkeypatch, tmp_path):
    def every_card():
        raise AssertionError("every visible card's RNG state was read")

    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", every_card)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device="cuda": asked.append(device) or
                        torch.zeros(16, dtype=torch.uint8))
    state = device_rng_state(torch.device("cuda:1"))
    assert isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and asked == [torch.device("cuda:1")]
    assert device_rng_state(torch.device("cpu")) is None  # a CPU module: the CPU's state is torch_rng
    killed_at_5(tmp_path, CPU32)  # a CPU fit where CUDA looks available: no CUDA state read or saved
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True)["cuda_rng"] is None


def test_a_saved_state_is_restored_to_the_modules_card_also_from_a_list_of_every_cards(monkeypatch):
    restored = []
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device="cuda": restored.append((state, device)))
    one, two = torch.zeros(4, dtype=torch.uint8), torch.ones(4, dtype=torch.uint8)
    restore_device_rng(torch.device("cuda:0"), one)
    restore_device_rng(torch.device("cuda:1"), [one, two])  # a checkpoint of the earlier layout
    restore_device_rng(torch.device("cuda:3"), [one, two])  # saved where fewer cards were visible: nothing
    restore_device_rng(torch.device("cpu"), one)
    restore_device_rng(torch.device("cpu"), [])  # the earlier layout on a machine without CUDA
    assert [(s is one or s is two, s is two, d) for s, d in restored] == [
        (True, False, torch.device("cuda:0")), (True, True, torch.device("cuda:1"))]


# ------------------------------------------------------------------------------------------ deterministic mode
@pytest.fixture
def torch_flags(monkeypatch):
    """Leave torch's process-wide flags and CUBLAS_WORKSPACE_CONFIG as they were."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.backends.cudnn.benchmark = before[2]


def test_deterministic_mode_sets_the_torch_flags_and_the_cublas_workspace(torch_flags):
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.benchmark = True
    assert use_deterministic(True)
    assert torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.benchmark
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == runtime.CUBLAS_WORKSPACE == ":4096:8"


def test_deterministic_mode_keeps_a_deterministic_workspace_the_user_chose(torch_flags, monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    use_deterministic(True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_deterministic_mode_is_off_by_default_and_off_changes_nothing(torch_flags):
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.benchmark = True
    assert not use_deterministic(False) and not use_deterministic(None)
    assert not torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.benchmark
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    assert TeacherConfig().deterministic is False
    schema = read_yaml(SCHEMA)["properties"]
    assert schema["train"]["properties"]["deterministic"]["default"] is False
    assert schema["teacher"]["properties"]["deterministic"]["default"] is False


def test_deterministic_false_leaves_every_jobs_params_as_before_and_true_enters_them():
    default = read_yaml(SCHEMA.parents[1] / "config.yaml")
    tiny = {"dataset": {"name": "tiny", "format": "chitchat", "options": {"max_instances": {"train": 40}}}}
    plans = {on: dataset_plan(validate_config(merge(default, {**tiny, "train": {"deterministic": on},
                                                              "teacher": {"deterministic": on}})), read_yaml(SCHEMA))
             for on in (False, True)}
    off, on = plans[False], plans[True]
    assert "deterministic" not in off.train_params("baseline") and on.train_params("baseline")["deterministic"]
    assert set(off.evaluate_knobs("baseline")) == {"score_batch_size", "precision", "device"}
    assert on.evaluate_knobs("baseline")["deterministic"] is True
    for stage in ("train", "score"):
        assert "deterministic" not in off.teacher_params(stage) and on.teacher_params(stage)["deterministic"]


# ------------------------------------------------------------------------------------------- host and device
def test_on_the_cpu_a_tensor_goes_to_the_device_as_before_and_is_never_pinned(monkeypatch):
    def pin(self):
        raise AssertionError("pinned on the CPU")

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    x = torch.arange(6)
    assert to_device(x, torch.device("cpu")) is x and to_device(x, "cpu") is x
    assert batch_to_device({"ids": x}, "cpu")["ids"] is x


def test_a_host_tensor_bound_for_cuda_is_pinned_and_copied_without_waiting():
    calls = []

    class Host:  # the interface to_device uses of a host tensor
        device = torch.device("cpu")

        def pin_memory(self):
            calls.append("pin")
            return self

        def to(self, device, non_blocking=False):
            calls.append((device, non_blocking))
            return "on the card"

    assert to_device(Host(), "cuda:0") == "on the card"
    assert calls == ["pin", (torch.device("cuda:0"), True)]


def test_many_losses_become_the_floats_float_gives_with_one_copy():
    values = [torch.tensor(v) for v in np.random.default_rng(1).normal(size=7).astype(np.float32)]
    values += [torch.tensor(0.1, dtype=torch.bfloat16), torch.tensor([2.5])]
    assert host_floats(values) == [float(v) for v in values]
    assert host_floats([]) == []

"""The toy regression (64 rows of 6 features, a small network with dropout), its loss and the fits that the
training-core tests share (tests/test_training_core.py, tests/test_averaging.py)."""

from __future__ import annotations

import numpy as np
import torch

from curricula.training.checkpoints import Checkpointer
from curricula.training.core import FitConfig, fit
from curricula.training.spec import FitSpec


DATA = torch.from_numpy(np.random.default_rng(0).normal(size=(64, 6)).astype(np.float32))
TARGET = DATA @ torch.arange(1.0, 7.0) + 0.5


def model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Dropout(0.2), torch.nn.Linear(8, 1))


def batch_loss(net: torch.nn.Module, rows: np.ndarray) -> torch.Tensor:
    return (net(DATA[rows]).squeeze(-1) - TARGET[rows]).pow(2).mean()


def weights(net: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in net.state_dict().values()]


class Killed(Exception):
    pass


@torch.no_grad()
def full_loss(net: torch.nn.Module) -> float:
    return float(batch_loss(net, np.arange(64)))


SPEC = FitSpec(steps=600, max_steps=4000, patience=3, lr=1e-3, optimizer="adam", eps=1e-8, weight_decay=0,
               warmup=0.1, eval_every=100)


def averaging_fit(averaging: str, average_from: int, *, evaluate: bool = True, tmp_path=None, kill_at=None,
                  keep: str = "best", falling: bool = False):
    """A 10-step fit evaluated every 3 steps (and at 10) on a dev value that rises with the step (falls with
    ``falling``), so the last (first) evaluation is the best; returns the result, the weights after each step and the
    weights each evaluation saw."""
    net, trained, seen = model(), {}, {}

    def hook(done: int) -> None:
        trained[done] = {k: v.detach().clone() for k, v in net.state_dict().items()}
        if done == kill_at:
            raise Killed

    def dev(done: int) -> dict[str, float]:
        seen[done] = {k: v.detach().clone() for k, v in net.state_dict().items()}
        return {"value": -float(done) if falling else float(done)}

    cfg = FitConfig(steps=10, lr=0.05, eval_every=3, checkpoint_every=4, averaging=averaging, ema_decay=0.9,
                    average_from=average_from, keep=keep)
    result = fit(net, lambda step: batch_loss(net, np.arange(step, step + 8) % 64), cfg, seed=3, progress=False,
                 evaluate=dev if evaluate else None, on_step=hook,
                 checkpoint=Checkpointer(tmp_path, "avg") if tmp_path is not None else None)
    return net, result, trained, seen


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

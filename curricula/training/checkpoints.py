"""Copies of a module's weights and the checkpoint file of :func:`curricula.training.core.fit`.

The copies leave out the frozen parameters (:func:`frozen_names`): rollback to the best dev weights, weight averages
and checkpoints keep only what training changes. A :class:`Checkpointer` keeps the whole training state of one run
under a fingerprint of its configuration and the arithmetic it ran (device type and autocast dtype), written
atomically, so a killed job resumes from its last checkpoint.
Checkpoints are plain tensors and containers, loaded with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)


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
    """``checkpoint.pt`` in a folder: the whole training state of :func:`~curricula.training.core.fit`, under a
    fingerprint and the arithmetic it was computed with.

    The folder sits beside the job's outputs, not among them, so Snakemake does not delete it when a job dies.
    A checkpoint whose fingerprint differs from the job's (the configuration changed) is ignored and replaced.

    ``arithmetic`` (:func:`curricula.training.determinism.arithmetic`: the device type and the autocast dtype,
    e.g. ``{"device": "cpu", "dtype": "float32"}``; None = not recorded) is saved beside the fingerprint, not
    hashed into it, so the fingerprints of existing runs stay as they were. A checkpoint written under another
    device type or dtype is refused, not resumed (the run restarts from step 0, with a warning naming both): the
    steps after it would run another arithmetic (other kernels and rounding, another RNG stream for dropout) on
    weights the first one made, and the weights it ends with would be those of neither an uninterrupted CPU run nor
    an uninterrupted GPU run, a hybrid no re-run could reproduce. Restarting costs the steps done so far; recording
    alone would keep them but leave such a model among the results. A checkpoint that records no arithmetic
    (written before it was recorded: every one of them on the CPU) is resumed as before.
    """

    def __init__(self, folder: str | Path, fingerprint: str, arithmetic: Mapping[str, str] | None = None):
        self.folder = Path(folder)
        self.fingerprint = fingerprint
        self.arithmetic = dict(arithmetic) if arithmetic is not None else None

    def save(self, state: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        _save_atomic({**state, "fingerprint": self.fingerprint, **(self.arithmetic or {})},
                     self.folder / "checkpoint.pt")

    def load(self) -> dict[str, Any] | None:
        """The saved state when it belongs to this configuration and arithmetic, else None (a fresh start)."""
        path = self.folder / "checkpoint.pt"
        if not path.exists():
            return None
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("fingerprint") != self.fingerprint:
            log.info("ignoring checkpoint %s: it belongs to another configuration", path)
            return None
        if self.arithmetic is not None:
            recorded = {key: state.get(key) for key in self.arithmetic}
            if any(value is not None for value in recorded.values()) and recorded != self.arithmetic:
                log.warning("ignoring checkpoint %s: it was computed on %s, this run computes on %s; restarting "
                            "from step 0 (a resumed run would mix two arithmetics)", path, _named(recorded),
                            _named(self.arithmetic))
                return None
        return state

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _named(arithmetic: Mapping[str, Any]) -> str:
    """``device cuda, dtype bfloat16`` (what a refused checkpoint's warning shows)."""
    return ", ".join(f"{key} {value}" for key, value in arithmetic.items())

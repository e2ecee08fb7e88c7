"""Copies of a module's weights and the checkpoint file of :func:`curricula.training.core.fit`.

The copies leave out the frozen parameters (:func:`frozen_names`): rollback to the best dev weights, weight averages
and checkpoints keep only what training changes. A :class:`Checkpointer` keeps the whole training state of one run
under a fingerprint of its configuration, written atomically, so a killed job resumes from its last checkpoint.
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
    fingerprint.

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

"""Which jobs ask for a GPU, decided at parse time (no torch import): the ``gpu`` resource of the rules that can
use one, the card count a local run queues GPU jobs on, and a profile that gives a GPU to jobs told to use the CPU.

A job asks for one card (resource ``gpu: 1``) when its device is ``cuda`` or ``cuda:N``, or ``auto`` on a planning
host that has a GPU (a workstation). On a cluster the login node that plans has none: profiles/slurm names the GPU
rules' partition and ``gpu: 1`` itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curricula.plumbing.gpus import visible_gpu_count

#: the rules whose jobs can use a GPU (resource ``gpu``; ``active`` only when active learning is on)
GPU_RULES = ("train", "evaluate", "teacher_train", "teacher_score_shard", "dense_biencoder", "dense_encode_shard",
             "active")


def gpus(device: str, visible: int | None = None) -> int:
    """Cards a job on ``device`` asks for (resource ``gpu``): 1 for ``cuda`` or ``cuda:N``; for ``auto`` 1 when
    the planning host has a GPU (``visible`` cards; default :func:`visible_gpu_count`), else 0; 0 for ``cpu``."""
    device = str(device)
    if device == "cuda" or device.startswith("cuda:"):
        return 1
    if device == "auto":
        return 1 if (visible_gpu_count() if visible is None else visible) > 0 else 0
    return 0


def rule_devices(config: Mapping[str, Any], run_specs: Mapping[str, Mapping[str, Any]],
                 active: Mapping[str, Any] | None) -> dict[str, set[str]]:
    """The ``device`` values each GPU-capable rule's jobs run with: train and evaluate take every training run's,
    the teacher's and the dense model's rules their section's, ``active`` the active-learning ranker's (when on)."""
    runs = {str(spec["device"]) for spec in run_specs.values()}
    devices = {"train": runs, "evaluate": runs,
               "teacher_train": {str(config["teacher"]["device"])},
               "teacher_score_shard": {str(config["teacher"]["device"])},
               "dense_biencoder": {str(config["dense"]["device"])},
               "dense_encode_shard": {str(config["dense"]["device"])}}
    if active is not None:
        devices["active"] = {str(active["device"])}
    return devices


def profile_gpu_conflicts(devices: Mapping[str, set[str]], overwrite: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per rule a profile's ``set-resources`` gives a GPU although every job of it runs with ``device:
    cpu`` (the card would sit idle for the whole job): what to change."""
    lines = []
    for rule, resources in sorted(overwrite.items()):
        asked = resources["gpu"] if "gpu" in resources else 0
        asked = getattr(asked, "value", asked)  # Snakemake's Resource, or a plain value
        if rule in devices and devices[rule] == {"cpu"} and str(asked) not in ("0", "", "None"):
            lines.append(f"rule {rule}: the profile asks for a GPU (set-resources {rule}: gpu: {asked}) but its jobs "
                         f"run with device: cpu; drop its gpu and GPU partition lines, or set device: auto")
    return lines

"""Which jobs ask for a GPU, decided at parse time (no torch import): the ``gpu`` resource of the rules that can
use one, the card count a local run queues GPU jobs on, and a profile that gives a GPU to jobs told to use the CPU.

A job asks for one card (resource ``gpu: 1``) when its device is ``cuda`` or ``cuda:N``, or ``auto`` on a planning
host that has a GPU (a workstation). On a cluster the login node that plans has none: profiles/slurm names the GPU
rules' partition and ``gpu: 1`` itself (``set-resources`` overrides a rule's own resources), and a study's renamed
copies of the rules get the same entries (:func:`study_overwrites`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from curricula.experiments.spec import TrainSpec
from curricula.plumbing.gpus import visible_gpu_count
from curricula.retrieval.gpu_search import neighbors_device

V = TypeVar("V")

#: the rules whose jobs can use a GPU (resource ``gpu``; ``active`` only when active learning is on)
GPU_RULES = ("train", "evaluate", "teacher_train", "teacher_score_shard", "dense_biencoder", "dense_encode_shard",
             "dense_neighbors_shard", "active")


def gpus(device: str, visible: int | None = None) -> int:
    """Cards a job on ``device`` asks for (resource ``gpu``): 1 for ``cuda`` or ``cuda:N``; for ``auto`` 1 when
    the planning host has a GPU (``visible`` cards; default :func:`visible_gpu_count`), else 0; 0 for ``cpu``."""
    device = str(device)
    if device == "cuda" or device.startswith("cuda:"):
        return 1
    if device == "auto":
        return 1 if (visible_gpu_count() if visible is None else visible) > 0 else 0
    return 0


def rule_devices(config: Mapping[str, Any], run_specs: Mapping[str, TrainSpec],
                 active: TrainSpec | None) -> dict[str, set[str]]:
    """The ``device`` values each GPU-capable rule's jobs run with: train and evaluate take every training run's,
    the teacher's and the dense model's rules their section's (the neighbour search the dense model's in the CUDA 12
    environment only: :func:`curricula.retrieval.gpu_search.neighbors_device`), ``active`` the active-learning
    ranker's (when on)."""
    runs = {spec.runtime.device for spec in run_specs.values()}
    devices = {"train": runs, "evaluate": runs,
               "teacher_train": {str(config["teacher"]["device"])},
               "teacher_score_shard": {str(config["teacher"]["device"])},
               "dense_biencoder": {str(config["dense"]["device"])},
               "dense_encode_shard": {str(config["dense"]["device"])},
               "dense_neighbors_shard": {neighbors_device(config)}}
    if active is not None:
        devices["active"] = {active.runtime.device}
    return devices


def profile_gpu_conflicts(devices: Mapping[str, set[str]], overwrite: Mapping[str, Mapping[str, Any]],
                          prefix: str = "") -> list[str]:
    """One line per rule a profile's ``set-resources`` gives a GPU although every job of it runs with ``device:
    cpu`` (the card would sit idle for the whole job): what to change. ``prefix`` checks a study's copies of the
    rules (``<dataset>_train``) instead of the bare names."""
    lines = []
    for rule in sorted(devices):
        name = prefix + rule
        asked = overwrite[name]["gpu"] if name in overwrite and "gpu" in overwrite[name] else 0
        asked = getattr(asked, "value", asked)  # Snakemake's Resource, or a plain value
        if devices[rule] == {"cpu"} and str(asked) not in ("0", "", "None"):
            lines.append(f"rule {name}: the profile asks for a GPU (set-resources {name}: gpu: {asked}) but its jobs "
                         f"run with device: cpu; drop its gpu and GPU partition lines, or set device: auto")
    return lines


def study_overwrites(overwrite: Mapping[str, V], datasets: Iterable[str]) -> dict[str, V]:
    """The entries of a profile's ``set-resources`` (or ``set-threads``) for a study's copies of the pipeline's rules:
    each entry for a bare rule name (``train``) again for ``<dataset>_train`` of every dataset, unless the profile
    names that copy itself. A study loads the pipeline once per dataset with its rules renamed, and Snakemake matches
    these entries by the rule's name, so without them no study job would get its partition, runtime or GPU."""
    prefixes = tuple(f"{dataset}_" for dataset in datasets)
    bare = {rule: value for rule, value in overwrite.items() if not rule.startswith(prefixes)}
    return {prefix + rule: value for prefix in prefixes for rule, value in bare.items() if prefix + rule not in overwrite}


def local_gpu_cap(workflow: Any, cards: int) -> Any:
    """The run's total of the ``gpu`` resource (a Snakemake ``Resource``): ``cards`` (visible cards x ``gpus.slots``)
    when the jobs run on this host, and no limit under a cluster executor, inside a cluster job (``--mode remote``:
    the scheduler gave it its cards) or in a dry run.

    Snakemake cuts every job's resources to these totals when it plans the jobs, after the Snakefile was read, and the
    executor is known only then (while the Snakefile is read, even ``--executor slurm`` looks local): a total fixed
    at parse time from a login node's 0 cards made every GPU job of a cluster run ask SLURM for no card. So the value
    is read when it is used."""
    from snakemake.resources import Resource

    class LocalGpuCap(Resource):
        @property
        def value(self) -> int | None:
            return cards if workflow.local_exec and not (workflow.dryrun or workflow.remote_exec) else None

    return LocalGpuCap("gpu", cards)

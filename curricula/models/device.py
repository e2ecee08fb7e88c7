"""Choosing the device a job runs on, refusing a GPU it cannot use, and saying what it used.

* ``device: auto`` is CUDA when torch can use a GPU, else the CPU. A job that was *given* a GPU (a scheduler set
  ``CUDA_VISIBLE_DEVICES`` to a card) but cannot use it (a CPU-only torch build, a driver older than the build's
  CUDA) stops with :class:`~curricula.plumbing.errors.DeviceError` instead of running on the CPU of a GPU allocation.
* ``device: cuda`` without a usable GPU stops the same way; ``cuda:N`` names a card of the visible ones.
* A job the plan gave a GPU (its ``gpu`` resource, recorded at its start: :func:`curricula.plumbing.gpus.planned_job`)
  that sees no usable card stops too, with one line saying what it saw (``gpus.missing: cpu`` runs it on the CPU
  with a warning instead).
* On a workstation ``auto`` and ``cuda`` take a slot of a card (``gpus.slots`` jobs per card) by a host-wide lock
  keyed by the card's UUID (:func:`curricula.plumbing.gpus.claim_gpu`); a SLURM job takes the card it was given.
  The chosen card becomes the process's current CUDA device (``torch.cuda.set_device``).
* :func:`device_record` is what a job logs and writes into its recorded config: the device actually used
  (``cuda:1``, never ``auto``), the GPU's model and compute capability, the autocast dtype, torch's and CUDA's
  versions.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

import torch

from curricula.plumbing.drivers import driver_needed
from curricula.plumbing.errors import DeviceError
from curricula.plumbing.gpus import claim_gpu, gpu_was_given, job_gpus, under_scheduler, visible_entries

log = logging.getLogger(__name__)

#: the dtype a cross-encoder's pooler and head compute in under autocast (:func:`curricula.models.heads.fp32_head`);
#: recorded beside an autocast dtype, so that a run from before the heads ran in fp32 (bf16 scores) has another
#: device record, checkpoint fingerprint and ledger run id than one after
HEAD_DTYPE = "fp32"

_claimed: int | None = None  # the card this process took (claimed once, kept for the process's life)


def cuda_problem() -> str:
    """Why torch cannot use a GPU here, in one phrase: a CPU-only build, or the CUDA runtime's own error (an old
    driver, no device)."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build (use the GPU environment: docs/cluster.md)"
    try:
        torch.cuda.init()
    except Exception as err:  # torch raises RuntimeError/AssertionError with the driver's message
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"torch {torch.__version__} ({cuda_build(torch.version.cuda)}) cannot start CUDA: {first}"
    return f"torch {torch.__version__} ({cuda_build(torch.version.cuda)}) sees no GPU"


def card_uuid(index: int) -> str:
    """The UUID of visible card ``index`` (``GPU-8f6c...``, as nvidia-smi and CUDA_VISIBLE_DEVICES write it): the same
    card has the same UUID in every process, whatever its ``CUDA_VISIBLE_DEVICES``."""
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return f"GPU-{uuid}" if uuid is not None else f"index-{index}"


def _claimed_card() -> int:
    """This process's card among the visible ones, claimed once: a SLURM job takes the card it was given (index 0);
    elsewhere a slot of a card by its UUID (:func:`curricula.plumbing.gpus.claim_gpu`, ``gpus.slots`` per card)."""
    global _claimed
    if _claimed is None:
        count = torch.cuda.device_count()
        if under_scheduler():
            _claimed = 0
        else:
            _claimed = claim_gpu([card_uuid(i) for i in range(count)], slots=job_gpus().slots)
            log.info("claimed GPU %d (%s) of the %d visible, %d job(s) per card", _claimed, card_uuid(_claimed),
                     count, job_gpus().slots)
    return _claimed


def _use(index: int) -> torch.device:
    """Card ``index`` made this process's current CUDA device (so that memory statistics, synchronisation and
    third-party code that use the current device open no context on card 0), as a torch device."""
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def _no_usable_gpu(prefer: str) -> torch.device:
    """The device when torch cannot use CUDA: the CPU where nothing asked for a GPU, else a DeviceError saying
    which (``device: cuda``, a card given by the scheduler, a job planned with a GPU); ``gpus.missing: cpu`` lets a
    job planned with a GPU run on the CPU with a warning."""
    if prefer != "auto":
        raise DeviceError(f"device '{prefer}' asked for, but {cuda_problem()}; set device: cpu or auto")
    if gpu_was_given():
        raise DeviceError(f"this job was given a GPU (CUDA_VISIBLE_DEVICES={','.join(visible_entries() or [])}) but "
                          f"{cuda_problem()}; fix the environment, or set device: cpu and ask for no GPU")
    planned = job_gpus()
    if planned.planned:
        where = os.environ.get("CUDA_VISIBLE_DEVICES")
        seen = "CUDA_VISIBLE_DEVICES unset" if where is None else f"CUDA_VISIBLE_DEVICES={where!r}"
        line = (f"this job was planned with a GPU (resource gpu={planned.planned}) but sees none usable ({seen}; "
                f"{cuda_problem()})")
        if planned.missing == "stop":
            raise DeviceError(f"{line}; check the node's card and driver and the job's environment, or set "
                              f"gpus.missing: cpu to run such jobs on the CPU")
        log.warning("%s; running on the CPU (gpus.missing: cpu)", line)
    return torch.device("cpu")


def select_device(prefer: str | torch.device = "auto") -> torch.device:
    """The device of a job: ``"auto"`` (CUDA when usable, else CPU), ``"cpu"``, ``"cuda"`` (a usable GPU or raise)
    or ``"cuda:N"`` (card N of the visible ones). ``auto`` and ``cuda`` take a slot of a card of their own
    (:func:`_claimed_card`); the chosen card becomes the current CUDA device. Without a usable GPU, ``auto`` is the
    CPU unless the job was given a card or planned with one (:func:`_no_usable_gpu`). Raises DeviceError (what was
    found, what to change) or ValueError (an unknown name)."""
    prefer = str(prefer).strip().lower()
    if prefer == "cpu":
        if job_gpus().planned:
            log.warning("this job was planned with a GPU (resource gpu=%d) but runs with device: cpu; the card "
                        "sits idle", job_gpus().planned)
        return torch.device("cpu")
    if prefer not in ("auto", "cuda") and not re.fullmatch(r"cuda:\d+", prefer):
        raise ValueError(f"device '{prefer}': expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if not torch.cuda.is_available():
        return _no_usable_gpu(prefer)
    if prefer.startswith("cuda:"):
        index = int(prefer.split(":")[1])
        if index >= torch.cuda.device_count():
            raise DeviceError(f"device '{prefer}': only {torch.cuda.device_count()} GPU(s) visible")
        return _use(index)
    return _use(_claimed_card())


def dtype_name(dtype: torch.dtype | None) -> str:
    """``bf16`` / ``fp16`` for an autocast dtype, ``fp32`` for None (no autocast)."""
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))


def device_record(device: torch.device, dtype: torch.dtype | None) -> dict[str, Any]:
    """What a job ran on, for its log and its recorded config: ``device`` (``cpu``, ``cuda:0``: resolved, never
    ``auto``), ``dtype`` (``bf16`` / ``fp32``), ``gpu`` (the model name, or None on the CPU), ``capability``
    (``"8.0"``, or None), ``torch`` and ``cuda`` (torch's build; None for a CPU build)."""
    record = {"device": str(device), "dtype": dtype_name(dtype), "gpu": None, "capability": None,
              "torch": torch.__version__, "cuda": torch.version.cuda}
    if dtype is not None:
        record["head"] = HEAD_DTYPE  # the autocast arithmetic since heads run in fp32 (absent: no autocast at all)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        record.update(device=f"cuda:{index}", gpu=torch.cuda.get_device_name(index), capability=f"{major}.{minor}")
    return record


def describe(record: dict[str, Any]) -> str:
    """One log line of a :func:`device_record`: ``cuda:0 (NVIDIA A100, compute 8.0), bf16 autocast; torch 2.13.0,
    CUDA 13.0 (NVIDIA driver >= 580.65.06)`` or ``cpu, fp32; torch 2.13.0``."""
    where = record["device"] + (f" ({record['gpu']}, compute {record['capability']})" if record["gpu"] else "")
    dtype = "bf16 autocast" if record["dtype"] == "bf16" else record["dtype"]
    build = f"torch {record['torch']}" + (f", {cuda_build(record['cuda'])}" if record["cuda"] else "")
    return f"{where}, {dtype}; {build}"


def cuda_build(version: str) -> str:
    """``CUDA 13.0 (NVIDIA driver >= 580.65.06)``: torch's CUDA runtime and the oldest Linux driver that runs it
    (:func:`curricula.plumbing.drivers.driver_needed`), for a job's start-up line and its errors."""
    try:
        return f"CUDA {version} (NVIDIA driver >= {driver_needed(version)})"
    except ValueError:
        return f"CUDA {version}"


def log_device(device: torch.device, dtype: torch.dtype | None, what: str = "running") -> dict[str, Any]:
    """Log ``<what> on <device record>`` and return the record (see :func:`device_record`)."""
    record = device_record(device, dtype)
    log.info("%s on %s", what, describe(record))
    return record


"""Choosing the device a job runs on, refusing a GPU it cannot use, and saying what it used.

* ``device: auto`` is CUDA when torch can use a GPU, else the CPU. A job that was *given* a GPU (a scheduler set
  ``CUDA_VISIBLE_DEVICES`` to a card) but cannot use it (a CPU-only torch build, a driver older than the build's
  CUDA) stops with :class:`~curricula.plumbing.errors.DeviceError` instead of running on the CPU of a GPU allocation.
* ``device: cuda`` without a usable GPU stops the same way; ``cuda:N`` names a card of the visible ones.
* With several visible cards (a workstation), ``auto`` and ``cuda`` take a card no other job on the host holds
  (:func:`curricula.plumbing.gpus.claim_gpu`), so jobs running side by side never share one.
* :func:`device_record` is what a job logs and writes into its recorded config: the device actually used
  (``cuda:1``, never ``auto``), the GPU's model and compute capability, the autocast dtype, torch's and CUDA's
  versions.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import torch

from curricula.plumbing.errors import DeviceError
from curricula.plumbing.gpus import claim_gpu, gpu_was_given, visible_entries

log = logging.getLogger(__name__)

_claimed: int | None = None  # the card this process took (claimed once, kept for the process's life)


def cuda_problem() -> str:
    """Why torch cannot use a GPU here, in one phrase: a CPU-only build, or the CUDA runtime's own error (an old
    driver, no device)."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build (install the CUDA build of envs/gpu-requirements.lock)"
    try:
        torch.cuda.init()
    except Exception as err:  # torch raises RuntimeError/AssertionError with the driver's message
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}) cannot start CUDA: {first}"
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU"


def _claimed_card() -> int:
    global _claimed
    if _claimed is None:
        _claimed = claim_gpu(torch.cuda.device_count())
        if torch.cuda.device_count() > 1:
            log.info("claimed GPU %d of the %d visible", _claimed, torch.cuda.device_count())
    return _claimed


def select_device(prefer: str | torch.device = "auto") -> torch.device:
    """The device of a job: ``"auto"`` (CUDA when usable, else CPU; a job given a GPU it cannot use raises),
    ``"cpu"``, ``"cuda"`` (a usable GPU or raise) or ``"cuda:N"`` (card N of the visible ones). ``auto`` and
    ``cuda`` take a card of their own when several are visible. Raises DeviceError (what was found, what to
    change) or ValueError (an unknown name)."""
    prefer = str(prefer).strip().lower()
    if prefer == "cpu":
        return torch.device("cpu")
    if prefer not in ("auto", "cuda") and not re.fullmatch(r"cuda:\d+", prefer):
        raise ValueError(f"device '{prefer}': expected 'auto', 'cpu', 'cuda' or 'cuda:N'")
    if not torch.cuda.is_available():
        if prefer != "auto":
            raise DeviceError(f"device '{prefer}' asked for, but {cuda_problem()}; set device: cpu or auto")
        if gpu_was_given():
            raise DeviceError(f"this job was given a GPU (CUDA_VISIBLE_DEVICES={','.join(visible_entries())}) but "
                              f"{cuda_problem()}; fix the environment, or set device: cpu and ask for no GPU")
        return torch.device("cpu")
    if prefer.startswith("cuda:"):
        index = int(prefer.split(":")[1])
        if index >= torch.cuda.device_count():
            raise DeviceError(f"device '{prefer}': only {torch.cuda.device_count()} GPU(s) visible")
        return torch.device(prefer)
    return torch.device("cuda", _claimed_card())


def dtype_name(dtype: torch.dtype | None) -> str:
    """``bf16`` / ``fp16`` for an autocast dtype, ``fp32`` for None (no autocast)."""
    return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))


def device_record(device: torch.device, dtype: torch.dtype | None) -> dict[str, Any]:
    """What a job ran on, for its log and its recorded config: ``device`` (``cpu``, ``cuda:0``: resolved, never
    ``auto``), ``dtype`` (``bf16`` / ``fp32``), ``gpu`` (the model name, or None on the CPU), ``capability``
    (``"8.0"``, or None), ``torch`` and ``cuda`` (torch's build; None for a CPU build)."""
    record = {"device": str(device), "dtype": dtype_name(dtype), "gpu": None, "capability": None,
              "torch": torch.__version__, "cuda": torch.version.cuda}
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        record.update(device=f"cuda:{index}", gpu=torch.cuda.get_device_name(index), capability=f"{major}.{minor}")
    return record


def describe(record: dict[str, Any]) -> str:
    """One log line of a :func:`device_record`: ``cuda:0 (NVIDIA A100, compute 8.0), bf16 autocast; torch 2.13.0,
    CUDA 13.0`` or ``cpu, fp32; torch 2.13.0``."""
    where = record["device"] + (f" ({record['gpu']}, compute {record['capability']})" if record["gpu"] else "")
    dtype = "bf16 autocast" if record["dtype"] == "bf16" else record["dtype"]
    build = f"torch {record['torch']}" + (f", CUDA {record['cuda']}" if record["cuda"] else "")
    return f"{where}, {dtype}; {build}"


def log_device(device: torch.device, dtype: torch.dtype | None, what: str = "running") -> dict[str, Any]:
    """Log ``<what> on <device record>`` and return the record (see :func:`device_record`)."""
    record = device_record(device, dtype)
    log.info("%s on %s", what, describe(record))
    return record


def log_job_device(device: torch.device, precision: str, transformer: bool, what: str) -> dict[str, Any]:
    """:func:`log_device` with the dtype ``precision`` resolves to for this model kind on ``device``
    (:func:`curricula.models.hf.autocast_dtype`)."""
    from curricula.models.hf import autocast_dtype

    return log_device(device, autocast_dtype(device, precision, transformer), what)

"""One job's runtime, resolved once at its start: torch's threads, deterministic kernels, the device it claims, the
autocast dtype its model runs under, and the device record it logs and writes.

Every job that runs a model (training, the teacher, the evaluation, G's fine-tuning and encoding, active learning)
starts with :func:`start_job` on its :class:`~curricula.training.spec.Runtime` settings, before any CUDA work, and
passes the :class:`JobRuntime` on; nothing below resolves a device or a precision again.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import torch

from curricula.models.device import describe, device_record, select_device
from curricula.models.hf import autocast_dtype
from curricula.training.determinism import arithmetic
from curricula.training.spec import Runtime

log = logging.getLogger(__name__)

#: cuBLAS's deterministic workspace (NVIDIA's documented values are ``:4096:8`` and ``:16:8``); 4096 KiB x 8
#: buffers (32 MiB of GPU memory per stream) keep cuBLAS fast, ``:16:8`` saves the memory at some speed
CUBLAS_WORKSPACE = ":4096:8"
CUBLAS_DETERMINISTIC = (":4096:8", ":16:8")


def use_deterministic(enabled: bool | None) -> bool:
    """Switch torch to deterministic algorithms when ``enabled`` (config ``deterministic``); return whether it did.

    Sets ``CUBLAS_WORKSPACE_CONFIG`` to :data:`CUBLAS_WORKSPACE` (unless it already holds one of NVIDIA's
    deterministic values; it must be set before the first cuBLAS call, so call this before any CUDA work),
    ``torch.use_deterministic_algorithms(True)`` (an op with no deterministic CUDA kernel then raises a
    RuntimeError naming it, rather than silently breaking reproducibility) and ``torch.backends.cudnn.benchmark =
    False`` (no timing-based choice of convolution kernels). The cost is speed on CUDA (deterministic backward
    kernels serialise what atomic adds did in parallel; how much slower a step gets depends on the model and is not
    measured yet: nothing of the CUDA path has run) and 32 MiB of GPU memory per stream for cuBLAS's workspace; on
    the CPU nothing changes (its kernels are deterministic already).

    ``enabled`` false or None (the default) changes nothing: torch's process-wide settings stay as they are.
    """
    if not enabled:
        return False
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in CUBLAS_DETERMINISTIC:
        if torch.cuda.is_initialized():
            log.warning("deterministic mode: CUDA is initialised already, so CUBLAS_WORKSPACE_CONFIG=%s may come too "
                        "late for cuBLAS handles created before", CUBLAS_WORKSPACE)
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    log.info("deterministic mode: deterministic torch algorithms, cudnn.benchmark off, CUBLAS_WORKSPACE_CONFIG=%s",
             os.environ["CUBLAS_WORKSPACE_CONFIG"])
    return True


def set_threads(n: int | None) -> int:
    """Use ``n`` CPU threads for torch's intra-op work (``None`` or < 1: leave as is); return the count in use."""
    if n is not None and n >= 1:
        torch.set_num_threads(int(n))
    return int(torch.get_num_threads())


@dataclass(frozen=True)
class JobRuntime:
    """What a job runs on: the claimed ``device``, the autocast ``dtype`` its model runs under (None = fp32), the
    ``precision`` knob it was resolved from (what the scoring helpers take), the intra-op ``threads`` in use, and the
    device ``record`` (:func:`curricula.models.device.device_record`) for its log and recorded config."""

    device: torch.device
    dtype: torch.dtype | None
    precision: str
    threads: int
    record: dict[str, Any]

    @property
    def arithmetic(self) -> dict[str, str]:
        """The arithmetic a checkpoint or a resumable state records (:func:`curricula.training.determinism.
        arithmetic`): a state of another arithmetic is never resumed."""
        return arithmetic(self.device, self.dtype)


def start_job(settings: Runtime, transformer: bool, what: str) -> JobRuntime:
    """Resolve a job's runtime once: set torch's threads (``settings.threads``; None leaves them), switch on
    deterministic kernels when asked (before any CUDA work), claim the device (:func:`select_device`: a GPU the job
    was given or planned with and cannot use stops it), resolve the autocast dtype of ``precision`` for this model
    kind (``transformer``: :func:`curricula.models.hf.autocast_dtype`) and log ``<what> on <device record>``."""
    threads = set_threads(settings.threads)
    use_deterministic(settings.deterministic)
    device = select_device(settings.device)
    dtype = autocast_dtype(device, settings.precision, transformer)
    record = device_record(device, dtype)
    log.info("%s on %s", what, describe(record))
    return JobRuntime(device, dtype, settings.precision, threads, record)


__all__ = ["JobRuntime", "start_job"]

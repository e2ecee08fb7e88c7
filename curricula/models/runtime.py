"""One job's runtime, resolved once at its start: torch's threads, deterministic kernels, the device it claims, the
autocast dtype its model runs under, and the device record it logs and writes.

Every job that runs a model (training, the teacher, the evaluation, G's fine-tuning and encoding, active learning)
starts with :func:`start_job` on its :class:`~curricula.training.spec.Runtime` settings, before any CUDA work, and
passes the :class:`JobRuntime` on; nothing below resolves a device or a precision again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from curricula.models.device import describe, device_record, select_device
from curricula.models.hf import autocast_dtype, set_threads
from curricula.training.determinism import arithmetic, use_deterministic
from curricula.training.spec import Runtime

log = logging.getLogger(__name__)


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

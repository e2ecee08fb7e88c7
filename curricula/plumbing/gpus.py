"""Which GPUs a host or a job has, without importing torch, and one card per job on a workstation.

Snakemake plans jobs before any of them imports torch, so the planner counts cards the way the driver and the
scheduler announce them: ``CUDA_VISIBLE_DEVICES`` when set (SLURM sets it to a job's allocation; an empty value or
``-1`` hides every card), else the driver's ``/proc/driver/nvidia/gpus`` entries.

A workstation runs ``gpus.slots`` GPU jobs per card (the ``gpu`` resource caps how many run at once); each job then
claims a slot of a card with an exclusive lock file keyed by the card's UUID in one host-wide folder
(:func:`claim_gpu`), held until the job's process ends, so runs with other ``CUDA_VISIBLE_DEVICES`` or of other users
never overfill a card. A SLURM job claims nothing: the scheduler gave it its card. What the plan gave a job
(:class:`JobGpus`: its ``gpu`` resource and the run's ``gpus`` settings) is recorded at its start.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: the driver's folder of one entry per installed NVIDIA card (absent without the driver)
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
#: values of CUDA_VISIBLE_DEVICES that hide every card
HIDDEN = ("", "-1", "none", "nodevfiles", "void")

_held: list[int] = []  # lock files this process holds (closed, and so released, when it exits)


def visible_entries(env: Mapping[str, str] | None = None) -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs, in order), ``[]`` when it hides every card, or
    None when it is unset (the driver decides)."""
    env = os.environ if env is None else env
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    value = value.strip()
    if value.lower() in HIDDEN:
        return []
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def visible_gpu_count(env: Mapping[str, str] | None = None, proc: Path = NVIDIA_PROC) -> int:
    """How many NVIDIA cards a process started with ``env`` would see: the ``CUDA_VISIBLE_DEVICES`` entries when
    set, else the driver's card entries (0 without the driver)."""
    entries = visible_entries(env)
    if entries is not None:
        return len(entries)
    try:
        return sum(1 for _ in proc.iterdir())
    except OSError:
        return 0


def gpu_was_given(env: Mapping[str, str] | None = None) -> bool:
    """Whether a scheduler gave this process one or more cards: ``CUDA_VISIBLE_DEVICES`` names at least one.
    A job that was given a card and cannot use it must fail rather than run on the CPU of a GPU allocation."""
    return bool(visible_entries(env))


#: the host-wide folder of per-card lock files (every user's jobs on a host see the same locks)
LOCK_FOLDER = Path(tempfile.gettempdir()) / "curricula-gpu-locks"
#: what a job planned with a GPU does when it sees no usable card (config ``gpus.missing``)
MISSING = ("stop", "cpu")


@dataclass(frozen=True)
class JobGpus:
    """What the plan gave a job of GPUs, and the run's GPU settings (config ``gpus``): ``planned`` cards (the job's
    ``gpu`` resource), ``slots`` jobs per card on a workstation, ``missing`` = ``stop`` or ``cpu`` for a job planned
    with a card that sees none."""

    planned: int = 0
    slots: int = 1
    missing: str = "stop"

    def __post_init__(self) -> None:
        if self.missing not in MISSING:
            raise ValueError(f"gpus.missing '{self.missing}': expected one of {list(MISSING)}")
        if self.slots < 1 or self.planned < 0:
            raise ValueError(f"gpus: slots {self.slots} (>= 1) and a planned count {self.planned} (>= 0)")

    @classmethod
    def of_job(cls, gpu_resource: int | str | None, settings: Mapping[str, int | str] | None) -> JobGpus:
        """From a job's ``gpu`` resource (Snakemake's ``resources.gpu``; absent or None = 0) and the config's
        ``gpus`` section (defaults where absent)."""
        settings = settings or {}
        return cls(planned=int(gpu_resource or 0), slots=int(settings.get("slots", 1)),
                   missing=str(settings.get("missing", "stop")))


_job = JobGpus()


def job_gpus() -> JobGpus:
    """What this process's job was planned with (:func:`planned_job`; no card outside a workflow job)."""
    return _job


@contextlib.contextmanager
def planned_job(resources: Mapping[str, Any] | None, config: Mapping[str, object] | None) -> Iterator[JobGpus]:
    """A workflow script's GPU context: what the plan gave its job (``snakemake.resources``' ``gpu``) and the run's
    ``gpus`` settings (``snakemake.config``), recorded for :func:`job_gpus` while the job runs, logged once."""
    global _job
    gpus = (config or {}).get("gpus")
    job = JobGpus.of_job((resources or {}).get("gpu"), gpus if isinstance(gpus, Mapping) else None)
    before, _job = _job, job
    if job.planned:
        log.info("planned with %d GPU(s); %d job(s) per card, a missing card: %s", job.planned, job.slots,
                 job.missing)
    try:
        yield job
    finally:
        _job = before


def under_scheduler(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a SLURM job (``SLURM_JOB_ID`` set): the scheduler gave it its cards, so it claims none."""
    env = os.environ if env is None else env
    return bool(env.get("SLURM_JOB_ID"))


def lock_folder() -> Path:
    """Where the per-card lock files live: one folder for the whole host (``CURRICULA_GPU_LOCKS`` overrides it),
    made world-writable with the sticky bit like /tmp, so that two users' runs on one workstation see each other's
    claims."""
    path = Path(os.environ.get("CURRICULA_GPU_LOCKS") or LOCK_FOLDER)
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):
            path.chmod(0o1777)
    return path


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(PermissionError):
        os.fchmod(fd, 0o666)  # another user's job must be able to open it (umask took bits away)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def lock_name(card: str, slot: int) -> str:
    """The lock file of one slot of a card: the card's UUID (``GPU-8f6c...``) made file-name safe."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", card) + f".slot{slot}.lock"


def claim_gpu(cards: Sequence[str], slots: int = 1, folder: Path | None = None, wait_s: float = 5.0,
              timeout_s: float | None = None) -> int:
    """The index (into ``cards``, the visible cards' UUIDs in torch's order) of a card with a free slot, locked for
    the rest of this process. Every job on the host, whatever its user or ``CUDA_VISIBLE_DEVICES``, locks the same
    file for the same card, so a card runs at most ``slots`` jobs at once. Slot 0 of every card is tried before any
    card's slot 1, so jobs spread over the cards. When every slot is held, waits ``wait_s`` between tries, logging
    once, up to ``timeout_s`` (None: no limit), then raises TimeoutError."""
    if not cards:
        raise ValueError("no card to claim")
    folder = lock_folder() if folder is None else folder
    start, logged = time.monotonic(), False
    while True:
        for slot in range(slots):
            for index, card in enumerate(cards):
                fd = _try_lock(folder / lock_name(card, slot))
                if fd is not None:
                    _held.append(fd)
                    return index
        if timeout_s is not None and time.monotonic() - start >= timeout_s:
            raise TimeoutError(f"all {slots} slot(s) of the {len(cards)} visible GPU(s) are held by other jobs (locks "
                               f"in {folder}); run fewer GPU jobs at once (--resources gpu=N) or raise gpus.slots")
        if not logged:
            log.warning("all %d slot(s) of the %d visible GPU(s) are held by other jobs; waiting (locks in %s)",
                        slots, len(cards), folder)
            logged = True
        time.sleep(wait_s)

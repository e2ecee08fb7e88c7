"""Which GPUs a host or a job has, without importing torch, and one card per job on a workstation.

Snakemake plans jobs before any of them imports torch, so the planner counts cards the way the driver and the
scheduler announce them: ``CUDA_VISIBLE_DEVICES`` when set (SLURM sets it to a job's allocation; an empty value or
``-1`` hides every card), else the driver's ``/proc/driver/nvidia/gpus`` entries.

A workstation with several cards runs one GPU job per card (the ``gpu`` resource caps how many run at once); each job
then claims a card of its own with an exclusive lock file (:func:`claim_gpu`), held until the job's process ends.
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

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


def lock_folder() -> Path:
    """Where the per-card lock files live: one folder per user under the system's temporary folder, shared by every
    job on this host (``CURRICULA_GPU_LOCKS`` overrides it)."""
    default = os.path.join(tempfile.gettempdir(), f"curricula-gpus-{os.getuid()}")
    path = Path(os.environ.get("CURRICULA_GPU_LOCKS") or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _try_lock(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def claim_gpu(count: int, folder: Path | None = None, wait_s: float = 5.0, timeout_s: float | None = None) -> int:
    """The index (0 .. ``count`` - 1, among the visible cards) of a card no other job on this host holds, locked for
    the rest of this process. With one card there is nothing to choose: 0, no lock (a SLURM job sees only its own
    allocation). When every card is held (more GPU jobs than the ``gpu`` resource allows), waits ``wait_s`` between
    tries, logging once, up to ``timeout_s`` (None: no limit), then raises TimeoutError."""
    if count <= 1:
        return 0
    folder = lock_folder() if folder is None else folder
    start, logged = time.monotonic(), False
    while True:
        for index in range(count):
            fd = _try_lock(folder / f"card{index}.lock")
            if fd is not None:
                _held.append(fd)
                return index
        if timeout_s is not None and time.monotonic() - start >= timeout_s:
            raise TimeoutError(f"all {count} GPUs are held by other jobs (locks in {folder}); run fewer GPU jobs at "
                               f"once (--resources gpu={count})")
        if not logged:
            log.warning("all %d GPUs are held by other jobs; waiting for one (locks in %s)", count, folder)
            logged = True
        time.sleep(wait_s)

"""Where a job ran and at which commit: the CPU class and the project's git commit, recorded with a trained run
(train's config.json) and with its ledger entry (curricula/study/entries.py)."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

#: The CPU flags that set a CPU's class, widest first (a change of class moves a run's values like a new seed).
CPU_CLASSES = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")


def cpu_info(cpuinfo: str | None = None) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (``model name``, ``flags``...); ``cpuinfo`` is its text (read
    when None; empty where it cannot be read)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_class(cpuinfo: str | None = None) -> str:
    """The machine's CPU class: its architecture and the widest of :data:`CPU_CLASSES` in its flags
    (``x86_64 avx512_bf16``); ``cpuinfo`` is /proc/cpuinfo's text (read when None)."""
    flags = set(cpu_info(cpuinfo).get("flags", "").split())
    widest = next((f for f in CPU_CLASSES if f in flags), "baseline")
    return f"{platform.machine()} {widest}"


def project_commit(where: str | Path | None = None) -> str:
    """The git commit of the checkout at ``where`` (default: the one this package's code is in, whatever the working
    directory), with ``+`` when tracked files changed; ``unknown`` outside a checkout."""
    where = Path(__file__).resolve().parent if where is None else where
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=30)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


__all__ = ["CPU_CLASSES", "cpu_class", "cpu_info", "project_commit"]

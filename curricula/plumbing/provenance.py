"""Where a job ran and at which commit: the CPU class, the machine and the project's git commit, recorded with a
trained run (train's config.json) and with its ledger entry (curricula/study/entries.py)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import uuid
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


#: The operating system's id of the machine, where it keeps one (systemd's, then D-Bus's).
SYSTEM_IDS = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))


def machine_folder() -> Path:
    """Where :func:`machine_key` keeps this machine's random id: ``$XDG_CACHE_HOME/curricula`` (default
    ``~/.cache/curricula``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "curricula"


def local_id(folder: Path) -> str:
    """A random id made the first time it is asked for and kept in ``folder/machine_id``. Two jobs asking at once
    get the same id: each writes its own file, and only the first hard link to the name wins. Raises OSError where
    ``folder`` cannot be written."""
    path = folder / "machine_id"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".machine_id.{os.getpid()}.{uuid.uuid4().hex}"
        tmp.write_text(uuid.uuid4().hex + "\n", encoding="ascii")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text(encoding="ascii").strip()


def machine_key(folder: Path | None = None, system_ids: tuple[Path, ...] = SYSTEM_IDS) -> str:
    """What tells this machine from others, for counting the machines a study ran on: the operating system's machine
    id (:data:`SYSTEM_IDS`; two cluster nodes sharing one home differ in it) and a random id kept in the user's cache
    folder (:func:`local_id` in ``folder``, default :func:`machine_folder`; two virtual machines cloned from one image
    share the system's id, not this one). Where the folder cannot be written, the host name stands in for the random
    id. Not secret, but not readable either: the ledger keeps a digest of it."""
    system = next((p.read_text(encoding="ascii").strip() for p in system_ids if p.is_file()), "")
    try:
        local = local_id(machine_folder() if folder is None else folder)
    except OSError:
        local = "host:" + socket.gethostname()
    return f"{system}/{local}"


__all__ = ["CPU_CLASSES", "SYSTEM_IDS", "cpu_class", "cpu_info", "local_id", "machine_folder", "machine_key",
           "project_commit"]

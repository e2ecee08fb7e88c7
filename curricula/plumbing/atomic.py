"""Atomic writes: a file or a folder is written under a hidden temporary name beside its destination and renamed
into place, so a killed job never leaves a half-written output behind (the tables of
:mod:`curricula.plumbing.contracts`, TREC runs, models, the report's files).
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Delete hidden temporaries (``.<name>.*.tmp`` / ``.old``) a killed writer of ``path`` left beside it.

    A SIGKILL skips every cleanup handler, so an atomic write interrupted at that moment leaves its temporary file
    or folder behind (never a partial ``path``). Snakemake runs one job per output, so at the start of the next
    write of ``path`` no other writer can own them. Returns what was removed.
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    stale = [p for p in path.parent.glob(f".{glob.escape(path.name)}.*") if p.name.endswith((".tmp", ".old"))]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return stale


def write_file_atomically(path: str | Path, write: Callable[[str], object]) -> Path:
    """Call ``write(tmp)`` on a hidden temporary file beside ``path``, fsync it and rename it to ``path``: the
    atomic write of the tables, TREC runs, text files and the report's CSV and Parquet files.

    Stale temporaries of ``path`` are removed first; on any error the temporary is removed and an existing
    ``path`` stays as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual permissions
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write a small text file (JSON state, a config echo, a Markdown page) in UTF-8, atomically
    (:func:`write_file_atomically`)."""
    return write_file_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_dir_atomically(out_dir: str | Path, fill: Callable[[Path], None]) -> Path:
    """Call ``fill(tmp)`` on a hidden temporary folder beside ``out_dir``, then rename it to ``out_dir``.

    An existing ``out_dir`` is replaced only once the new one is complete; on any error the temporary folder
    is removed and the old one (if any) stays in place.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    old = None
    try:
        fill(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
            os.replace(out_dir, old / "previous")
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "previous").exists() and not out_dir.exists():
            os.replace(old / "previous", out_dir)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return out_dir

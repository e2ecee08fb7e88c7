"""Test artefacts built once per test session, whatever the number of pytest-xdist workers: the first worker to
ask builds it under a file lock in the folder the session's workers share; the others wait for it and read it.

A build that fails (or skips) is recorded, so a worker asking later fails (or skips) with the same message instead of
building it again."""

from __future__ import annotations

import os
import shutil
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this test session shares: the session's base temporary folder (pytest-xdist gives
    each worker a sub-folder ``popen-gwN`` of it), or this process's own one when pytest runs without workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` that ``build(folder)`` filled, built by the first worker of the session to ask for it.
    Tests must not change it (copy it first)."""
    root = session_folder(tmp_path_factory) / "built_once"
    root.mkdir(exist_ok=True)
    folder = root / name
    done, failed, skipped = (root / f"{name}.{state}" for state in ("done", "failed", "skipped"))
    with FileLock(str(root / f"{name}.lock")):
        if skipped.exists():
            pytest.skip(skipped.read_text())
        if failed.exists():
            pytest.fail(f"building {name} failed (in another test's setup):\n{failed.read_text()}", pytrace=False)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            try:
                build(folder)
            except pytest.skip.Exception as reason:
                skipped.write_text(str(reason))
                raise
            except BaseException:
                failed.write_text(traceback.format_exc()[-6000:])
                raise
            done.touch()
    return folder


__all__ = ["built_once", "session_folder"]

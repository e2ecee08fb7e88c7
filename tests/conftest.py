"""Shared fixtures. Real data samples live in ../shared/data relative to the repo root (not shipped with the repo)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real public samples; tests that need it skip when a clone has no ../shared/data."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data samples not found at {SHARED_DATA} (only present next to the project's own clone)")
    return SHARED_DATA


def bench_module(name: str) -> ModuleType:
    """``bench/<name>.py`` loaded as a module (bench/ is not a package), registered in ``sys.modules`` under ``name``
    so that its dataclasses can look their module up."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def shared_file(shared_data: Path, *parts: str) -> Path:
    path = shared_data.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"sample file {path} is absent")
    return path


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """One finished run of the whole tiny workflow (tests.workflow_run.TINY_PRECOMPUTE: ingest -> ... -> report),
    shared by the end-to-end tests that compare against it. Tests must not change it: ``copy_run`` it first."""
    from tests.workflow_run import TINY_PRECOMPUTE, snakemake

    workdir = tmp_path_factory.mktemp("tiny_run")
    out = snakemake(workdir, config=TINY_PRECOMPUTE)
    assert out.returncode == 0, out.stderr[-3000:]
    return workdir

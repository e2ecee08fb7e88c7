"""Shared fixtures. Real data samples live in ../shared/data relative to the repo root (not shipped with the repo)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

#: CUDA_VISIBLE_DEVICES as the test run found it (None: unset); tests marked ``gpu`` give it back to what they start
ORIGINAL_CUDA_VISIBLE_DEVICES = os.environ.get("CUDA_VISIBLE_DEVICES")
# Every other test runs on the CPU, a GPU host's too (their reference outputs are the CPU's): no card is visible to
# this process or to the Snakemake runs and scripts it starts, whatever a config's `device: auto` would pick.
os.environ["CUDA_VISIBLE_DEVICES"] = ""
# OpenMP threads that wait for work sleep instead of spinning, here and in the Snakemake runs and scripts the tests
# start (set before torch loads libgomp). The suite runs a test per core (pytest-xdist), each with its own torch
# threads, so a spinning thread takes the core another process's thread needs: measured on 2 cores, a 6-layer
# MiniLM forward and backward cost 6-9x the CPU time of one thread with the default policy and 1.1x with this one.
# The arithmetic (the threads and how work is split between them) is the same either way.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def original_environment() -> dict[str, str]:
    """The environment with CUDA_VISIBLE_DEVICES as the test run found it (for the programs a ``gpu`` test starts)."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    if ORIGINAL_CUDA_VISIBLE_DEVICES is not None:
        env["CUDA_VISIBLE_DEVICES"] = ORIGINAL_CUDA_VISIBLE_DEVICES
    return env


@pytest.hookimpl(trylast=True)  # after ``-m`` and ``-k`` have deselected: the order is of the tests that run
def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist, the collection is put in :func:`tests.ordering.balanced_order` (each worker's share starts
    with its part of the long tests). Tests marked ``gpu`` are skipped, saying why, where the test run found no GPU."""
    from tests.ordering import LONGEST, balanced_order

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        names = [getattr(item, "originalname", item.name) for item in items]
        waits = {i for i, item in enumerate(items) if "tiny_run" in getattr(item, "fixturenames", ())}
        items[:] = [items[i] for i in balanced_order(names, LONGEST, workers, waits)]
    from curricula.plumbing.gpus import visible_gpu_count

    if visible_gpu_count(original_environment()):
        return
    skip = pytest.mark.skip(reason="no GPU here (CUDA_VISIBLE_DEVICES and the NVIDIA driver show none); the gpu tests "
                                   "need one")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real public samples; tests that need it skip when a clone has no ../shared/data."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data samples not found at {SHARED_DATA} (only present next to the project's own clone)")
    return SHARED_DATA


def script_module(path: str) -> ModuleType:
    """``<path>.py`` of the repository (a script of ``bench/`` or ``analyses/``, folders that are not packages) loaded
    as a module, registered in ``sys.modules`` under its file name so that its dataclasses can look their module up
    and a script beside it (``bench/benchmark_tsv.py``) imports."""
    file = REPO / f"{path}.py"
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    spec.loader.exec_module(module)
    return module


def run_script(path: str, *args: object, timeout: int = 600) -> str:
    """Run ``<path>.py`` of the repository (a bench or analysis script) with this Python, the repository importable,
    as a user would from the repository root; fail the test unless it exits 0; its standard output."""
    out = subprocess.run([sys.executable, str(REPO / f"{path}.py"), *map(str, args)], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=timeout)
    assert out.returncode == 0, f"{path} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def shared_file(shared_data: Path, *parts: str) -> Path:
    path = shared_data.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"sample file {path} is absent")
    return path


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """One finished run of the whole tiny workflow (tests.workflow_run.TINY_PRECOMPUTE: ingest -> ... -> report),
    built once per test session (tests.built_once: one worker builds it, the others wait for it) and shared by the
    end-to-end tests that compare against it. Tests must not change it: ``copy_run`` it first."""
    from tests.built_once import built_once
    from tests.workflow_run import TINY_PRECOMPUTE, snakemake

    def build(workdir: Path) -> None:
        out = snakemake(workdir, config=TINY_PRECOMPUTE)
        assert out.returncode == 0, out.stderr[-3000:]

    return built_once(tmp_path_factory, "tiny_run", build)


@pytest.fixture(scope="session")
def tiny_tree(tiny_run, tmp_path_factory) -> Path:
    """A copy of the tiny run for the bench and analysis scripts that read a finished run, with what they read and
    the tiny grid does not make: Penha's BERT_pred difficulty table, ``results/chitchat`` and ``benchmarks/chitchat``
    (links to the tiny dataset's folders, for the scripts that read the default dataset by its name) and the merged
    config as ``tiny.yaml``. The table is computed once per session; each worker gets its own copy (some scripts
    write beside the run)."""
    from curricula.plumbing.layout import Layout
    from tests.built_once import built_once
    from tests.workflow_run import TINY_PRECOMPUTE, copy_run

    tiny = Layout(dataset=TINY_PRECOMPUTE["dataset"]["name"])
    master = built_once(tmp_path_factory, "tiny_tree", lambda folder: _tiny_tree(tiny_run, folder / "run", tiny))
    tree = copy_run(master / "run", tmp_path_factory.mktemp("tiny_tree") / "run")
    chitchat = Layout(dataset="chitchat")
    for link, target in ((chitchat.root, tiny.root), (chitchat.benchmarks, tiny.benchmarks)):
        (tree / link).symlink_to(tree / target, target_is_directory=True)
    return tree


def _tiny_tree(tiny_run: Path, tree: Path, tiny) -> None:
    """``tree``: a copy of the tiny run with Penha's BERT_pred difficulty table and the merged config as tiny.yaml."""
    import yaml

    from curricula.plumbing.config import merge, read_yaml
    from tests.workflow_run import TINY_PRECOMPUTE, copy_run, snakemake

    copy_run(tiny_run, tree)
    out = snakemake(tree, tiny.difficulty_function("bert_pred"), config=TINY_PRECOMPUTE)
    assert out.returncode == 0, out.stderr[-3000:]
    (tree / "tiny.yaml").write_text(yaml.safe_dump(merge(read_yaml(REPO / "config.yaml"), TINY_PRECOMPUTE)))


@pytest.fixture(scope="session")
def tiny_plans(tmp_path_factory) -> dict[str, str]:
    """The standard output of a dry run (``snakemake -n``) in an empty folder of each config of
    tests.workflow_run.PLANNED (the tiny config, and the same with G's fine-tuning on), made once per session for the
    tests that read which jobs such a run plans."""
    from tests.built_once import built_once
    from tests.workflow_run import PLANNED, snakemake

    def build(folder: Path) -> None:
        for name, config in PLANNED.items():
            (folder / name).mkdir()
            out = snakemake(folder / name, "-n", config=config)
            assert out.returncode == 0, out.stderr[-3000:]
            (folder / f"{name}.out").write_text(out.stdout)

    folder = built_once(tmp_path_factory, "tiny_plans", build)
    return {name: (folder / f"{name}.out").read_text() for name in PLANNED}

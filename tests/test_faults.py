"""Faults: a job killed with SIGKILL in the middle of its work leaves no partial output, and re-running the
workflow completes with outputs equal, byte for byte, to an uninterrupted run.

Each case starts the tiny workflow, waits until the victim job's process has done part of its work (half of the CPU
time the same job took in the uninterrupted run, or for training until a checkpoint exists), kills it with
SIGKILL (what the OOM killer or a lost node does), checks that Snakemake reports the failure and that no output,
hidden temporary file or incomplete marker of the job is left, then re-runs and compares every table.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.built_once import built_once
from tests.workflow_run import REPO, TINY_PRECOMPUTE, copy_run

pytestmark = pytest.mark.slow  # Snakemake runs of the tiny workflow

# training long enough to be killed between checkpoints (steps are milliseconds on the 1-layer model)
FAULTS = {**TINY_PRECOMPUTE, "difficulty": {"functions": ["random"]},
          "train": {**TINY_PRECOMPUTE["train"], "steps": 60, "eval_every": 10, "checkpoint_every": 10}}
RES = Path("results/tiny")
TARGETS = [str(RES / "dense/neighbors.parquet"), str(RES / "bm25/run.parquet"),
           str(RES / "experiments/baseline/seed=1/dev_curve.parquet")]


def command(workdir: Path, targets: list[str] = TARGETS) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
            "--cores", "1", *targets, "--configfile", str(workdir / "config.test.yaml")]


def prepare(workdir: Path) -> None:
    import yaml

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.test.yaml").write_text(yaml.safe_dump(FAULTS))


def env() -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}


@pytest.fixture(scope="module")
def reference(tiny_run, tmp_path_factory) -> Path:
    """The uninterrupted run of the cases' targets, once per session (tests.built_once): a copy of the session's tiny
    run (FAULTS is its config up to the training, so its tables are this config's) carried on to FAULTS' longer
    training."""

    def build(folder: Path) -> None:
        wd = copy_run(tiny_run, folder / "run")
        prepare(wd)
        out = subprocess.run(command(wd), capture_output=True, text=True, env=env(), timeout=900)
        assert out.returncode == 0, out.stderr[-3000:]

    return built_once(tmp_path_factory, "faults_reference", build) / "run"


def job_pids(script: str, workdir: Path) -> list[int]:
    """PIDs of this workflow's running ``script`` processes: Snakemake runs a copy named
    ``<workdir>/.snakemake/scripts/tmp*.<script>``, so other workflows on the machine are never touched."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.decode(errors="replace").startswith(f"{workdir}/.snakemake/scripts/")
               and a.decode(errors="replace").endswith(f".{script}") for a in argv):
            pids.append(int(proc.name))
    return pids


def benchmark_cpu_seconds(reference: Path, name: str) -> float:
    """The CPU time the job took in the uninterrupted run (its benchmark file's ``cpu_time``)."""
    return float(pl.read_csv(reference / "benchmarks" / "tiny" / f"{name}.tsv", separator="\t")["cpu_time"][0])


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time (user + system, all threads) the processes ``pids`` have used so far, from /proc: unlike their
    wall time, it does not stretch when other work shares the cores."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / os.sysconf("SC_CLK_TCK")


def tables(root: Path) -> list[Path]:
    res = root / RES
    return sorted(p.relative_to(root) for pattern in ("*.parquet", "*.trec", "*.safetensors")
                  for p in res.rglob(pattern))


CASES = {
    # rule: (workflow script, benchmark file, what shows the job is under way, the targets that need the job)
    "ingest": ("ingest.py", "ingest", None, [str(RES / "data/queries.parquet")]),
    "bm25_index": ("bm25_index.py", "bm25_index", None, [TARGETS[1]]),
    "dense_encode_shard": ("dense_encode_shard.py", "dense_encode_shard/docs.1-of-1", None,
                           [str(RES / "dense/docs.parquet")]),
    "train": ("train.py", "train/baseline/seed=1", "experiments/baseline/seed=1/model.checkpoint/checkpoint.pt",
              [TARGETS[2]]),
}


@pytest.mark.parametrize("rule", list(CASES))
def test_sigkill_mid_job_then_rerun_equals_uninterrupted(rule, reference, tmp_path):
    script, bench, marker, targets = CASES[rule]
    wd = tmp_path / "faulted"
    prepare(wd)
    proc = subprocess.Popen(command(wd, targets), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env())
    # half of the CPU time the job took uninterrupted: its progress, whatever else shares the cores
    share = 0.5 * benchmark_cpu_seconds(reference, bench)
    killed = False
    deadline = time.time() + 600
    while proc.poll() is None and time.time() < deadline and not killed:
        pids = job_pids(script, wd)
        ready = pids and (marker is None and cpu_seconds(pids) >= share
                          or marker is not None and (wd / RES / marker).exists())
        if ready:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.02)
    log = proc.communicate(timeout=600)[0]
    assert killed, f"{rule}'s job finished before it could be killed:\n{log[-2000:]}"
    assert proc.returncode != 0, log[-2000:]
    assert f"Error in rule {rule}" in log, log[-3000:]
    # every table that exists after the kill is whole (atomic writes: a partial Parquet would not read)
    for table in (wd / RES).rglob("*.parquet"):
        pl.read_parquet(table)
    again = subprocess.run(command(wd, targets), capture_output=True, text=True, env=env(), timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    # nothing half-written is left: no hidden temporary table or folder, no incomplete marker
    leftovers = [p for p in (wd / RES).rglob(".*") if p.name.endswith((".tmp", ".old"))]
    assert leftovers == [], leftovers
    incomplete = wd / ".snakemake" / "incomplete"
    assert not incomplete.exists() or not any(incomplete.iterdir())
    if marker is not None:
        assert "resum" in (wd / "logs" / "tiny" / "train" / "baseline" / "seed=1.log").read_text().lower()
    files = tables(wd)
    assert set(files) <= set(tables(reference)) and len(files) >= 4
    for rel in files:
        assert (reference / rel).read_bytes() == (wd / rel).read_bytes(), rel

"""The Snakemake workflow itself, run as a user would, in a temporary working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from curricula.tables import CANDIDATES, DOCS, QRELS, QUERIES, read_table

REPO = Path(__file__).resolve().parents[1]
TINY = {"dataset": {"name": "tiny", "format": "chitchat",
                    "options": {"max_instances": {"train": 40, "dev": 10, "test": 10}, "max_context_turns": 4}}}


def snakemake(workdir: Path, *args: str, config: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", "2"]
    if config is not None:
        path = workdir / "config.test.yaml"
        path.write_text(yaml.safe_dump(config))
        cmd += ["--configfile", str(path)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    return subprocess.run(cmd + list(args), capture_output=True, text=True, env=env, timeout=900)


def test_dry_run_lists_the_dag(tmp_path):
    out = snakemake(tmp_path, "-n")
    assert out.returncode == 0, out.stderr
    assert "ingest" in out.stdout


def test_ingest_runs_and_second_run_does_nothing(tmp_path):
    out = snakemake(tmp_path, "--until", "ingest", config=TINY)
    assert out.returncode == 0, out.stderr
    data = tmp_path / "results" / "tiny" / "data"
    tables = {name: read_table(data / f"{name}.parquet", spec) for name, spec in
              [("queries", QUERIES), ("docs", DOCS), ("qrels", QRELS), ("candidates", CANDIDATES)]}
    assert tables["queries"].group_by("split").len().sort("split")["len"].to_list() == [10, 10, 40]
    assert (tmp_path / "logs" / "tiny" / "ingest.log").read_text().count("wrote") == 4
    assert (tmp_path / "benchmarks" / "tiny" / "ingest.tsv").exists()
    again = snakemake(tmp_path, config=TINY)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_same_config_gives_identical_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for wd in (a, b):
        wd.mkdir()
        assert snakemake(wd, config=TINY).returncode == 0
    for name in ("queries", "docs", "qrels", "candidates"):
        rel = Path("results/tiny/data") / f"{name}.parquet"
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), name


def test_bad_config_stops_before_any_job(tmp_path):
    bad = {"dataset": {**TINY["dataset"], "optoins": {}}}
    out = snakemake(tmp_path, config=bad)
    assert out.returncode != 0
    assert "'optoins' was unexpected" in out.stderr + out.stdout
    assert not (tmp_path / "results").exists()


def test_broken_input_fails_with_position_and_leaves_no_parquet(tmp_path):
    broken = tmp_path / "dataset.json"
    broken.write_text('{\n "x": {"messages": [[{"text": "hi", "sender": "a"}]],\n}\n')
    cfg = {"dataset": {**TINY["dataset"], "files": {"json": str(broken)}}}
    out = snakemake(tmp_path, config=cfg)
    assert out.returncode != 0
    log = (tmp_path / "logs" / "tiny" / "ingest.log").read_text()
    assert f"{broken}:3: invalid JSON" in log
    data = tmp_path / "results" / "tiny" / "data"
    assert not data.exists() or not any(data.iterdir())

"""The datasets page's "Bring your own data" walk-through, run as written: its `make run ARGS="..."` commands on its
tiny TREC example (docs/examples/byod), in a copy of the example under a temporary working directory."""

from __future__ import annotations

import re
import shlex
import shutil

import polars as pl
import pytest

from tests.workflow_run import REPO, jobs_of, snakemake

PAGE = REPO / "docs" / "datasets.md"
EXAMPLE = REPO / "docs" / "examples" / "byod"


def walkthrough_commands() -> list[list[str]]:
    """The Snakemake arguments of each `make run ARGS="..."` line of the page's walk-through, in order."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Bring your own data"):]
    return [shlex.split(args) for args in re.findall(r'^\s*make run ARGS="([^"]*)"\s*$', section, flags=re.M)]


def test_the_example_is_what_its_script_writes(tmp_path):
    import runpy

    script = tmp_path / "make_example.py"
    shutil.copy(EXAMPLE / "make_example.py", script)
    runpy.run_path(str(script), run_name="__main__")
    for name in ("collection.tsv", "queries.tsv", "qrels.txt"):
        assert (tmp_path / name).read_bytes() == (EXAMPLE / name).read_bytes(), name


@pytest.mark.slow
def test_the_walkthrough_runs_as_written(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "docs" / "examples" / "byod")
    dry, ingest, run = walkthrough_commands()
    assert dry == ["--configfile", "docs/examples/byod/byod.yaml", "-n"]
    out = snakemake(tmp_path, *dry)
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = jobs_of(out.stdout)
    assert {"ingest", "teacher_score", "train", "report_tables"} <= jobs and not (tmp_path / "results").exists()
    # one difficulty function, and nothing that reads G: no dense job is planned
    assert not {job for job in jobs if job.startswith("dense_")} and "difficulty_function" in jobs
    out = snakemake(tmp_path, *ingest)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "queries per split (as ingested, after dataset.keep_queries): train 48, dev 6, test 6" in out.stdout
    out = snakemake(tmp_path, *run)
    assert out.returncode == 0, out.stderr[-3000:]
    table = tmp_path / "results" / "byod" / "report" / "table_seeds.md"
    assert table.is_file() and "penha_bert_pred_root2" in table.read_text()
    assert "Best dev value per trained ranker" in out.stdout and table.read_text() in out.stdout
    metrics = pl.read_parquet(tmp_path / "results" / "byod" / "experiments" / "baseline" / "seed=1" / "metrics.parquet")
    assert metrics["qid"].n_unique() == 6

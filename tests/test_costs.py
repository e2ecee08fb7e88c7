"""What a run cost: CPU time and peak memory from Snakemake's benchmark files (curricula/study/costs.py), recorded
in its ledger entry (curricula/study/entries.py).

Snakemake writes these files itself; the study workflow test (tests/test_workflow_study.py) reads real ones. Here a
benchmark folder is laid out by hand, in Snakemake's format, so each counted and excluded file is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from curricula.plumbing.errors import InputFormatError
from curricula.study.costs import active_benchmark_files, benchmark_cpu_seconds, benchmark_value, run_benchmark_files
from curricula.study.entries import run_cost

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time"


def _bench(path: Path, *cpu: str | float) -> Path:
    """A benchmark file with one row per run (the last is the job's latest), ``cpu`` its cpu_time values."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"10.0\t0:00:10\t100.0\t200.0\t90.0\t95.0\t0.1\t0.2\t50.0\t{c}" for c in cpu]
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def test_the_last_row_is_the_jobs_latest_run_and_na_counts_zero(tmp_path):
    assert benchmark_cpu_seconds(_bench(tmp_path / "a.tsv", 5.0, 7.25)) == 7.25
    assert benchmark_cpu_seconds(_bench(tmp_path / "b.tsv", "NA")) == 0.0


@pytest.mark.parametrize(("text", "where", "problem"), [
    ("s\tmax_rss\n1\t2\n", ":1:", "no cpu_time column"),
    (HEADER + "\n", ": ", "without a measured run"),
    (HEADER + "\n1\t0:00:01\t1\t1\t1\t1\t1\t1\t1\tfast\n", ":2:", "cpu_time 'fast' is not a number"),
    (HEADER + "\n1\t0:00:01\t1\n", ":2:", "3 fields, the header has 10"),
    (HEADER + "\n1\t0:00:01\t1\t1\t1\t1\t1\t1\t1\t-3\n", ":2:", "not a non-negative number"),
])
def test_a_broken_benchmark_file_is_named_with_its_line(tmp_path, text, where, problem):
    path = tmp_path / "bad.tsv"
    path.write_text(text)
    with pytest.raises(InputFormatError, match=problem) as err:
        benchmark_cpu_seconds(path)
    assert str(err.value).startswith(f"{path}{where}")


def test_a_runs_cost_is_its_training_selection_and_evaluation(tmp_path):
    folder = tmp_path / "benchmarks" / "wikiqa"
    _bench(folder / "ingest.tsv", 360)                                   # a stage before training: no run's
    for experiment in ("baseline", "penha"):
        _bench(folder / "train" / experiment / "seed=1.tsv", 900)
        _bench(folder / "evaluate" / experiment / "seed=1.tsv", 18)
    _bench(folder / "train" / "tuned@weighting.m=1" / "seed=1.tsv", 400)  # a tuned experiment's values
    _bench(folder / "train" / "tuned@weighting.m=2" / "seed=1.tsv", 500)
    _bench(folder / "select_tuned" / "tuned" / "seed=1.tsv", 10)
    _bench(folder / "evaluate" / "tuned" / "seed=1.tsv", 20)
    _bench(folder / "active" / "dasl" / "seed=1.tsv", 3600)
    tuned = run_benchmark_files(folder, "tuned", 1)
    assert [p.relative_to(folder).as_posix() for p in tuned] == [
        "train/tuned@weighting.m=1/seed=1.tsv", "train/tuned@weighting.m=2/seed=1.tsv",
        "select_tuned/tuned/seed=1.tsv", "evaluate/tuned/seed=1.tsv"]
    assert run_cost(tuned) == {"cpu_seconds": 930.0, "peak_rss_mb": 100.0}
    assert run_cost(run_benchmark_files(folder, "baseline", 1))["cpu_seconds"] == 918.0
    assert run_benchmark_files(folder, "baseline", 2) == [] and run_cost([]) == {"cpu_seconds": 0.0,
                                                                                  "peak_rss_mb": 0.0}
    assert [p.name for p in active_benchmark_files(folder, "dasl", 1)] == ["seed=1.tsv"]
    assert active_benchmark_files(folder, "dasl", 2) == []
    assert benchmark_value(folder / "ingest.tsv", "max_rss") == 100.0


def test_an_experiment_name_with_glob_characters_matches_itself_only(tmp_path):
    folder = tmp_path / "b"
    _bench(folder / "train" / "x[1]@m=1" / "seed=1.tsv", 1)
    _bench(folder / "train" / "x1@m=1" / "seed=1.tsv", 1)
    assert [p.parent.name for p in run_benchmark_files(folder, "x[1]", 1)] == ["x[1]@m=1"]

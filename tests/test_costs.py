"""The cost per dataset on the findings page: CPU time from Snakemake's benchmark files (curricula/study/costs.py).

Snakemake writes these files itself; the study workflow test (tests/test_workflow.py) reads real ones. Here a
benchmark folder is laid out by hand, in Snakemake's format, so each counted and excluded file is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from curricula.plumbing.errors import InputFormatError
from curricula.study.costs import (
    CORE_HOUR,
    benchmark_cpu_seconds,
    dataset_costs,
    run_benchmark_files,
    stage_benchmark_files,
)

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


def test_a_datasets_cost_is_its_stages_plus_the_runs_the_page_rests_on(tmp_path):
    folder = tmp_path / "benchmarks" / "wikiqa"
    for stage, cpu in (("ingest.tsv", 360), ("bm25_run_shard/1-of-1.tsv", 720), ("teacher_train.tsv", 1800),
                       ("evaluate/reference_bm25.tsv", 36)):
        _bench(folder / stage, cpu)
    for experiment in ("baseline", "penha"):
        for seed in (1, 2):
            _bench(folder / "train" / experiment / f"seed={seed}.tsv", 900 if experiment == "baseline" else 1000)
            _bench(folder / "evaluate" / experiment / f"seed={seed}.tsv", 18)
    _bench(folder / "train" / "hcl" / "seed=1.tsv", 5000)             # a run no claim names: not the page's
    _bench(folder / "train" / "tuned@weighting.m=1" / "seed=1.tsv", 400)  # a tuned experiment's values
    _bench(folder / "train" / "tuned@weighting.m=2" / "seed=1.tsv", 500)
    _bench(folder / "select_tuned" / "tuned" / "seed=1.tsv", 10)
    _bench(folder / "evaluate" / "tuned" / "seed=1.tsv", 20)
    _bench(folder / "active" / "dasl" / "seed=1.tsv", 3600)
    assert [p.relative_to(folder).as_posix() for p in stage_benchmark_files(folder)] == [
        "bm25_run_shard/1-of-1.tsv", "evaluate/reference_bm25.tsv", "ingest.tsv", "teacher_train.tsv"]
    assert [p.relative_to(folder).as_posix() for p in run_benchmark_files(folder, "tuned", 1)] == [
        "train/tuned@weighting.m=1/seed=1.tsv", "train/tuned@weighting.m=2/seed=1.tsv",
        "select_tuned/tuned/seed=1.tsv", "evaluate/tuned/seed=1.tsv"]
    runs = [("baseline", "1"), ("baseline", "2"), ("penha", "1"), ("penha", "2"), ("tuned", "1"),
            ("penha", "3"), ("baseline", "1")]  # seed 3 never ran here; a repeated pair counts once
    costs = dataset_costs({"wikiqa": folder, "empty": tmp_path / "nothing"}, {"wikiqa": runs},
                          {"wikiqa": [("dasl", 1), ("random", 1)]})
    row = costs.row(0, named=True)
    assert row["stage_jobs"] == 4 and row["stage_core_hours"] == pytest.approx(2916 / CORE_HOUR)
    run_seconds = 2 * 900 + 2 * 1000 + 4 * 18 + 400 + 500 + 10 + 20 + 3600
    assert row["runs"] == 8 and row["run_jobs"] == 8 + 4 + 1 and row["runs_unmeasured"] == 2
    assert row["run_core_hours"] == pytest.approx(run_seconds / CORE_HOUR)
    assert row["core_hours"] == pytest.approx((2916 + run_seconds) / CORE_HOUR)
    empty = costs.row(1, named=True)
    assert (empty["stage_jobs"], empty["runs"], empty["core_hours"]) == (0, 0, 0.0)


def test_an_experiment_name_with_glob_characters_matches_itself_only(tmp_path):
    folder = tmp_path / "b"
    _bench(folder / "train" / "x[1]@m=1" / "seed=1.tsv", 1)
    _bench(folder / "train" / "x1@m=1" / "seed=1.tsv", 1)
    assert [p.parent.name for p in run_benchmark_files(folder, "x[1]", 1)] == ["x[1]@m=1"]

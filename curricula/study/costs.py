"""What a study cost: the CPU time of its jobs, per dataset, in core-hours, from Snakemake's ``benchmark:`` files.

Every rule writes a benchmark file under its dataset's folder (``benchmarks/<dataset>``, or ``benchmarks/<results,
joined by _>/<dataset>``; :func:`curricula.plumbing.config.side_folder`): a tab-separated table whose last row is the
job's
latest run, with ``s`` (wall seconds) and ``cpu_time`` (CPU seconds of the job's processes, all threads: user plus
system). A core-hour is 3,600 CPU seconds, so a job that keeps two cores busy for an hour costs two.

A dataset's cost on the findings page (:func:`dataset_costs`) is the sum of two parts:
- the runs the page rests on: for each (experiment, seed) whose metrics it reads, the training, the selection of a
  tuned value and the evaluation (``train/<experiment>[@<tuned>]/seed=<s>``, ``select_tuned/...``,
  ``evaluate/...``), and for each active-learning run its loop (``active/<method>/seed=<s>``);
- the stages before training and the references: every other benchmark file of the dataset's folder, outside the
  per-run folders (BM25, embeddings, the teacher, difficulty, curricula, the BM25 and teacher references, the
  dataset's report tables). A stage that an earlier config of the same folder ran and this one no longer needs is
  counted too: the folder keeps one file per job, not which configs asked for it.
Runs of the grid that no claim names are left out: they are the dataset's own report's, not the page's.
"""

from __future__ import annotations

import glob
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import polars as pl

from curricula.plumbing.errors import InputFormatError

#: The folders of a dataset's benchmark folder that hold one file per run (experiment or method, then seed).
RUN_FOLDERS = ("train", "select_tuned", "evaluate", "active")
#: Seconds in a core-hour.
CORE_HOUR = 3600.0
#: Columns of :func:`dataset_costs`.
COSTS_SCHEMA = {"dataset": pl.String, "stage_jobs": pl.Int64, "stage_core_hours": pl.Float64, "runs": pl.Int64,
                "run_jobs": pl.Int64, "run_core_hours": pl.Float64, "runs_unmeasured": pl.Int64,
                "core_hours": pl.Float64}


def benchmark_cpu_seconds(path: str | Path) -> float:
    """The CPU seconds (``cpu_time``) of the last row of one Snakemake benchmark file, the job's latest run.

    Snakemake writes ``NA`` where it could not measure; that row counts 0 (the job's wall time is not CPU time).
    A file without a ``cpu_time`` column or without a data row, or with a value that is not a number, raises
    :class:`~curricula.plumbing.errors.InputFormatError` naming the file and line."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t") if lines else []
    if "cpu_time" not in header:
        raise InputFormatError(path, 1, f"not a Snakemake benchmark file: no cpu_time column in its header {header}")
    rows = [(number, line) for number, line in enumerate(lines[1:], start=2) if line.strip()]
    if not rows:
        raise InputFormatError(path, None, "a benchmark file without a measured run (header only)")
    number, line = rows[-1]
    fields = line.split("\t")
    if len(fields) != len(header):
        raise InputFormatError(path, number, f"{len(fields)} fields, the header has {len(header)}")
    value = fields[header.index("cpu_time")]
    if value in ("NA", ""):
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        raise InputFormatError(path, number, f"cpu_time {value!r} is not a number") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise InputFormatError(path, number, f"cpu_time {value!r} is not a non-negative number of seconds")
    return seconds


def run_benchmark_files(folder: str | Path, experiment: str, seed: str | int) -> list[Path]:
    """The benchmark files of one trained run of ``folder`` (a dataset's benchmark folder) that exist: its training
    (and the trainings of a tuned experiment's values, ``<experiment>@...``), the selection of its tuned value and its
    evaluation."""
    folder = Path(folder)
    name = f"seed={seed}.tsv"
    files = [folder / "train" / experiment / name]
    files += sorted(p for p in (folder / "train").glob(f"{glob.escape(experiment)}@*/{name}"))
    files += [folder / "select_tuned" / experiment / name, folder / "evaluate" / experiment / name]
    return [p for p in files if p.is_file()]


def stage_benchmark_files(folder: str | Path) -> list[Path]:
    """Every benchmark file of a dataset's folder outside its per-run folders (:data:`RUN_FOLDERS`' subfolders):
    the stages before training, the references (``evaluate/reference_<name>.tsv``) and the dataset's reports."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.rglob("*.tsv")):
        parts = path.relative_to(folder).parts
        if parts[0] in RUN_FOLDERS and len(parts) > 2:
            continue
        out.append(path)
    return out


def dataset_costs(folders: Mapping[str, str | Path], runs: Mapping[str, Iterable[tuple[str, str]]],
                  active_runs: Mapping[str, Iterable[tuple[str, str]]] | None = None) -> pl.DataFrame:
    """One row per dataset of ``folders`` ({dataset: its benchmark folder}): the CPU time of the stages before
    training (``stage_jobs`` files, ``stage_core_hours``) and of the ``runs`` the findings page rests on ({dataset:
    (experiment, seed) pairs}, trained experiments, not ``+bm25`` forms; ``active_runs``: {dataset: (method, seed)}),
    with ``run_jobs`` files in ``run_core_hours``, ``runs_unmeasured`` runs without any benchmark file (trained
    elsewhere, or their files deleted: their cost is missing from the sum), and the total ``core_hours``."""
    rows = []
    for dataset, folder in folders.items():
        stages = stage_benchmark_files(folder)
        stage_seconds = sum(benchmark_cpu_seconds(p) for p in stages)
        run_files: list[Path] = []
        unmeasured = 0
        pairs = list(dict.fromkeys((str(e), str(s)) for e, s in runs.get(dataset, ())))
        active = list(dict.fromkeys((str(m), str(s)) for m, s in (active_runs or {}).get(dataset, ())))
        for experiment, seed in pairs:
            files = run_benchmark_files(folder, experiment, seed)
            unmeasured += not files
            run_files += files
        for method, seed in active:
            path = Path(folder) / "active" / method / f"seed={seed}.tsv"
            unmeasured += not path.is_file()
            run_files += [path] if path.is_file() else []
        run_seconds = sum(benchmark_cpu_seconds(p) for p in run_files)
        rows.append({"dataset": dataset, "stage_jobs": len(stages), "stage_core_hours": stage_seconds / CORE_HOUR,
                     "runs": len(pairs) + len(active), "run_jobs": len(run_files),
                     "run_core_hours": run_seconds / CORE_HOUR, "runs_unmeasured": unmeasured,
                     "core_hours": (stage_seconds + run_seconds) / CORE_HOUR})
    return pl.DataFrame(rows, schema=COSTS_SCHEMA)

"""What a run cost, from Snakemake's ``benchmark:`` files: the CPU time and peak memory of its jobs, recorded with
its ledger entry (curricula/study/entries.py).

Every rule writes a benchmark file under its dataset's folder (``benchmarks/<dataset>``, or ``benchmarks/<results,
joined by _>/<dataset>``; :func:`curricula.plumbing.config.side_folder`): a tab-separated table whose last row is the
job's latest run, with ``s`` (wall seconds), ``cpu_time`` (CPU seconds of the job's processes, all threads: user plus
system) and ``max_rss`` (peak resident memory, MB). A run's jobs are its training (and the trainings of a tuned
experiment's values), the selection of a tuned value and its evaluation, or an active-learning loop.
"""

from __future__ import annotations

import glob
import math
from pathlib import Path

from curricula.plumbing.errors import InputFormatError


def benchmark_value(path: str | Path, column: str = "cpu_time") -> float:
    """The ``column`` (``cpu_time``: CPU seconds; ``max_rss``: peak resident memory in MB) of the last row of one
    Snakemake benchmark file, the job's latest run.

    Snakemake writes ``NA`` where it could not measure; that row counts 0 (the job's wall time is not CPU time).
    A file without the column or without a data row, or with a value that is not a number, raises
    :class:`~curricula.plumbing.errors.InputFormatError` naming the file and line."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t") if lines else []
    if column not in header:
        raise InputFormatError(path, 1, f"not a Snakemake benchmark file: no {column} column in its header {header}")
    rows = [(number, line) for number, line in enumerate(lines[1:], start=2) if line.strip()]
    if not rows:
        raise InputFormatError(path, None, "a benchmark file without a measured run (header only)")
    number, line = rows[-1]
    fields = line.split("\t")
    if len(fields) != len(header):
        raise InputFormatError(path, number, f"{len(fields)} fields, the header has {len(header)}")
    value = fields[header.index(column)]
    if value in ("NA", "-", ""):
        return 0.0
    try:
        number_value = float(value)
    except ValueError:
        raise InputFormatError(path, number, f"{column} {value!r} is not a number") from None
    if not math.isfinite(number_value) or number_value < 0:
        raise InputFormatError(path, number, f"{column} {value!r} is not a non-negative number")
    return number_value


def benchmark_cpu_seconds(path: str | Path) -> float:
    """The CPU seconds (``cpu_time``) of a benchmark file's latest run (:func:`benchmark_value`)."""
    return benchmark_value(path, "cpu_time")


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


def active_benchmark_files(folder: str | Path, method: str, seed: str | int) -> list[Path]:
    """The benchmark file of one active-learning loop of ``folder`` (a dataset's benchmark folder), when it exists."""
    path = Path(folder) / "active" / method / f"seed={seed}.tsv"
    return [path] if path.is_file() else []

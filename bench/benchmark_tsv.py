"""The one reader of Snakemake ``benchmark:`` files (``benchmarks/<dataset>/**.tsv``) for the bench scripts.

A benchmark file is a tab-separated table with a header (``s``, ``h:m:s``, ``max_rss``, ..., ``cpu_time``) and one
row per measured run of the job; the last row is the job's latest run. ``max_rss`` (MB) is ``NA`` where Snakemake
could not measure it. ``bench_scale.py`` and ``plan_cluster.py`` read their times and peaks from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import polars as pl

#: The columns :func:`last_rows` keeps: wall seconds, CPU seconds and peak resident memory in MB.
COLUMNS = {"s": pl.Float64, "cpu_time": pl.Float64, "max_rss": pl.Float64}


def benchmark_files(root: Path, patterns: Iterable[str]) -> list[Path]:
    """The files under ``root`` that match each glob pattern of ``patterns``, pattern by pattern."""
    return [path for pattern in patterns for path in root.glob(pattern)]


def last_rows(files: Sequence[Path]) -> pl.DataFrame:
    """The last row of each benchmark file, in the order of ``files``: :data:`COLUMNS` as Float64, ``NA`` as null."""
    rows = [pl.read_csv(f, separator="\t").tail(1).select(pl.col(c).cast(t, strict=False) for c, t in COLUMNS.items())
            for f in files]
    return pl.concat(rows) if rows else pl.DataFrame(schema=COLUMNS)

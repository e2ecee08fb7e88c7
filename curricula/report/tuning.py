"""The report's tuning table (rule ``report_tuning``): every tuned run's dev result per (experiment, seed), the
chosen one marked (:func:`curricula.experiments.tuning.selection` makes each seed's choice)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from curricula.experiments.tuning import SELECTION
from curricula.plumbing.contracts import read_table
from curricula.report.tables import write_table_files


def tuning_table(selections: Mapping[tuple[str, str], str | Path]) -> pl.DataFrame:
    """Every tuned run's dev result per (experiment, seed), the chosen one marked: the report's tuning table.

    ``selections``: (experiment, seed) -> that selection's SELECTION table."""
    frames = [read_table(path, SELECTION).with_columns(experiment=pl.lit(name), seed=pl.lit(int(seed)))
              for (name, seed), path in sorted(selections.items(), key=lambda kv: (kv[0][0], int(kv[0][1])))]
    if not frames:
        raise ValueError("no tuned experiments to report")
    return pl.concat(frames).select("experiment", "seed", "knobs", "metric", "dev_value", "best_step", "stopped",
                                    pl.when(pl.col("chosen")).then(pl.lit("chosen")).otherwise(pl.lit(""))
                                    .alias("chosen"))


def tuning_report_stage(selections: Mapping[tuple[str, str], str | Path], stem: str | Path, dataset: str
                        ) -> pl.DataFrame:
    """Rule ``report_tuning``: ``<stem>.{md,csv,parquet}`` with :func:`tuning_table`."""
    table = tuning_table(selections)
    chosen = table.filter(pl.col("chosen") == "chosen")
    summary = "; ".join(f"{e}: {', '.join(f'seed {s} {k}' for s, k in zip(g['seed'], g['knobs']))}"
                        for (e,), g in chosen.group_by("experiment", maintain_order=True))
    write_table_files(table.with_columns(pl.col("seed").cast(pl.String)), "experiment", stem,
                      f"Knobs tuned on dev on {dataset}: each value's best dev {table['metric'][0]} (the evaluation "
                      f"its rolled-back weights reached), per seed; only the chosen run is evaluated on test. "
                      f"Chosen: {summary}.")
    return table

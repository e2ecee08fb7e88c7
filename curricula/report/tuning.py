"""The report's tuning table (rule ``report_tuning``): every tuned run's dev result per (experiment, seed), the
chosen one marked (:func:`curricula.experiments.tuning.selection` makes each seed's choice)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from curricula.experiments.tuning import SELECTION
from curricula.plumbing.contracts import read_table


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


def tuning_caption(table: pl.DataFrame, dataset: str) -> str:
    """The caption of rule ``report_tuning``'s :func:`tuning_table`: what it shows, and each experiment's chosen knobs
    per seed."""
    chosen = table.filter(pl.col("chosen") == "chosen")
    summary = "; ".join(f"{e}: {', '.join(f'seed {s} {k}' for s, k in zip(g['seed'], g['knobs']))}"
                        for (e,), g in chosen.group_by("experiment", maintain_order=True))
    return (f"Knobs tuned on dev on {dataset}: each value's best dev {table['metric'][0]} (the evaluation its "
            f"rolled-back weights reached), per seed; only the chosen run is evaluated on test. Chosen: {summary}.")

"""Knobs tuned on dev: an experiment that gives a list for a knob is trained once per value, and the value whose
model is best on dev is the one evaluated on test (rules ``train`` per value, ``select_tuned`` per experiment and
seed).

MacAvaney et al. 2020 §4 choose their weighting's m "by fine-tuning on the validation set" over
{1, 5, 10, 20, 50, 100}; in a config that is ``weighting: {scoring: recip, m: [1, 5, 10, 20, 50, 100]}``. Any scalar
knob of an experiment may be a list (``lr``, ``pacing.T``, ``negatives.m``...); several lists are tuned jointly
over their Cartesian product. Each value is its own training run, named ``<experiment>@<knob>=<value>`` (one
``@<knob>=<value>`` per tuned knob), with its own folder, so adding a value to a list trains only that value.

Selection reads dev only: each run's best dev evaluation (the value its rolled-back weights reached on the
experiment's ``eval_metric``); the highest wins, the first in list order on ties. The chosen run's model and dev
curve are linked into the experiment's own folder, which the test evaluation reads as for any untuned experiment.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from curricula.plumbing.contracts import TableSpec, dev_curve_spec, read_dev_curve, write_table

#: knobs whose value is a list by nature (not a list of values to tune)
LIST_KNOBS = frozenset({"architecture.ngrams", "diagnostic_averages"})
SEPARATOR = "@"
_VALUE = re.compile(r"^[A-Za-z0-9_.+-]+$")

SELECTION = TableSpec(
    "selection",
    {"run": pl.String, "knobs": pl.String, "metric": pl.String, "dev_value": pl.Float64, "best_step": pl.Int64,
     "stopped": pl.String, "chosen": pl.Boolean},
    key=("run",),
)


def tuned_lists(overrides: Mapping[str, Any], prefix: str = "") -> dict[str, list[Any]]:
    """{dotted knob path: values} of the list-valued knobs in an experiment's ``overrides`` (nested sections
    walked; LIST_KNOBS skipped). A list must be non-empty, of scalars, without repeats: ValueError otherwise."""
    found: dict[str, list[Any]] = {}
    for key, value in overrides.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            found.update(tuned_lists(value, f"{path}."))
        elif isinstance(value, list) and path not in LIST_KNOBS:
            if not value:
                raise ValueError(f"{path}: an empty list of values to tune")
            if any(isinstance(v, (list, Mapping)) for v in value):
                raise ValueError(f"{path}: values to tune must be scalars, got {value!r}")
            if len({json.dumps(v) for v in value}) != len(value):
                raise ValueError(f"{path}: a value is listed twice in {value!r}")
            found[path] = list(value)
    return found


def value_text(value: Any) -> str:
    """How a tuned value is written in a run name (``5``, ``0.9``, ``inf``, ``hinge``)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return "inf" if value == float("inf") else format(value, "g")
    return str(value)


def run_name(experiment: str, values: Mapping[str, Any]) -> str:
    """``<experiment>@<knob>=<value>...`` of one point of the tuning grid (the experiment itself when untuned)."""
    parts = [experiment]
    for path, value in values.items():
        text = value_text(value)
        if not _VALUE.match(text):
            raise ValueError(f"experiments.{experiment}.{path}: value {value!r} cannot name a run folder "
                             "(letters, digits and _ . + - only)")
        parts.append(f"{path}={text}")
    return SEPARATOR.join(parts)


def _with_value(overrides: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    out = dict(overrides)
    out[head] = _with_value(overrides[head], rest, value) if rest else value
    return out


def variants(experiment: str, overrides: Mapping[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """{run name: (tuned values, scalar overrides)} of every point of an experiment's tuning grid, in list order
    (the first list varies slowest); ``{experiment: ({}, overrides)}`` when nothing is tuned."""
    lists = tuned_lists(overrides)
    out = {}
    for combo in itertools.product(*lists.values()):
        values = dict(zip(lists, combo))
        scalar = dict(overrides)
        for path, value in values.items():
            scalar = _with_value(scalar, path, value)
        out[run_name(experiment, values)] = (values, scalar)
    return out


def knobs_text(values: Mapping[str, Any]) -> str:
    """``weighting.m=5, pacing.T=0.9``: the tuned values of a run, as the report prints them."""
    return ", ".join(f"{path}={value_text(v)}" for path, v in values.items())


def select_run(best: Mapping[str, float]) -> str:
    """The run with the highest best-dev value (the first, in the mapping's order, on ties)."""
    if not best:
        raise ValueError("nothing to select from: no tuned runs")
    top = max(best.values())
    return next(run for run, value in best.items() if value == top)


def selection(curves: Mapping[str, pl.DataFrame], values: Mapping[str, Mapping[str, Any]]) -> pl.DataFrame:
    """SELECTION rows: per run, its tuned knobs, best dev value and step, why it stopped, and the chosen one.

    ``curves``: run -> its dev curve frame (:mod:`curricula.experiments.train`; DEV_CURVE, or DEV_CURVE_TEST with the
    diagnostic test column), in the tuning grid's order."""
    rows = []
    for run, curve in curves.items():
        kept = curve.filter(pl.col("best"))
        if kept.height != 1:
            raise ValueError(f"{run}: its dev curve marks {kept.height} kept evaluations, expected 1")
        rows.append({"run": run, "knobs": knobs_text(values[run]), "metric": kept["metric"][0],
                     "dev_value": float(kept["value"][0]), "best_step": int(kept["step"][0]),
                     "stopped": curve["stopped"][-1], "chosen": False})
    chosen = select_run({row["run"]: row["dev_value"] for row in rows})
    for row in rows:
        row["chosen"] = row["run"] == chosen
    return pl.DataFrame(rows, schema=SELECTION.columns)


def link_tree(src: str | Path, dst: str | Path) -> None:
    """``dst`` as a copy of the folder ``src`` made of hard links (a plain copy across file systems)."""
    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link)


def select_best_run(curves: Mapping[str, str | Path], models: Mapping[str, str | Path],
                    values: Mapping[str, Mapping[str, Any]], outputs: Mapping[str, str | Path]) -> pl.DataFrame:
    """Pick one experiment's best run on dev (for one seed; rule ``select_tuned``): write ``selection.parquet`` and
    link the chosen run's ``model/`` and ``dev_curve.parquet`` into the experiment's folder.

    ``values`` (run -> tuned knobs) is in the tuning grid's order, which breaks ties."""
    frames = {run: read_dev_curve(curves[run]) for run in values}
    table = selection(frames, values)
    chosen = table.filter(pl.col("chosen"))["run"][0]
    link_tree(models[chosen], outputs["model"])
    write_table(frames[chosen], outputs["dev_curve"], dev_curve_spec(frames[chosen].columns))
    write_table(table, outputs["selection"], SELECTION)
    return table

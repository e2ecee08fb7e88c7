"""The entry points of rules/active.smk: one active-learning run (rule ``active``, :mod:`curricula.active.loop`)
and their report (rule ``report_active``, :mod:`curricula.report.active`). The loop's module imports torch, so it is
imported inside the functions."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from curricula.data.ingest import read_ingest
from curricula.experiments.spec import parse_train_spec
from curricula.plumbing.contracts import VECTORS, check_table, read_table, write_table
from curricula.plumbing.keys import split_inputs
from curricula.report.active import (
    ACTIVE_CURVES,
    ACTIVE_TABLE,
    active_captions,
    gather_curves,
    label_fraction_table,
    learning_curve_table,
    plot_learning_curves,
)
from curricula.report.tables import write_table_files
from curricula.stages import Files


def active(inputs: Files, outputs: Files, *, method: str, seed: int | str, spec: Mapping[str, Any],
           settings: Mapping[str, Any], relevant_min: int = 1, threads: int | None = None) -> pl.DataFrame:
    """Rule ``active``: the loop for one (``method``, ``seed``) on the ingest tables (and input ``query_vectors`` for
    coreset; :func:`curricula.active.loop.active_job`; ``spec`` the ranker's, to which ``threads`` is added), written
    as the curve (output ``curve``) and every round's per-query test values (``test_metrics``). The per-round
    state lives in ``<curve folder>/state`` (so a killed job resumes) and goes once both are written."""
    from curricula.active.loop import ACTIVE_CURVE, ACTIVE_TEST_METRICS, active_job  # imports torch

    data = read_ingest(inputs)
    source = inputs["query_vectors"] if "query_vectors" in set(inputs.keys()) else None
    state_dir = Path(outputs["curve"]).parent / "state"
    ranker = parse_train_spec(spec, "active.train").with_runtime(threads=threads)
    done = active_job(data, None if source is None else read_table(source, VECTORS), method=method, seed=int(seed),
                      spec=ranker, settings=settings, state_dir=state_dir,
                      relevant_min=relevant_min, vectors_source=str(source))
    write_table(done.test_metrics, outputs["test_metrics"], ACTIVE_TEST_METRICS)
    write_table(done.curve, outputs["curve"], ACTIVE_CURVE)
    shutil.rmtree(state_dir, ignore_errors=True)
    return done.curve


def report_active(inputs: Files, outputs: Files, *, dataset: str, measure: str = "test_RR") -> pl.DataFrame:
    """Rule ``report_active``: every curve (inputs ``curve|<method>|<seed>``) as the label-fraction table (output
    ``table``, Wang et al. 2020 Table 1), the learning curves (``curves``), both as .md/.csv/.parquet, and their
    figure (``figure``); returns the table."""
    from curricula.active.loop import ACTIVE_CURVE  # imports torch

    curves = {(m, int(s)): read_table(path, ACTIVE_CURVE) for (m, s), path in split_inputs(inputs, "curve").items()}
    frame = gather_curves(curves)
    table = check_table(label_fraction_table(frame, measure), ACTIVE_TABLE, outputs["table"])
    means = check_table(learning_curve_table(frame, measure), ACTIVE_CURVES, outputs["curves"])
    captions = active_captions(table, measure, dataset)
    write_table_files(table, "method", Path(outputs["table"]).with_suffix(""), captions["table"])
    write_table_files(means, "method", Path(outputs["curves"]).with_suffix(""), captions["curves"])
    plot_learning_curves(frame, measure, outputs["figure"], title=f"{dataset}: active learning")
    return table

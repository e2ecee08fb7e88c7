"""The entry points of rules/report.smk: the tables, the figures and the tuning table. The report rules key their
runs' inputs ``<kind>|<experiment>|<seed>`` (:func:`curricula.plumbing.keys.split_inputs`); the tables and figures
are :mod:`curricula.report`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from curricula.evaluation.comparisons import load_metrics
from curricula.experiments.spec import parse_train_spec
from curricula.plumbing.contracts import QUERIES, read_table
from curricula.plumbing.keys import split_inputs
from curricula.report.figures import write_figures
from curricula.report.tables import TABLE_KEYS, build_tables, reference_metrics, write_table_files
from curricula.report.tuning import tuning_caption, tuning_table
from curricula.stages import Files


def _runs(inputs: Files, kind: str) -> dict[tuple[str, str], str]:
    """The inputs ``<kind>|<experiment>|<seed>`` as {(experiment, seed): path} (e.g. the runs' metrics)."""
    return {(experiment, seed): path for (experiment, seed), path in split_inputs(inputs, kind).items()}


def report_tables(inputs: Files, outputs: Files, *, measure: str, measures: Sequence[str], holm: bool, dataset: str,
                  test: str = "ttest", permutations: int = 10_000, seed: int = 0, inference: str = "seed_aware",
                  plan_max_queries: int | None = None) -> dict[str, pl.DataFrame]:
    """Rule ``report_tables``: the seeds, metrics and power tables of the runs (inputs ``metrics|<e>|<seed>``) and
    reference rankers (``reference|<name>``; :func:`curricula.report.tables.build_tables`, ``holm`` whether the marks
    are Holm-adjusted), each as .md/.csv/.parquet with its caption at the output of its name."""
    refs = reference_metrics({name: path for (name,), path in split_inputs(inputs, "reference").items()})
    tables, captions = build_tables(load_metrics(_runs(inputs, "metrics")), refs, measure=measure,
                                    measures=measures, use_holm=holm, dataset=dataset, test=test,
                                    permutations=permutations, seed=seed, inference=inference,
                                    plan_max_queries=plan_max_queries)
    for name, key in TABLE_KEYS.items():
        write_table_files(tables[name], key, Path(outputs[name]).with_suffix(""), captions[name])
    return tables


def report_figures(inputs: Files, outputs: Files, *, specs: Mapping[str, Mapping[str, Any]], measure: str,
                   turn_edges: Sequence[int] = (2, 4, 6, 8)) -> list[Path]:
    """Rule ``report_figures``: every figure (:func:`curricula.report.figures.write_figures`) of the runs' dev curves
    (inputs ``curve|<e>|<seed>``) and test metrics (``metrics|<e>|<seed>``), the ingest ``queries`` and each scoring
    function's test table (``difficulty|<function>``) into the folder ``figures``; returns the figures' paths.
    ``specs`` are the experiments' params (:meth:`curricula.pipeline.plan.DatasetPlan.experiment_params`)."""
    curves = pl.concat([pl.read_parquet(p).with_columns(experiment=pl.lit(e), seed=pl.lit(str(s)))
                        for (e, s), p in _runs(inputs, "curve").items()])
    difficulty = {f: pl.read_parquet(p) for (f,), p in split_inputs(inputs, "difficulty").items()}
    arms = {name: parse_train_spec(spec, f"experiments.{name}").arm for name, spec in specs.items()}
    return write_figures(arms, curves, load_metrics(_runs(inputs, "metrics")),
                         read_table(inputs["queries"], QUERIES), difficulty, outputs["figures"], measure=measure,
                         turn_edges=turn_edges)


def report_tuning(inputs: Files, outputs: Files, *, dataset: str) -> pl.DataFrame:
    """Rule ``report_tuning``: the tuned knobs' table (:func:`curricula.report.tuning.tuning_table`) of the
    selections (inputs ``selection|<e>|<seed>``) as ``<stem>.{md,csv,parquet}``, the stem that of output
    ``tuning``."""
    table = tuning_table(_runs(inputs, "selection"))
    write_table_files(table.with_columns(pl.col("seed").cast(pl.String)), "experiment",
                      Path(outputs["tuning"]).with_suffix(""), tuning_caption(table, dataset))
    return table

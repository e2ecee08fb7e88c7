"""The entry points of ``rules/train.smk``: one ranker per (training run, seed), and a tuned experiment's selection.

Each reads its rule's files, parses what the rule passes once (the run's params into a
:class:`~curricula.experiments.spec.TrainSpec`), starts the job's runtime and calls the library. Torch and transformers
are imported by the training alone, so that the selection job starts without them (3.4 against 0.2 CPU-seconds).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from curricula.data.ingest import read_ingest
from curricula.difficulty import difficulty_spec
from curricula.experiments.spec import TrainSpec, parse_train_spec, spec_record
from curricula.experiments.tuning import select_best_run
from curricula.models import ranker_class
from curricula.plumbing.atomic import write_text_atomically
from curricula.plumbing.contracts import dev_curve_spec, read_table, write_table
from curricula.plumbing.keys import split_inputs
from curricula.plumbing.provenance import cpu_class, project_commit
from curricula.stages import Files

#: the tables a train job reads lazily (only the rows it needs), when its curriculum needs them
LAZY_INPUTS = ("neighbors", "run", "query_vectors", "doc_vectors")


def train_inputs(inputs: Files, spec: TrainSpec) -> dict[str, Any]:
    """The optional inputs of a train job beyond the ingest tables and the curriculum: the weighting function's
    difficulty table (read), and the neighbours, BM25 run and dense vectors (paths, read lazily)."""
    names = set(inputs.keys())  # a Snakemake Namedlist's `in` looks at values, not names
    extra: dict[str, Any] = {}
    if spec.arm.weighting is not None:
        extra["weights"] = read_table(inputs["weights"], difficulty_spec([spec.arm.weighting.scoring]))
    extra.update({name: Path(inputs[name]) for name in LAZY_INPUTS if name in names})
    return extra


def train(inputs: Files, outputs: Files, params: Mapping[str, Any], seed: int, *,
          threads: int | None = None, relevant_min: int = 1, config_seed: int = 42) -> pl.DataFrame:
    """Rule ``train``: parse the run's params, start the job, train, write model/, dev_curve.parquet and
    config.json (the params, the threads, what it ran on and the commit). The checkpoint folder is
    ``<model>.checkpoint``."""
    from curricula.experiments.train import TRAIN_COLUMNS, train_ranker
    from curricula.models.runtime import start_job

    spec = parse_train_spec(params, "train").with_runtime(threads=threads)
    runtime = start_job(spec.runtime, ranker_class(spec.ranker.ranker).transformer, "training")
    data = read_ingest(inputs, columns=TRAIN_COLUMNS)
    model_out = Path(outputs["model"])
    curve = train_ranker(data, spec, seed, curriculum_dir=inputs["curriculum"], model_out=model_out,
                         checkpoint_dir=model_out.with_name(model_out.name + ".checkpoint"),
                         relevant_min=relevant_min, config_seed=config_seed, runtime=runtime,
                         **train_inputs(inputs, spec))
    write_table(curve, outputs["dev_curve"], dev_curve_spec(curve.columns))
    record = {"seed": seed, "spec": spec_record(spec), "ran_on": {**runtime.record, "cpu": cpu_class()},
              "commit": project_commit()}
    write_text_atomically(outputs["config"], json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    return curve


def select_tuned(inputs: Files, outputs: Files,
                 values: Mapping[str, Mapping[str, Any]]) -> pl.DataFrame:
    """Rule ``select_tuned``: one tuned experiment's best run on dev for one seed (:func:`curricula.experiments.
    tuning.select_best_run`), from its runs' ``curve|<run>`` and ``model|<run>`` inputs."""
    curves = {run: path for (run,), path in split_inputs(inputs, "curve").items()}
    models = {run: path for (run,), path in split_inputs(inputs, "model").items()}
    return select_best_run(curves, models, dict(values), outputs)

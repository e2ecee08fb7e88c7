"""A trained run of a results tree read back: its model folder and its typed spec (``config.json``).

A run's folder ``experiments/<experiment>/seed=<n>/`` holds the model and ``config.json`` (what the train job
recorded: its spec's params, :func:`curricula.experiments.spec.spec_record`). An experiment with a tuned knob has
no ``config.json`` of its own: its ``selection.parquet`` names the run chosen on dev, whose folder has it.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from curricula.experiments.spec import TrainSpec, parse_train_spec
from curricula.plumbing.layout import Layout

#: the name :func:`model_folder` and the PyTerrier shortcut give the teacher (its folder is ``teacher/model``)
TEACHER = "teacher"


def chosen_run(layout: Layout, experiment: str, seed: int | str) -> str:
    """The run whose ``config.json`` describes ``experiment``'s model for ``seed``: the experiment itself, or for a
    tuned experiment the run its ``selection.parquet`` chose on dev. FileNotFoundError naming the folder when
    neither is there."""
    if Path(layout.train(experiment, seed)["config"]).is_file():
        return experiment
    selection = Path(layout.selection(experiment, seed))
    if selection.is_file():
        return str(pl.read_parquet(selection).filter(pl.col("chosen"))["run"][0])
    raise FileNotFoundError(f"{layout.experiment(experiment, seed)}: no config.json or selection.parquet (is the "
                            f"run finished? experiments there: {sorted(experiment_names(layout))})")


def experiment_names(layout: Layout) -> set[str]:
    """The experiments (and tuned runs) of a results tree that have a folder."""
    return {name for name, _ in layout.experiment_files("model")}


def run_spec(root: str | Path, experiment: str, seed: int | str) -> TrainSpec:
    """The typed spec of ``experiment``'s run for ``seed`` in the results folder ``root`` (``results/<dataset>``),
    parsed from the ``config.json`` its train job wrote (:func:`chosen_run`)."""
    layout = Layout.at(root)
    path = Path(layout.train(chosen_run(layout, experiment, seed), seed)["config"])
    record = json.loads(path.read_text(encoding="utf-8"))
    return parse_train_spec(record["spec"], where=str(path))


def model_folder(root: str | Path, experiment: str, seed: int | str | None = None) -> Path:
    """The model folder of ``experiment`` (its run for ``seed``) in the results folder ``root``, or the teacher's
    for :data:`TEACHER` (no seed). ValueError when an experiment's seed is missing, FileNotFoundError when the folder
    is not there."""
    layout = Layout.at(root)
    if experiment == TEACHER:
        folder = Path(layout.teacher()["model"])
    elif seed is None:
        raise ValueError(f"experiment {experiment!r}: give the seed of the run (the teacher alone has none)")
    else:
        folder = Path(layout.train(experiment, seed)["model"])
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no model folder (experiments there: "
                                f"{sorted(experiment_names(layout))})")
    return folder

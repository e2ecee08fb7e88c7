"""Knobs tuned on dev: lists in an experiment become one run per value, named and selected on dev only."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
import yaml

from curricula.experiments.spec import CurriculumSpec, freeze, resolve_arm, thaw
from curricula.experiments.specs import experiment_runs, experiment_specs, tuned_values
from curricula.experiments.tuning import (
    LIST_KNOBS,
    SELECTION,
    run_name,
    select_run,
    select_best_run,
    selection,
    tuned_lists,
    variants,
)
from curricula.plumbing.contracts import DEV_CURVE, write_table
from curricula.report.tuning import tuning_table
from tests.train_data import TRAIN

REPO = Path(__file__).resolve().parents[1]


def schema() -> dict:
    return yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())


def test_lists_become_one_run_per_point_of_the_grid():
    overrides = {"weighting": {"scoring": "recip", "m": [1, 5, "inf"]}, "lr": [1e-3, 5e-4],
                 "architecture": {"ngrams": [1, 2, 3]}}
    assert tuned_lists(overrides) == {"weighting.m": [1, 5, "inf"], "lr": [1e-3, 5e-4]}  # ngrams is a list knob
    grid = variants("mac", overrides)
    assert list(grid) == ["mac@weighting.m=1@lr=0.001", "mac@weighting.m=1@lr=0.0005", "mac@weighting.m=5@lr=0.001",
                          "mac@weighting.m=5@lr=0.0005", "mac@weighting.m=inf@lr=0.001",
                          "mac@weighting.m=inf@lr=0.0005"]
    values, scalar = grid["mac@weighting.m=5@lr=0.0005"]
    assert values == {"weighting.m": 5, "lr": 5e-4}
    assert scalar == {"weighting": {"scoring": "recip", "m": 5}, "lr": 5e-4, "architecture": {"ngrams": [1, 2, 3]}}
    assert overrides["weighting"]["m"] == [1, 5, "inf"]  # the config is not modified
    assert variants("plain", {"lr": 1e-3}) == {"plain": ({}, {"lr": 1e-3})}
    assert run_name("x", {"m": math.inf, "anti": True}) == "x@m=inf@anti=true"


@pytest.mark.parametrize("overrides, message", [
    ({"lr": []}, "empty list"), ({"lr": [1e-3, 1e-3]}, "listed twice"), ({"lr": [[1e-3]]}, "scalars"),
    ({"loss": ["hinge", "a/b"]}, "cannot name a run folder")])
def test_bad_lists_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        variants("e", overrides)


def test_list_knobs_are_the_train_knobs_whose_schema_admits_a_list():
    def arrays(props: dict, prefix: str = "") -> set[str]:
        out = set()
        for key, sub in props.items():
            types = sub.get("type", [])
            types = types if isinstance(types, list) else [types]
            if "array" in types:
                out.add(f"{prefix}{key}")
            if "properties" in sub:
                out |= arrays(sub["properties"], f"{prefix}{key}.")
        return out

    knobs = arrays(schema()["properties"]["train"]["properties"])
    assert knobs - {"negatives.pacing"} == set(LIST_KNOBS)


def test_experiment_runs_validate_every_value_and_keep_untuned_names():
    config = {"train": TRAIN, "experiments": {
        "mac": {"weighting": {"scoring": "u_words", "m": [1, 20]}},
        "p": {"scoring": "u_words", "pacing": {"name": "root_2", "T": [0.5, 0.9]}}}}
    runs = experiment_runs(config, schema())
    assert {k: list(v) for k, v in runs.items()} == {
        "baseline": ["baseline"], "mac": ["mac@weighting.m=1", "mac@weighting.m=20"],
        "p": ["p@pacing.T=0.5", "p@pacing.T=0.9"]}
    assert runs["mac"]["mac@weighting.m=20"].curriculum.weighting.get("m") == 20
    assert thaw(runs["p"]["p@pacing.T=0.5"].curriculum.pacing) == {"name": "root_2", "T": 0.5}
    assert list(experiment_specs(config)) == ["baseline", "mac@weighting.m=1", "mac@weighting.m=20",
                                              "p@pacing.T=0.5", "p@pacing.T=0.9"]
    assert tuned_values(config) == {"mac": {"mac@weighting.m=1": {"weighting.m": 1},
                                            "mac@weighting.m=20": {"weighting.m": 20}},
                                    "p": {"p@pacing.T=0.5": {"pacing.T": 0.5}, "p@pacing.T=0.9": {"pacing.T": 0.9}}}
    bad = {"train": TRAIN, "experiments": {"mac": {"weighting": {"scoring": "u_words", "m": [1, -2]}}}}
    with pytest.raises(ValueError, match="experiments.mac.weighting.m"):
        experiment_runs(bad, schema())
    wrong_type = {"train": TRAIN, "experiments": {"e": {"batch_size": [4, "big"]}}}
    with pytest.raises(ValueError, match="experiments.e.batch_size"):
        experiment_runs(wrong_type, schema())


def test_every_run_of_a_grid_gets_the_longest_curriculum_as_min_steps():
    # MacAvaney's weights with m = 20 iterations of 32 steps end at step 640, after the pacing's 400 steps: every
    # arm (baseline, m = 5 and the other experiment included) waits until 640 before patience counts
    train = {**TRAIN, "steps": 400, "max_steps": 3000, "patience": 3, "eval_every": 100}
    config = {"train": train, "experiments": {
        "mac": {"weighting": {"scoring": "u_words", "m": [5, 20], "iteration_steps": 32}},
        "p": {"scoring": "u_words", "pacing": {"name": "root_2"}}}}
    runs = experiment_runs(config, schema())
    least = {run: spec.fit.min_steps for of in runs.values() for run, spec in of.items()}
    assert least == {"baseline": 640, "mac@weighting.m=5": 640, "mac@weighting.m=20": 640, "p": 640}
    assert all(type(v) is int for v in least.values())
    # without the m = 20 arm the longest curriculum is the pacing's
    short = {**config, "experiments": {**config["experiments"], "mac": {"weighting": {
        "scoring": "u_words", "m": 5, "iteration_steps": 32}}}}
    assert {spec.fit.min_steps for spec in experiment_specs(short, schema()).values()} == {400}
    # a floor in the config wins when it is larger, not when it is smaller
    assert {s.fit.min_steps for s in experiment_specs({**config, "train": {**train, "min_steps": 1000}}).values()} \
        == {1000}
    assert {s.fit.min_steps for s in experiment_specs({**config, "train": {**train, "min_steps": 100}}).values()} \
        == {640}
    # above the budget patience could count nothing: refused, naming both
    with pytest.raises(ValueError, match="min_steps=640 is above max_steps=600"):
        experiment_runs({**config, "train": {**train, "max_steps": 600}}, schema())
    with pytest.raises(ValueError, match="min_steps=4000 is above max_steps=3000"):
        experiment_runs({**config, "train": {**train, "min_steps": 4000}}, schema())
    # without patience min_steps is inert: no error
    assert experiment_runs({**config, "train": {**train, "max_steps": 600, "patience": None}}, schema())
    # an experiment may not give itself another minimum budget
    with pytest.raises(ValueError, match="experiments.p.min_steps"):
        experiment_runs({**config, "experiments": {"p": {"min_steps": 900}}}, schema())
    with pytest.raises(ValueError, match="experiments.p.min_steps"):
        experiment_runs({**config, "experiments": {"p": {"min_steps": 900}}})


def curve(values: list[float], stopped: str = "patience") -> pl.DataFrame:
    best = values.index(max(values))
    return pl.DataFrame({"step": [10 * (i + 1) for i in range(len(values))], "metric": ["AP"] * len(values),
                         "value": values, "train_loss": [0.5] * len(values), "allowed": [8] * len(values),
                         "negatives_k": [0] * len(values), "best": [i == best for i in range(len(values))],
                         "stopped": [None] * (len(values) - 1) + [stopped]}, schema=DEV_CURVE.columns)


def test_selection_reads_each_runs_kept_dev_value_and_breaks_ties_by_list_order(tmp_path):
    assert select_run({"a": 0.3, "b": 0.5, "c": 0.5}) == "b"
    with pytest.raises(ValueError):
        select_run({})
    curves = {"e@m=1": curve([0.2, 0.4, 0.3]), "e@m=5": curve([0.45, 0.41], "budget"), "e@m=20": curve([0.1, 0.45])}
    values = {"e@m=1": {"m": 1}, "e@m=5": {"m": 5}, "e@m=20": {"m": 20}}
    table = selection(curves, values)
    assert table.columns == list(SELECTION.columns)
    assert table["dev_value"].to_list() == [0.4, 0.45, 0.45] and table["best_step"].to_list() == [20, 10, 20]
    assert table["chosen"].to_list() == [False, True, False] and table["stopped"].to_list() == ["patience", "budget",
                                                                                                  "patience"]
    paths, models = {}, {}
    for run, frame in curves.items():
        paths[run] = write_table(frame, tmp_path / run / "dev_curve.parquet", DEV_CURVE)
        models[run] = tmp_path / run / "model"
        models[run].mkdir()
        (models[run] / "weights.bin").write_text(run)
    out = {"model": tmp_path / "e" / "model", "dev_curve": tmp_path / "e" / "dev_curve.parquet",
           "selection": tmp_path / "e" / "selection.parquet"}
    select_best_run(paths, models, values, out)
    assert (out["model"] / "weights.bin").read_text() == "e@m=5"
    assert pl.read_parquet(out["dev_curve"]).equals(curves["e@m=5"])
    report = tuning_table({("e", "1"): out["selection"], ("e", "2"): out["selection"]})
    assert report.filter(pl.col("chosen") == "chosen")["knobs"].to_list() == ["m=5", "m=5"]
    assert report["seed"].to_list() == [1, 1, 1, 2, 2, 2]


def test_an_arm_is_resolved_once_with_every_length_in_steps():
    """resolve_arm: the pacing's T/T0 and the negatives' T become steps of the curriculum's length (``steps``), the
    weighting's m and iteration length are typed, ``end`` is when every axis has ended; errors name the key."""
    from curricula.experiments.specs import merge_experiment

    def curriculum(values: dict) -> CurriculumSpec:  # the curriculum sections of a run mapping, as written
        return CurriculumSpec(**{key: freeze(values[key]) for key in ("scoring", "pacing", "negatives", "weighting")})

    spec = merge_experiment(TRAIN, {"scoring": "hcl_corpus", "pacing": {"name": "hcl", "r0": 0.4, "T0": 0.1, "T": 0.5},
                                    "negatives": {"mode": "neighbors", "m": 5, "pacing": {"kT": 2, "T": 0.9},
                                                  "false_negative_guard": 0.8},
                                    "weighting": {"scoring": "u_words", "m": 20, "iteration_steps": 32},
                                    "steps": 1300})
    arm = resolve_arm(curriculum(spec), spec["steps"])
    assert dict(arm.pacing.params) == {"r0": 0.4, "T0": 130, "T": 650} and arm.pacing.mode == "threshold"
    assert float(arm.pacing.value(650)) == 1.0 > float(arm.pacing.value(649))  # T = 0.5 of 1,300 steps
    n = arm.negatives
    assert (n.mode, n.m, n.guard, n.pacing.T, n.pacing.kT) == ("neighbors", 5, 0.8, 1170, 2.0)
    assert n.pacing.k([0, 1170], 10**4).tolist() == [10**4, 100]
    assert (arm.weighting.m, arm.weighting.iteration_steps, arm.length) == (20.0, 32, 1300)
    assert arm.end == 1300  # the weights end at 640 steps, inside the 1,300-step curriculum
    assert resolve_arm(curriculum(spec), 400).end == 640  # ... and after a 400-step one
    assert resolve_arm(curriculum({**spec, "weighting": {"scoring": "u_words", "m": "inf"}}), 400).end == 400
    baseline = resolve_arm(CurriculumSpec(), 400)  # an axis a spec lacks is the baseline's
    assert (baseline.scoring, baseline.pacing.name, baseline.negatives.mode, baseline.weighting) == \
        ("random", "standard", "random", None)
    for bad, match in (({"pacing": {"name": "root_2", "n": 3}}, r"x\.pacing: unknown key"),
                       ({"negatives": {"mode": "bm25", "depth": 0}}, r"x\.negatives\.depth: need an integer"),
                       ({"negatives": {"mode": "random", "false_negative_guard": 0.8}},
                        r"x\.negatives\.false_negative_guard: .*mode 'random' has no G scores"),
                       ({"weighting": {"scoring": "u_words", "m": 0}}, r"x\.weighting\.m: m must be"),
                       ({"weighting": {"scoring": "nope"}}, r"x\.weighting\.scoring: unknown difficulty")):
        with pytest.raises(ValueError, match=match):
            resolve_arm(curriculum({**spec, **bad}), spec["steps"], "x")

"""The run plan the workflow builds when it is parsed (curricula.pipeline): config checks, a dataset's plan and a
study's plan, without Snakemake."""

from __future__ import annotations

import copy
import json
import math

import polars as pl
import pytest

from curricula.difficulty import FUNCTIONS, register, unregister
from curricula.difficulty.penha import percentile_difficulty
from curricula.pipeline.checks import check_previous, check_references, parsed_arms, sequential_looks
from curricula.pipeline.devices import gpus
from curricula.pipeline.plan import dataset_plan, one_of
from curricula.pipeline.study import study_plan
from curricula.pipeline.targets import all_outputs, dense_consumers, runs_by_key, train_inputs
from curricula.plumbing.config import SCHEMA, merge, read_yaml, validate_config
from curricula.plumbing.layout import Layout

DEFAULT = read_yaml(SCHEMA.parents[1] / "config.yaml")
SCHEMA_DOC = read_yaml(SCHEMA)
TINY = {"name": "tiny", "format": "chitchat", "options": {"max_instances": {"train": 40, "dev": 10, "test": 10}}}
ADDITIVITY = {"paper": "Yang et al. 2019", "claim": "interpolating BM25 helps", "experiment": "baseline+bm25",
              "against": "baseline", "expect": "better", "factors": ["additivity"]}


def config_of(overlay: dict) -> dict:
    """config.yaml overlaid with ``overlay`` and validated, as the Snakefile reads it."""
    return validate_config(merge(DEFAULT, overlay))


def plan_of(overlay: dict):
    return dataset_plan(config_of(overlay), SCHEMA_DOC)


def study_overlay(claims: dict | None = None, **settings) -> dict:
    """A one-dataset study over the tiny chitchat cut, with ``claims`` (default: score additivity)."""
    return {"seeds": [1, 2], "study": {"datasets": {"tiny": {"dataset": TINY}},
                                       "claims": claims or {"additivity": ADDITIVITY}, **settings}}


def plan_study(overlay: dict):
    return study_plan(DEFAULT, overlay, config_of(overlay), SCHEMA_DOC)


# ------------------------------------------------------------------------------------------------ a dataset
def test_a_dataset_plan_resolves_runs_tuned_arms_and_targets():
    plan = plan_of({"dataset": TINY, "seeds": [1, 2]})
    assert plan.layout == Layout("results", "tiny")
    assert next(iter(plan.experiments)) == "baseline"
    assert set(plan.tuned) <= set(plan.experiments)
    assert set(plan.runs) >= set(plan.experiments) - set(plan.tuned)
    for name, runs in plan.tuned.items():  # a tuned experiment trains one run per value, selected on dev
        assert set(runs) <= set(plan.runs) and name not in plan.runs
    metrics = runs_by_key(plan, "metrics")
    assert metrics["metrics|baseline|2"] == "results/tiny/experiments/baseline/seed=2/metrics.parquet"
    assert len(metrics) == 2 * len(plan.experiments)
    targets = all_outputs(plan)
    assert "results/tiny/report/table_seeds.md" in targets and "results/tiny/data/qrels.parquet" in targets
    inputs = train_inputs(plan, "baseline")
    assert inputs["curriculum"] == f"results/tiny/curricula/{plan.runs['baseline'].arm.scoring}"
    assert plan.teacher_params("train").keys() == plan.teacher_params("score").keys() - {"folds", "score_batch_size"}


def test_params_carry_only_the_knobs_that_change_a_rule():
    plan = plan_of({"dataset": TINY, "evaluate": {"additivity": {"enabled": False}}})
    assert plan.additivity_params() is None and not plan.additive
    assert "threads" not in plan.train_params("baseline")
    assert set(plan.evaluate_knobs("baseline")) == {"score_batch_size", "precision", "device"}
    assert plan.section("bm25", "k1", "b") == {"k1": plan.config["bm25"]["k1"], "b": plan.config["bm25"]["b"]}
    assert gpus("cuda:1") == gpus("cuda") == 1 and gpus("auto", visible=0) == gpus("cpu") == 0
    assert gpus("auto", visible=2) == 1 and gpus("cpu", visible=2) == 0
    assert one_of(["a", "ab"]) == "ab|a" and one_of([]) == r"(?!x)x"


def test_an_unregistered_difficulty_function_is_refused():
    with pytest.raises(ValueError, match=r"difficulty.functions: unknown difficulty function\(s\) \['nope'\]"):
        plan_of({"dataset": TINY, "difficulty": {"functions": ["random", "nope"]}})


def test_a_bad_experiment_is_refused_naming_it():
    bad = {"w": {"weighting": {"scoring": "kde"}, "negatives": {"mode": "random"}}}
    with pytest.raises(ValueError, match="experiments.w") as err:
        plan_of({"dataset": TINY, "experiments": bad})
    assert "negatives.mode: candidates" in str(err.value)


def test_the_tuned_bm25_reference_needs_the_tuning():
    config = config_of({"dataset": TINY, "evaluate": {"references": ["bm25", "bm25_tuned"]},
                        "bm25": {"tune": {"enabled": False}}})
    with pytest.raises(ValueError, match="evaluate.references names bm25_tuned but bm25.tune.enabled is false"):
        check_references(config)


# --------------------------------------------------------------------------------------------------- a study
def test_a_study_plan_builds_each_dataset_and_the_claims_runs(tmp_path):
    study = plan_study(study_overlay(ledger=str(tmp_path / "ledger")))
    assert list(study.datasets) == ["tiny"] and study.looks is None and study.seeds == {}
    assert study.layout.study_dir == "results/report/study"
    assert study.layout.study_ledger == f"{tmp_path}/ledger/study"
    assert sorted(study.claim_runs) == [("tiny", arm, s) for arm in ("baseline", "baseline+bm25") for s in (1, 2)]
    assert study.differences == {"additivity": {"tiny": ["additivity"]}}
    assert study.outputs() == list(study.layout.study_report().values())  # the runs come through the findings
    inputs = study.report_inputs(lambda k: f"round{k}")  # an empty ledger: every run's entry is made here
    assert inputs["run|tiny|baseline+bm25|2"] == "results/report/study/entries/tiny/baseline/seed=2.parquet"


def test_seeds_in_rounds_cut_each_dataset_to_the_first_look():
    overlay = study_overlay(sequential={"enabled": True, "looks": [2, 3]})
    study = plan_study(overlay)
    assert study.looks == (2, 3) and study.seeds == {"tiny": [1, 2, 3]}
    assert study.datasets["tiny"].config["seeds"] == [1, 2]
    first = study.round_inputs(1, lambda k: f"round{k}")
    assert first["run|tiny|baseline|2"] == "results/report/study/entries/tiny/baseline/seed=2.parquet"
    assert set(first) == {f"run|tiny|{arm}|{s}" for arm in ("baseline", "baseline+bm25") for s in (1, 2)}


def test_the_final_round_is_the_first_that_extends_no_arm(tmp_path):
    study = plan_study(study_overlay(sequential={"enabled": True, "looks": [2, 3]}))
    records = {k: tmp_path / f"round={k}.json" for k in (1, 2)}
    for path in records.values():
        path.write_text(json.dumps({"decisions": [], "trained": [], "next": [{"dataset": "tiny", "arm": "baseline"}]}))
    with pytest.raises(ValueError, match=r"study rounds: the last round \(2\) still lists arms to extend"):
        study.final_round(lambda k: str(records[k]))
    records[2].write_text(json.dumps({"decisions": [], "trained": [], "next": []}))
    assert study.final_round(lambda k: str(records[k])) == str(records[2])
    second = study.round_inputs(2, lambda k: str(records[k]))
    assert second["previous"] == str(records[1]) and set(second) - {"previous"} == {
        f"run|tiny|baseline|{s}" for s in (1, 2, 3)}


def test_a_claim_naming_what_a_dataset_does_not_evaluate_is_refused():
    missing = {"c": {**ADDITIVITY, "experiment": "nope", "factors": ["scoring"]}}
    with pytest.raises(ValueError, match=r"study.claims name \['nope'\], which tiny's grid does not evaluate"):
        plan_study(study_overlay(missing))


def test_an_active_learning_claim_needs_the_loop_on_that_dataset():
    claims = {"w": {"paper": "W", "claim": "c", "experiment": "active:dasl@1", "against": "active:random@1",
                    "expect": "better"}}
    with pytest.raises(ValueError, match="study.claims name active:") as err:
        plan_study(study_overlay(claims))
    assert "which tiny does not run (active: enabled False" in str(err.value)
    with pytest.raises(ValueError, match="study.claims: 'active:dasl'"):
        parsed_arms([{"experiment": "active:dasl", "against": "baseline"}])


def test_a_claim_whose_arms_differ_outside_its_factors_is_refused():
    claims = {"h": {"paper": "S", "claim": "c", "experiment": "hinged", "against": "baseline", "expect": "better",
                    "factors": ["loss"]}}
    overlay = study_overlay(claims)
    overlay["experiments"] = {"hinged": {"loss": "hinge", "negatives": {"mode": "random"}}}
    with pytest.raises(ValueError) as err:
        plan_study(overlay)
    assert ("study.claims.h (hinged against baseline) on tiny: the arms differ in ['negatives.mode'], which its "
            "factors ['loss'] do not cover (negatives.mode: 'random' in hinged, 'candidates' in baseline)"
            in str(err.value))


def test_bad_sequential_settings_are_refused():
    settings = config_of(study_overlay())["study"]
    assert sequential_looks(settings) is None
    with pytest.raises(ValueError, match="study.sequential.looks must be strictly increasing"):
        sequential_looks(merge(settings, {"sequential": {"enabled": True, "looks": [5, 5]}}))
    with pytest.raises(ValueError, match="no sequential Benjamini-Hochberg is built"):
        sequential_looks(merge(settings, {"sequential": {"enabled": True, "looks": [2, 3]}, "multiplicity": "bh"}))
    with pytest.raises(ValueError, match=r"study.max_seeds \(10\) caps .* enable study.sequential or drop "
                                         r"study.max_seeds"):
        sequential_looks(merge(settings, {"max_seeds": 10}))


def test_a_dataset_cannot_move_the_study_results():
    overlay = study_overlay()
    overlay["study"]["datasets"]["tiny"]["results"] = "elsewhere"
    with pytest.raises(ValueError, match="study.datasets.tiny: its overrides sets results"):
        plan_study(overlay)


def test_the_previous_findings_cannot_be_this_study_own():
    own = Layout().study_report()
    check_previous(None, list(own.values()))
    check_previous("findings-previous.parquet", list(own.values()))
    with pytest.raises(ValueError, match="study.previous ./results/report/study/findings.parquet is this study's own "
                                         "findings table"):
        check_previous("./results/report/study/findings.parquet", list(own.values()))
    overlay = study_overlay(previous=own["parquet"])
    with pytest.raises(ValueError, match="is this study's own findings table"):
        plan_study(copy.deepcopy(overlay))


PENHA = {"penha": {"scoring": "bert_pred", "pacing": {"name": "root_2"}}}


def computed_functions(plan) -> set[str]:
    """The difficulty functions whose training-pair job the plan runs: the ones its runs read (curricula, weights)
    and the joined table's."""
    return {*plan.consumed_functions(), *plan.difficulty_functions()}


def test_no_dense_job_is_planned_unless_something_reads_g():
    default = plan_of({})
    assert dense_consumers(default) == ["difficulty hcl_corpus", "train hcl"]
    assert default.layout.dense()["neighbors"] in all_outputs(default)
    # a grid ordered by the teacher alone, difficulty.functions left at its default: nothing reads G's vectors or
    # neighbours, and only the baseline's random order and the arm's bert_pred are computed
    teacher_only = plan_of({"experiments": PENHA})
    assert teacher_only.config["difficulty"]["functions"] is None
    assert dense_consumers(teacher_only) == []
    assert not [path for path in all_outputs(teacher_only) if "/dense/" in path]
    assert computed_functions(teacher_only) - {"random"} == {"bert_pred"}
    assert teacher_only.difficulty_functions() == ["random", "bert_pred"]
    # the report's figures count as readers: a figure of HCL's corpus difficulty brings G back
    figure = plan_of({"experiments": PENHA, "report": {"difficulty_functions": ["hcl_corpus"]}})
    assert dense_consumers(figure) == ["difficulty hcl_corpus"]
    # and so does the joined table when asked for every function
    assert dense_consumers(plan_of({"experiments": PENHA, "difficulty": {"functions": "all"}})) == [
        "difficulty hcl_corpus"]


def test_the_joined_difficulty_table_holds_the_consumed_functions_unless_told_otherwise():
    default = plan_of({})
    assert default.config["difficulty"]["functions"] is None
    # every arm's order (the baseline's random, Penha's bert_pred, HCL's hcl_corpus) and MacAvaney's weights (recip)
    assert default.consumed_functions() == default.difficulty_functions() == ["random", "bert_pred", "recip",
                                                                              "hcl_corpus"]
    assert computed_functions(default) == set(default.consumed_functions())
    # `all`: every registered function, for the correlation table; a list: the ones named (the grid's own are
    # computed anyway)
    every = plan_of({"difficulty": {"functions": "all"}})
    assert every.difficulty_functions() == list(FUNCTIONS)
    named = plan_of({"experiments": PENHA, "difficulty": {"functions": ["kde", "turns"]}})
    assert named.difficulty_functions() == ["kde", "turns"]
    assert computed_functions(named) == {"random", "bert_pred", "kde", "turns"}
    # the baseline alone still reads its random order; `[]` plans no joined table
    assert plan_of({"experiments": {}}).difficulty_functions() == ["random"]
    bare = plan_of({"experiments": {}, "difficulty": {"functions": []}})
    assert bare.layout.difficulty_table not in all_outputs(bare)
    assert default.layout.difficulty_table in all_outputs(default)
    with pytest.raises(ValueError, match=r"difficulty.functions: 'al' does not match"):
        plan_of({"difficulty": {"functions": "al"}})


@pytest.fixture
def r_chars():
    """A pair-level function whose raw value is a character count (not MacAvaney's h in [0, 1]) and that scores the
    dataset's candidates only (no run_pairs), registered for one test and removed afterwards."""

    def compute(x):
        raw = x.pairs.join(x.docs, on="docid").select("qid", "docid", pl.col("text").str.len_chars()
                                                      .cast(pl.Float64).alias("r_chars_raw"))
        return raw.with_columns(percentile_difficulty(raw["r_chars_raw"]).alias("r_chars"))

    yield register("r_chars", "a response's length in characters", level="pair", compute=compute,
                   raw_range=(0.0, math.inf))
    unregister("r_chars")


def test_a_pair_level_weighting_must_be_macavaneys_h_under_a_pairwise_loss(r_chars):
    weighted = {"experiments": {"chars": {"weighting": {"scoring": "r_chars"}}}}
    assert DEFAULT["train"]["loss"] == "pairwise_ce"
    with pytest.raises(ValueError, match=r"^experiments.chars.weighting.scoring: r_chars is pair-level, so the "
                                         r"pairwise_ce loss weighs each \(d\+, d-\) by MacAvaney's D_pair .* "
                                         r"registered in \[0, inf\) with orientation 'harder', not as an h in "
                                         r"\[0, 1\] .*: weight by recip, norm or kde, a query-level function, or use "
                                         r"a pointwise loss \(pointwise_ce, pointwise_mse\)$"):
        plan_of(weighted)
    # a pointwise loss weighs by the difficulty column, in [0, 1] for every function; ordering by it is fine too
    plan_of({"experiments": {"chars": {"scoring": "r_chars", "weighting": {"scoring": "r_chars"},
                                       "loss": "pointwise_ce"}}})
    plan_of({"experiments": {"chars": {"weighting": {"scoring": "recip"}}}})  # MacAvaney's own h


def test_a_function_without_the_run_pairs_is_refused_where_they_are_needed(r_chars):
    run = {"difficulty": {"bm25_list": "run"}}
    on_bm25 = {"scoring": "random", "weighting": {"scoring": "r_chars"}, "loss": "pointwise_ce",
               "negatives": {"mode": "bm25", "depth": 20}}
    with pytest.raises(ValueError, match=r"^experiments.chars.weighting.scoring: r_chars does not score the BM25 "
                                         r"run's pairs \(registered without run_pairs\), so the negatives that "
                                         r"negatives.mode: bm25 draws have no r_chars difficulty: weight by recip, "
                                         r"norm or kde or a query-level function, or set negatives.mode: candidates$"):
        plan_of({**run, "experiments": {"chars": on_bm25}})
    plan_of({**run, "experiments": {"chars": {**on_bm25, "weighting": {"scoring": "recip"}}}})
    # the joined table: recip's table holds the run's pairs too, r_chars's does not
    joined = r"^difficulty.functions: with difficulty.bm25_list: run, the tables of recip hold the BM25 run's "
    listed = r".*r_chars \(registered without run_pairs\) do not.*now \['recip', 'r_chars'\]\), or set "
    with pytest.raises(ValueError, match=joined + listed + r"difficulty.bm25_list: candidates$"):
        plan_of({**run, "difficulty": {"bm25_list": "run", "functions": ["recip", "r_chars"]}})
    consumed = {"chars": {"scoring": "r_chars"}, "recip": {"weighting": {"scoring": "recip"}}}  # null: both joined
    with pytest.raises(ValueError, match=joined + r".*null: the functions the experiments consume"):
        plan_of({**run, "experiments": consumed})
    assert plan_of({"difficulty": {"functions": ["recip", "r_chars"]}}).difficulty_functions() == ["recip", "r_chars"]
    assert plan_of({**run, "difficulty": {"bm25_list": "run", "functions": ["recip", "turns"]}})

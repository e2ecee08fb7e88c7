"""The typed run spec: parsed once, written back by one generic rule, with every params value, plan and committed
ledger digest as it was before it existed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from curricula.experiments import spec as spec_module
from curricula.experiments.spec import (
    CurriculumSpec,
    TrainSpec,
    parse_train_spec,
    spec_params,
)
from curricula.experiments.specs import experiment_specs
from curricula.plumbing.config import read_yaml
from curricula.training.spec import FitSpec, Runtime
from tests.plan_snapshot import CONFIGS, PACKAGED, job_lines, plan_digest
from tests.workflow_run import REPO

SCHEMA = read_yaml(REPO / "schemas" / "config.schema.yaml")
#: fields the parser resolves from the ranker (DEFAULT_LR, ..., the arithmetic version; no schema default), or that
#: are no ``train`` knob of the schema (the curriculum axes live under ``experiments``)
RESOLVED = {"lr", "schedule", "arithmetic"}


def default_config() -> dict:
    from curricula.plumbing.config import validate_config

    config = read_yaml(REPO / "config.yaml")
    validate_config(config, SCHEMA)
    return config


def test_part_defaults_are_the_schemas():
    train = SCHEMA["properties"]["train"]["properties"]
    checked = 0
    for part in spec_module.PARTS.values():
        for f in dataclasses.fields(part):
            if f.name in RESOLVED or f.name == "threads" or f.name not in train and part is CurriculumSpec:
                continue
            default = train[f.name].get("default")
            want = spec_module.freeze(default)
            assert f.default == want, f"{part.__name__}.{f.name}: {f.default!r}, schema {default!r}"
            checked += 1
    assert checked >= 25
    parsed = {f.name for part in spec_module.PARTS.values() for f in dataclasses.fields(part)}
    assert set(train) - parsed == set(), "a train knob the parser does not read"


def test_params_round_trip_through_the_parser():
    specs = experiment_specs(default_config(), SCHEMA)
    for name, spec in specs.items():
        params = spec_params(spec)
        again = parse_train_spec(params)
        assert again.with_runtime(threads=spec.runtime.threads) == spec, name  # threads: runtime-only
        assert spec_params(again) == params
        assert list(spec_params(again)) == list(params), "the params keep their key order"


def test_idle_added_knobs_stay_out_of_params_and_a_set_one_goes_in():
    spec = experiment_specs(default_config(), SCHEMA)["baseline"]
    params = spec_params(spec)
    assert not {"averaging", "ema_decay", "keep", "diagnostic_averages", "diagnostic_test", "deterministic",
                "threads", "spec_version"} & set(params)
    assert spec_params(spec.with_fit(averaging="swa"))["averaging"] == "swa"
    assert "ema_decay" not in spec_params(spec.with_fit(averaging="swa"))
    assert spec_params(spec.with_runtime(deterministic=True))["deterministic"] is True
    assert spec_params(spec.with_runtime(threads=7)) == params, "threads is runtime-only"
    # an EMA-less run normalises ema_decay to the default, so setting it alone changes nothing
    assert parse_train_spec({**params, "ema_decay": 0.9}) == parse_train_spec(params)


def test_a_new_knob_needs_no_rule_of_its_own(monkeypatch):
    """A field added with ``knob(..., added=True)`` leaves every existing run's params as they were, enters them
    once set, and a spec version above 1 writes itself in so that every job re-runs."""

    @dataclasses.dataclass(frozen=True)
    class Curriculum2(CurriculumSpec):
        mixing: float = spec_module.knob(0.0, added=True)

    parts = {n: Curriculum2 if c is CurriculumSpec else c for n, c in spec_module.PARTS.items()}
    monkeypatch.setattr(spec_module, "PARTS", parts)
    monkeypatch.setattr(spec_module, "KNOWN_KEYS", spec_module.KNOWN_KEYS | {"mixing"})
    params = spec_params(experiment_specs(default_config(), SCHEMA)["baseline"])
    spec = parse_train_spec(params)
    assert spec_params(spec) == params
    assert spec_params(parse_train_spec({**params, "mixing": 0.5}))["mixing"] == 0.5
    monkeypatch.setattr(spec_module, "SPEC_VERSION", 2)
    assert spec_params(parse_train_spec({**params, "spec_version": 2}))["spec_version"] == 2
    with pytest.raises(ValueError, match="version 1; this pipeline reads version 2"):
        parse_train_spec(params)


def test_an_unknown_key_is_refused_naming_it():
    params = spec_params(experiment_specs(default_config(), SCHEMA)["baseline"])
    with pytest.raises(ValueError, match=r"train: unknown key\(s\) \['stepz'\]"):
        parse_train_spec({**params, "stepz": 3}, "train")


def test_parts_are_frozen_and_typed():
    spec = experiment_specs(default_config(), SCHEMA)["baseline"]
    assert isinstance(spec, TrainSpec) and isinstance(spec.fit, FitSpec) and isinstance(spec.runtime, Runtime)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(spec.fit, "steps", 3)
    assert spec.arm.length == spec.fit.steps and spec.ranker.arch()["ngrams"] == [1, 2, 3]


def ledger_records(folder: str) -> dict[tuple[str, str], set[str]]:
    """{(dataset, arm): the spec digests its runs hold} of the committed ledger folder ``ledger/study/<folder>``."""
    from curricula.study.ledger import read_record

    out: dict[tuple[str, str], set[str]] = {}
    for path in sorted((REPO / "ledger" / "study" / folder).rglob("*.parquet")):
        record = read_record(path, in_ledger=True)
        out.setdefault((record["dataset"], record["arm"]), set()).add(record["spec_digest"])
    return out


@pytest.fixture
def first_arithmetic(monkeypatch):
    """ConvKNRM's arithmetic as the code computed it when the plan snapshot and the committed ledger were made
    (version 1): the registry entry replaced for the test."""
    from curricula.models.registry import REGISTRY

    monkeypatch.setitem(REGISTRY, "convknrm", dataclasses.replace(REGISTRY["convknrm"], arithmetic=1))


@pytest.mark.slow
def test_the_replication_ledger_runs_pair_with_the_current_arithmetic():
    """The DailyDialog++ replication's committed runs were trained with ConvKNRM's current arithmetic: every arm's
    runs hold the spec digest the replication's plan computes now, so the next machine's runs pair with them."""
    from curricula.pipeline.ledger import spec_digest
    from curricula.pipeline.study import study_plan_of

    records = ledger_records("only=dailydialog_pp_rep1")
    assert records, "the committed replication ledger holds runs"
    plan = study_plan_of([REPO / "configs" / name for name in ("study.yaml", "study_rounds.yaml",
                                                                "study_replication.yaml")],
                         {"study": {"only": ["dailydialog_pp"]}})
    for (dataset, arm), held in records.items():
        assert held == {spec_digest(plan.datasets[dataset], arm)}, (dataset, arm)


def test_the_committed_ledgers_spec_digests_recompute_from_the_typed_spec(monkeypatch):
    """Under ConvKNRM's first arithmetic every arm of the committed ledger recomputes its spec digest; under the
    current one every arm that trains a ConvKNRM gets another digest (no run of the new arithmetic pairs with a
    committed run), and the others keep theirs."""
    from curricula.study.grid import ACTIVE_PREFIX
    from curricula.models.registry import REGISTRY
    from curricula.pipeline.ledger import arm_runs, spec_digest
    from curricula.pipeline.study import study_plan_of

    def plan():
        return study_plan_of([REPO / "configs" / "study.yaml", REPO / "configs" / "study_rounds.yaml"],
                             {"study": {"only": ["dailydialog_pp"]}})

    def rankers(dataset, arm: str) -> set[str]:
        if arm.startswith(ACTIVE_PREFIX):
            return {dataset.active.ranker.ranker}
        return {dataset.runs[run].ranker.ranker for run in arm_runs(dataset, arm)}

    records = ledger_records("only=dailydialog_pp")
    assert records, "the committed ledger holds runs"
    assert REGISTRY["convknrm"].arithmetic > 1
    now = plan()
    current = {key: spec_digest(now.datasets[key[0]], key[1]) for key in records}
    monkeypatch.setitem(REGISTRY, "convknrm", dataclasses.replace(REGISTRY["convknrm"], arithmetic=1))
    first = {key: spec_digest(plan().datasets[key[0]], key[1]) for key in records}
    convknrm = {key for key in records if "convknrm" in rankers(now.datasets[key[0]], key[1])}
    assert len(convknrm) >= 10  # the study's curricula train ConvKNRM; its active loop trains lstm_qa
    for key, held in records.items():
        assert held == {first[key]}, key
        assert (current[key] not in held) == (key in convknrm), key


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_dry_runs_plan_the_same_jobs_and_params_as_before_the_typed_spec(name, first_arithmetic):
    """Each rule's jobs, their outputs, inputs and params (as Snakemake compares them) equal the snapshot taken on
    the code before, under the ConvKNRM arithmetic of that code: nothing else of a plan changed."""
    if name not in PACKAGED and not (REPO.parent / "shared" / "data").is_dir():
        pytest.skip("this preset's dataset is not in ../shared/data")
    snapshot = json.loads((REPO / "tests" / "data" / "plan_snapshot.json").read_text())[name]
    if any(Path(p).exists() for p in (REPO / "results",)):
        pytest.skip("a results/ folder changes what the study's ledger rules read; run on a clean checkout")
    assert plan_digest(REPO, CONFIGS[name]) == snapshot


@pytest.mark.slow
def test_a_change_of_arithmetic_changes_exactly_the_params_of_the_jobs_that_compute_with_it(monkeypatch):
    """The default plan under ConvKNRM's current arithmetic differs from the plan under its first one exactly in
    the params of the jobs that train or score a ConvKNRM (each gains ``arithmetic``), so Snakemake re-runs those
    and nothing upstream (BM25, embeddings, the teacher)."""
    from curricula.models.registry import REGISTRY

    if (REPO / "results").exists():
        pytest.skip("a results/ folder changes what the study's ledger rules read; run on a clean checkout")
    current = job_lines(REPO, [])
    version = REGISTRY["convknrm"].arithmetic
    monkeypatch.setitem(REGISTRY, "convknrm", dataclasses.replace(REGISTRY["convknrm"], arithmetic=1))
    first = job_lines(REPO, [])
    changed = {rule for rule in current if sorted(current[rule]) != sorted(first[rule])}
    assert changed and changed <= {"train", "evaluate", "select_tuned", "train_summary", "report_table"} | {
        rule for rule in current if "convknrm" in " ".join(current[rule])}
    assert not changed & {"bm25_index", "bm25_search", "dense_encode", "teacher_train", "teacher_score", "ingest"}
    for rule in changed:
        stripped = sorted(line.replace(f"'arithmetic': {version}, ", "").replace(f", 'arithmetic': {version}", "")
                          for line in current[rule])
        assert stripped == sorted(first[rule]), rule

"""Studies (curricula.study.grid): each dataset's config from the study's layers, and the findings (effect, CI, p, MDE,
verdict) of each claim on each dataset."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from curricula.experiments.spec import parse_train_spec, spec_params
from curricula.experiments.specs import experiment_runs
from curricula.plumbing.config import merge, validate_config
from curricula.plumbing.config_errors import ConfigError
from curricula.study.grid import (
    arm_spec,
    check_claim_datasets,
    claim_datasets,
    claim_differences,
    dataset_config,
    flatten,
    listed_claims,
    spec_differences,
    study_configs,
    study_name,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((REPO / "config.yaml").read_text())
WIDE = {"results": "results", "shards": {"bm25": 1, "encode": 1, "neighbors": 1, "teacher": 1}}


def test_a_dataset_config_layers_default_preset_study_then_overrides(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"dataset": {"name": "wikiqa", "format": "wikiqa", "files": {"train": "t.tsv"}},
                                      "seeds": [1, 2, 3, 4, 5], "train": {"negatives": {"mode": "candidates"},
                                                                          "steps": 100}}))
    common = {"seeds": [7], "train": {"steps": 50}}
    cfg = dataset_config("wq", {"preset": str(preset), "train": {"eval_every": 25}}, DEFAULT, common, WIDE)
    assert cfg["dataset"] == {"name": "wq", "format": "wikiqa", "files": {"train": "t.tsv"}}  # the key names it
    assert cfg["seeds"] == [7]                                         # the study's grid wins over the preset's
    assert cfg["train"]["steps"] == 50
    assert cfg["train"]["negatives"] == {"mode": "candidates"}         # what the study leaves open, from the preset
    assert cfg["train"]["eval_every"] == 25                            # overrides come last
    assert cfg["train"]["ranker"] == DEFAULT["train"]["ranker"]        # the rest from config.yaml
    assert cfg["results"] == "results" and cfg["shards"] == WIDE["shards"]
    validate_config(cfg)
    plain = dataset_config("chitchat", None, DEFAULT, common, WIDE)    # null: config.yaml's dataset
    assert plain["dataset"]["format"] == "chitchat" and plain["dataset"]["options"] == DEFAULT["dataset"]["options"]


def test_a_dataset_override_patches_the_study_grid_and_cannot_add_or_drop_an_experiment():
    # a config file's experiments replace the grid (curricula.plumbing.config.merge); a dataset's override changes knobs
    # of the
    # study's experiments on that dataset alone and leaves the rest of the grid as the study has it
    common = {"experiments": {"kde": {"weighting": {"scoring": "kde", "m": 20, "iteration_steps": 32}},
                              "penha": {"scoring": "bert_pred", "pacing": {"name": "root_2"}}}}
    cfg = dataset_config("ce", {"experiments": {"kde": {"weighting": {"m": 5}}}}, DEFAULT, common, WIDE)
    assert cfg["experiments"] == {"kde": {"weighting": {"scoring": "kde", "m": 5, "iteration_steps": 32}},
                                  "penha": common["experiments"]["penha"]}
    validate_config(cfg)
    with pytest.raises(ValueError, match=r"study.datasets.ce.experiments: hcl is not an experiment of the study's "
                                         r"grid \(kde, penha\); a dataset's overrides change"):
        dataset_config("ce", {"experiments": {"hcl": {"scoring": "hcl_corpus"}}}, DEFAULT, common, WIDE)
    with pytest.raises(ValueError, match=r"study.datasets.ce.experiments.kde: expected a mapping of knobs"):
        dataset_config("ce", {"experiments": {"kde": None}}, DEFAULT, common, WIDE)


def test_a_dataset_may_not_move_what_the_study_shares(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"results": "elsewhere"}))
    with pytest.raises(ValueError, match=r"study.datasets.x: its preset sets results: 'elsewhere'"):
        dataset_config("x", str(preset), DEFAULT, {}, WIDE)
    with pytest.raises(ValueError, match=r"study.datasets.x: its overrides sets shards"):
        dataset_config("x", {"shards": {"bm25": 4}}, DEFAULT, {}, WIDE)


def test_bad_study_entries_are_refused_with_the_key_and_file(tmp_path):
    with pytest.raises(ValueError, match=r"study.datasets.x: preset file .*nope.yaml not found"):
        dataset_config("x", str(tmp_path / "nope.yaml"), DEFAULT, {}, WIDE)
    broken = tmp_path / "broken.yaml"
    broken.write_text("dataset: [unclosed\n")
    with pytest.raises(ValueError, match=r"broken.yaml is not valid YAML"):
        dataset_config("x", str(broken), DEFAULT, {}, WIDE)
    nested = tmp_path / "nested.yaml"
    nested.write_text(yaml.safe_dump({"study": {"datasets": {"a": None}}}))
    with pytest.raises(ValueError, match="holds a study section"):
        dataset_config("x", str(nested), DEFAULT, {}, WIDE)
    with pytest.raises(ValueError, match="a dataset key is a letter"):
        dataset_config("9x", None, DEFAULT, {}, WIDE)
    with pytest.raises(ValueError, match="expected a preset path or a mapping"):
        dataset_config("x", 3, DEFAULT, {}, WIDE)
    with pytest.raises(ValueError, match="drop the top-level dataset section"):
        study_configs(DEFAULT, {"study": {"datasets": {"a": None}}, "dataset": {"name": "a"}}, WIDE)
    with pytest.raises(ValueError, match="at least one dataset"):
        study_configs(DEFAULT, {"study": {"datasets": {}}}, WIDE)


def test_a_selection_of_the_study_names_its_own_folder():
    """study.only judges a smaller family: its outputs go to a folder of their own, named by its keys in sorted order;
    listing every dataset is the whole study."""
    keys = ["chitchat", "wikiqa", "dailydialog_pp"]
    assert study_name(keys, None) == "study"
    assert study_name(keys, ["wikiqa", "dailydialog_pp", "chitchat"]) == "study"
    assert study_name(keys, ["dailydialog_pp"]) == "study/only=dailydialog_pp"
    assert study_name(keys, ["wikiqa", "chitchat"]) == study_name(keys, ["chitchat", "wikiqa"]) == \
        "study/only=chitchat+wikiqa"


def test_the_study_preset_builds_a_valid_config_per_dataset(monkeypatch):
    """configs/study.yaml names presets by paths relative to the repository root (the working directory)."""
    monkeypatch.chdir(REPO)
    overlay = yaml.safe_load((REPO / "configs" / "study.yaml").read_text())
    configs = study_configs(DEFAULT, overlay, WIDE)
    assert list(configs) == ["chitchat", "wikiqa", "semeval_cqa", "dailydialog_pp"]
    formats = {k: validate_config(c)["dataset"]["format"] for k, c in configs.items()}
    assert formats == {"chitchat": "chitchat", "wikiqa": "wikiqa", "semeval_cqa": "semeval_cqa",
                       "dailydialog_pp": "dailydialog_pp"}
    grids = {k: (c["seeds"], c["experiments"]) for k, c in configs.items()}
    assert all(g == grids["chitchat"] for g in grids.values())          # one grid on every dataset
    only = {**overlay, "study": {**overlay["study"], "only": ["wikiqa"]}}
    assert list(study_configs(DEFAULT, only, WIDE)) == ["wikiqa"]
    with pytest.raises(ValueError, match=r"study.only: douban not among study.datasets \(chitchat, wikiqa"):
        study_configs(DEFAULT, {**overlay, "study": {**overlay["study"], "only": ["wikiqa", "douban"]}}, WIDE)
    assert configs["semeval_cqa"]["dataset"]["relevant_min"] == 2        # the official scorer's threshold
    claims = listed_claims(overlay["study"]["claims"])
    assert [c["id"] for c in claims][:2] == ["penha_root2", "macavaney_kde"]
    claimed = {n for c in claims for n in (c["experiment"], c["against"])} - {"baseline"}
    active = {n for n in claimed if n.startswith("active:")}
    assert claimed - active <= set(overlay["experiments"])
    assert {n.split(":")[1].split("@")[0] for n in active} <= set(overlay["active"]["methods"])


def test_an_overlay_drops_a_claim_and_the_active_part():
    """configs/study_curricula.yaml over configs/study.yaml: the study without Wang's claim and the active loop."""
    from curricula.plumbing.config import merge

    overlay = merge(yaml.safe_load((REPO / "configs" / "study.yaml").read_text()),
                    yaml.safe_load((REPO / "configs" / "study_curricula.yaml").read_text()))
    ids = [c["id"] for c in listed_claims(overlay["study"]["claims"])]
    assert "wang_dasl" not in ids and len(ids) == 9
    assert list(overlay["study"]["datasets"]) == ["chitchat", "wikiqa", "semeval_cqa", "dailydialog_pp"]
    assert overlay["active"]["enabled"] is False


def test_spec_differences_are_dotted_keys_of_the_flattened_specs():
    a = {"loss": "hinge", "scoring": "random", "weighting": None, "negatives": {"mode": "random", "m": 1},
         "architecture": {}}
    b = {"loss": "hinge", "scoring": "kde", "weighting": {"scoring": "kde", "m": 20},
         "negatives": {"mode": "candidates", "m": 1}, "architecture": {}, "anti": True}
    assert flatten({"negatives": {"mode": "random", "pacing": {"T": 0.9}}}) == {
        "negatives": {}, "negatives.mode": "random", "negatives.pacing": {}, "negatives.pacing.T": 0.9}
    assert spec_differences(a, b) == ["anti", "negatives.mode", "scoring", "weighting", "weighting.m",
                                      "weighting.scoring"]
    assert spec_differences(a, a) == [] and spec_differences(flatten(a), b) == spec_differences(a, b)


def _study_runs(overlay: dict) -> dict:
    return {d: experiment_runs(validate_config(c)) for d, c in study_configs(DEFAULT, overlay, WIDE).items()}


def test_every_study_claim_differs_only_in_its_declared_factors(monkeypatch):
    """configs/study.yaml: on every dataset each claim's arms differ in the factor the paper names, nothing else
    (MacAvaney's arms against the baseline's candidate negatives; Su's IC-off arms on random
    negatives, also where a preset gives every arm the candidates)."""
    monkeypatch.chdir(REPO)
    overlay = yaml.safe_load((REPO / "configs" / "study.yaml").read_text())
    runs = _study_runs(overlay)
    keys = claim_differences(listed_claims(overlay["study"]["claims"]), runs)
    weighting = ["weighting", "weighting.iteration_steps", "weighting.m", "weighting.scoring"]
    ic = ["negatives.false_negative_guard", "negatives.mode", "negatives.pacing", "negatives.pacing.T",
          "negatives.pacing.kT"]
    cc = ["pacing.T", "pacing.T0", "pacing.name", "pacing.r0", "scoring"]
    expected = {"penha_root2": ["pacing.name", "scoring"], "macavaney_kde": weighting,
                "macavaney_anti": ["weighting.anti"], "macavaney_minf": ["weighting.m"], "su_hcl": sorted(ic + cc),
                "su_cc": cc, "su_ic": ic, "su_ic_over_cc": sorted(ic + cc), "wang_dasl": ["active.method"],
                "composed_teacher_kde": sorted(["pacing.name", "scoring", *weighting])}
    assert keys == {claim: dict.fromkeys(runs, k) for claim, k in expected.items()}
    for dataset in runs:
        assert arm_spec("su_hinge", runs[dataset])["negatives.mode"] == "random"
        assert arm_spec("baseline", runs[dataset])["negatives.mode"] == "candidates"
        ms = {arm: arm_spec(arm, runs[dataset])["negatives.m"] for arm in ("su_ic", "su_hinge", "hcl", "su_cc")}
        assert set(ms.values()) == {5}, ms  # Su's arms all draw the released code's m = 5 negatives


def test_a_claim_with_an_undeclared_difference_is_refused(monkeypatch):
    monkeypatch.chdir(REPO)
    overlay = yaml.safe_load((REPO / "configs" / "study.yaml").read_text())
    runs = _study_runs(overlay)
    # chitchat's baseline as the default config had it before issue 30: random negatives, while every MacAvaney arm
    # draws the query's candidates
    params = spec_params(runs["chitchat"]["baseline"]["baseline"])
    random_negatives = {**params, "negatives": {**params["negatives"], "mode": "random"}}
    runs["chitchat"]["baseline"]["baseline"] = parse_train_spec(random_negatives)
    confounded = {"id": "kde", "paper": "M", "claim": "c", "experiment": "macavaney_kde", "against": "baseline",
                  "expect": "better", "factors": ["weighting"]}
    with pytest.raises(ValueError, match=r"study.claims.kde \(macavaney_kde against baseline\) on chitchat: the arms "
                                         r"differ in \['negatives.mode'\], which its factors \['weighting'\] do not "
                                         r"cover \(negatives.mode: 'candidates' in macavaney_kde, 'random' in "
                                         r"baseline\)"):
        claim_differences([confounded], runs)
    assert claim_differences([confounded], {"wikiqa": runs["wikiqa"]})["kde"]["wikiqa"][0] == "weighting"
    with pytest.raises(ValueError, match=r"study.claims.kde: a claim declares the factors"):
        claim_differences([{**confounded, "factors": []}], runs)
    with pytest.raises(ValueError, match=r"study.claims.kde on chitchat: 'nope' is not an experiment of the grid"):
        claim_differences([{**confounded, "against": "nope"}], runs)
    # the +bm25 forms differ in additivity; an active-learning claim needs no factors
    bm25 = {**confounded, "experiment": "baseline+bm25", "factors": ["additivity"]}
    assert claim_differences([bm25], runs)["kde"]["chitchat"] == ["additivity"]
    dasl = {**confounded, "experiment": "active:dasl@1", "against": "active:random@2", "factors": None}
    assert claim_differences([dasl], runs)["kde"]["chitchat"] == ["active.method", "active.round"]
    # a claim tested on some datasets only is checked there only: the confounded chitchat arms are not looked at
    assert list(claim_differences([{**confounded, "datasets": ["wikiqa"]}], runs)["kde"]) == ["wikiqa"]


def test_a_claim_lists_the_datasets_it_is_tested_on_and_an_unknown_one_is_refused():
    claim = {"id": "al", "experiment": "active:dasl@1", "against": "active:random@1"}
    assert claim_datasets(claim, ["a", "b"]) == ["a", "b"]
    assert claim_datasets({**claim, "datasets": ["b", "c"]}, ["a", "b"]) == ["b"]   # c is left out by study.only
    check_claim_datasets([{**claim, "datasets": ["b", "c"]}], ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"study.claims.al.datasets: wikiqa_ce not among study.datasets \(a, b\)"):
        check_claim_datasets([{**claim, "datasets": ["a", "wikiqa_ce"]}], ["a", "b"])


def test_a_tuned_arm_differs_in_the_knob_it_tunes():
    cfg = validate_config(merge(DEFAULT, {"experiments": {
        "w": {"weighting": {"scoring": "kde", "m": [5, 20]}, "negatives": {"mode": "candidates"}},
        "u": {"negatives": {"mode": "candidates"}}}}))
    assert arm_spec("w", experiment_runs(cfg))["weighting.m"] == [5, 20]
    claim = {"id": "w", "experiment": "w", "against": "u", "factors": ["weighting"]}
    assert "weighting.m" in claim_differences([claim], {"d": experiment_runs(cfg)})["w"]["d"]


def test_the_schema_requires_factors_unless_both_arms_are_active():
    def study(**claims):
        return merge(DEFAULT, {"study": {"datasets": {"a": None}, "claims": claims}})

    claim = {"paper": "P", "claim": "c", "experiment": "x", "against": "baseline", "expect": "better"}
    with pytest.raises(ConfigError, match=r"^study.claims.c.factors: missing \(required\)$"):
        validate_config(study(c=claim))
    validate_config(study(c={**claim, "factors": ["weighting.m"]}, d=None))
    validate_config(study(c={**claim, "experiment": "active:dasl@1", "against": "active:random@1"}))
    with pytest.raises(ConfigError, match=r"^study.claims.c.factors: missing \(required\)$"):
        validate_config(study(c={**claim, "experiment": "active:dasl@1"}))


def test_the_cross_encoder_overlay_adds_a_copy_whose_claims_differ_in_their_factors_alone(monkeypatch):
    """configs/study_cross_encoder.yaml over configs/study.yaml: WikiQA and DailyDialog++ a second time with the
    cross-encoder, MacAvaney's m patched to 5 there only, Wang's loop on the first copies only, and every claim's arms
    still differing in its factor alone on all six datasets."""
    monkeypatch.chdir(REPO)
    overlay = merge(yaml.safe_load((REPO / "configs" / "study.yaml").read_text()),
                    yaml.safe_load((REPO / "configs" / "study_cross_encoder.yaml").read_text()))
    configs = {d: validate_config(c) for d, c in study_configs(DEFAULT, overlay, WIDE).items()}
    assert list(configs) == ["chitchat", "wikiqa", "semeval_cqa", "dailydialog_pp", "wikiqa_ce", "dailydialog_pp_ce"]
    # the DailyDialog++ copy: the same ranker knobs (one YAML anchor), its own length and max_length
    dd = configs["dailydialog_pp_ce"]
    assert {k: v for k, v in dd["train"].items() if k not in ("steps", "max_length")} == {
        k: v for k, v in configs["wikiqa_ce"]["train"].items() if k not in ("steps", "max_length")}
    assert (dd["train"]["steps"], dd["train"]["max_length"]) == (950, 128)
    assert dd["dataset"]["files"] == configs["dailydialog_pp"]["dataset"]["files"] and dd["active"]["enabled"] is False
    ce, plain = configs["wikiqa_ce"], configs["wikiqa"]
    assert ce["train"]["ranker"] == "cross_encoder" and plain["train"]["ranker"] == "convknrm"
    assert ce["dataset"]["files"] == plain["dataset"]["files"] and ce["seeds"] == plain["seeds"]
    assert ce["active"]["enabled"] is False and plain["active"]["enabled"] is True
    assert list(ce["experiments"]) == list(plain["experiments"])
    assert {n: e["weighting"]["m"] for n, e in ce["experiments"].items() if "weighting" in e} == {
        "macavaney_kde": 5, "macavaney_kde_anti": 5, "macavaney_kde_minf": "inf", "composed_teacher_kde": 5}
    assert plain["experiments"]["macavaney_kde"]["weighting"]["m"] == 20
    claims = listed_claims(overlay["study"]["claims"])
    check_claim_datasets(claims, list(configs))
    runs = {d: experiment_runs(c) for d, c in configs.items()}
    keys = claim_differences(claims, runs)
    assert list(keys["wang_dasl"]) == ["chitchat", "wikiqa", "semeval_cqa", "dailydialog_pp"]
    assert list(keys["penha_root2"]) == list(configs)
    assert keys["macavaney_minf"]["wikiqa_ce"] == ["weighting.m"]
    assert keys["su_ic"]["wikiqa_ce"] == keys["su_ic"]["wikiqa"]
    assert keys["macavaney_minf"]["dailydialog_pp_ce"] == ["weighting.m"]

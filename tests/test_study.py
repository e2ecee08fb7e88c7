"""Studies (curricula.study): each dataset's config from the study's layers, and the findings (effect, CI, p, MDE,
verdict) of each claim on each dataset."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from scipy import stats

from curricula.config import merge, validate_config
from curricula.report import cheapest, holm, mde, plan
from curricula.experiments import experiment_runs
from curricula.study import (EQUIVALENT, INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, arm_spec, claim_differences, claim_row,
                             confidence_interval, dataset_config, dataset_plans, findings_markdown, findings_stage,
                             findings_table, flatten, listed_claims, spec_differences, study_configs, verdict)

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
    assert configs["semeval_cqa"]["dataset"]["relevant_min"] == 2        # the official scorer's threshold
    claims = listed_claims(overlay["study"]["claims"])
    assert [c["id"] for c in claims][:2] == ["penha_root2", "macavaney_kde"]
    claimed = {n for c in claims for n in (c["experiment"], c["against"])} - {"baseline"}
    active = {n for n in claimed if n.startswith("active:")}
    assert claimed - active <= set(overlay["experiments"])
    assert {n.split(":")[1].split("@")[0] for n in active} <= set(overlay["active"]["methods"])


def test_an_overlay_drops_a_claim_and_the_active_part():
    """configs/study_curricula.yaml over configs/study.yaml: the study without Wang's claim and the active loop."""
    from curricula.config import merge

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
    runs["chitchat"]["baseline"]["baseline"]["negatives"]["mode"] = "random"
    confounded = {"id": "kde", "paper": "M", "claim": "c", "experiment": "macavaney_kde", "against": "baseline",
                  "expect": "better", "factors": ["weighting"]}
    with pytest.raises(ValueError, match=r"study.claims.kde \(macavaney_kde against baseline\) on chitchat: the arms "
                                         r"differ in \['negatives.mode'\], which its factors \['weighting'\] do not "
                                         r"cover \(negatives.mode: 'candidates' in macavaney_kde, 'random' in baseline\)"):
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
    with pytest.raises(Exception, match="'factors' is a required property"):
        validate_config(study(c=claim))
    validate_config(study(c={**claim, "factors": ["weighting.m"]}, d=None))
    validate_config(study(c={**claim, "experiment": "active:dasl@1", "against": "active:random@1"}))
    with pytest.raises(Exception, match="'factors' is a required property"):
        validate_config(study(c={**claim, "experiment": "active:dasl@1"}))


def test_confidence_interval_is_the_t_interval_of_the_mean():
    d = np.random.default_rng(0).normal(0.01, 0.1, 300)
    low, high = confidence_interval(d, 0.95)
    ref = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert (low, high) == pytest.approx(ref, rel=1e-12)
    assert all(math.isnan(x) for x in confidence_interval([0.1]))


@pytest.mark.parametrize(("effect", "p", "expect", "p_equivalence", "word"), [
    (0.03, 0.01, "better", math.nan, REPRODUCED), (-0.03, 0.01, "better", math.nan, NOT_REPRODUCED),
    (-0.03, 0.01, "worse", 0.9, REPRODUCED), (0.03, 0.04, "worse", 0.9, NOT_REPRODUCED),
    (0.019, 0.06, "better", 0.2, INCONCLUSIVE), (0.001, 0.5, "better", 0.01, EQUIVALENT),
    (0.001, 0.01, "better", 0.01, REPRODUCED),  # significant first: a tiny but certain effect is decided
    (0.0, 1.0, "worse", 0.0, EQUIVALENT), (-0.019, 0.05, "worse", 0.05, INCONCLUSIVE),
    (0.1, math.nan, "better", math.nan, INCONCLUSIVE),
])
def test_verdict_words(effect, p, expect, p_equivalence, word):
    """The verdict order of issue 31: significant -> (not) reproduced by sign; else equivalent by TOST; else
    inconclusive. (Before the seed-aware default the verdict compared |effect| with the MDE.)"""
    assert verdict(effect, p, expect, p_equivalence) == word
    with pytest.raises(ValueError):
        verdict(effect, p, "same")


def _metrics(values: dict[str, np.ndarray], seeds: int = 2, measure: str = "AP") -> pl.DataFrame:
    """A long metrics frame: per experiment and seed, the given per-query values plus a seed offset that averages
    to zero over the seeds."""
    rows = []
    for experiment, v in values.items():
        for s in range(seeds):
            offset = (s - (seeds - 1) / 2) * 0.01
            rows += [{"experiment": experiment, "seed": str(s + 1), "qid": f"q{i:03d}", "measure": measure,
                      "value": float(x + offset)} for i, x in enumerate(v)]
    return pl.DataFrame(rows)


def test_a_claim_row_pairs_seed_averaged_values_by_query():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.2, 0.8, 400)
    better = base + 0.05 + rng.normal(0, 0.05, 400)
    row = claim_row(_metrics({"baseline": base, "x": better}), "x", "baseline", "AP", "better")
    d = better - base
    assert row["queries"] == 400 and row["seeds"] == 2
    assert row["effect"] == pytest.approx(d.mean(), abs=1e-12)
    assert row["p"] == pytest.approx(stats.ttest_rel(better, base).pvalue, rel=1e-9)
    assert row["mde"] == pytest.approx(mde(d), rel=1e-9)
    assert row["ci_low"] < row["effect"] < row["ci_high"]
    assert row["effect_pct"] == pytest.approx(100 * d.mean() / base.mean(), rel=1e-9)
    assert row["verdict"] == REPRODUCED
    assert claim_row(_metrics({"baseline": base, "x": better}), "baseline", "x", "AP", "better")["verdict"] == \
        NOT_REPRODUCED
    noise = base + rng.normal(0, 0.05, 400)  # no effect, measured closely: within the 2% margin
    row = claim_row(_metrics({"baseline": base, "x": noise}), "x", "baseline", "AP", "better")
    assert row["verdict"] == EQUIVALENT and row["p_equivalence"] < 0.05 <= row["p"]
    assert row["margin"] == pytest.approx(0.02 * base.mean())
    wide = base[:30] + rng.normal(0, 0.2, 30)  # 30 noisy queries: neither an effect nor its absence is shown
    row = claim_row(_metrics({"baseline": base[:30], "x": wide}), "x", "baseline", "AP", "better")
    assert row["verdict"] == INCONCLUSIVE and row["p"] >= 0.05 and row["p_equivalence"] >= 0.05


def test_a_claim_on_a_missing_experiment_or_other_queries_is_refused():
    base = np.linspace(0.1, 0.9, 20)
    with pytest.raises(ValueError, match="no AP values for 'y'"):
        claim_row(_metrics({"baseline": base}), "y", "baseline", "AP", "better")
    frame = pl.concat([_metrics({"baseline": base}), _metrics({"x": base[:10]})])
    with pytest.raises(ValueError, match="different queries"):
        claim_row(frame, "x", "baseline", "AP", "better")


CLAIMS = [{"paper": "P", "claim": "x beats the baseline", "experiment": "x", "against": "baseline",
           "expect": "better"},
          {"paper": "Q", "claim": "y is worse than x", "experiment": "y", "against": "x", "expect": "worse"}]


def test_findings_page_has_a_verdict_per_claim_and_dataset(tmp_path):
    rng = np.random.default_rng(2)
    base = rng.uniform(0.2, 0.8, 300)
    frames = {"one": _metrics({"baseline": base, "x": base + 0.1, "y": base + 0.1 + rng.normal(0, 0.01, 300)}),
              "two": _metrics({"baseline": base, "x": base - 0.1, "y": base - 0.2})}
    table = findings_table(frames, CLAIMS, "AP")
    assert table.select("paper", "dataset", "verdict").rows() == [
        ("P", "one", REPRODUCED), ("P", "two", NOT_REPRODUCED), ("Q", "one", EQUIVALENT), ("Q", "two", REPRODUCED)]
    page = findings_markdown(table)
    assert "| P | x beats the baseline | reproduced (+" in page
    # y = x + noise of SD 0.01 on 300 queries was "inconclusive" (|effect| < MDE) before equivalence tests
    assert "Over 4 (claim, dataset) tests: 2 reproduced, 1 not reproduced, 1 equivalent, 0 inconclusive." in page
    assert "the family is every claim x dataset, 2 claims x 2 datasets = 4 tests" in page
    assert table["survives"].to_list() == [True, True, True, True]
    assert "## Q: y is worse than x" in page and "| two | 300 | 2 |" in page
    with pytest.raises(ValueError, match="'x beats the baseline' on one: no AP values for 'x'"):
        findings_table({"one": _metrics({"baseline": base})}, CLAIMS[:1], "AP")
    with pytest.raises(ValueError, match="study.measure 'RR@10' was not evaluated on one"):
        findings_table(frames, CLAIMS, "RR@10")
    assert table["differing_keys"].null_count() == table.height       # not given: null
    keyed = [{**c, "id": i} for i, c in zip("pq", CLAIMS)]
    keys = {"p": {"one": ["scoring", "pacing.name"], "two": ["scoring", "pacing.name"]},
            "q": {"one": ["weighting.m"], "two": []}}
    table = findings_table(frames, keyed, "AP", differing_keys=keys)
    assert table["differing_keys"].to_list() == ["scoring, pacing.name"] * 2 + ["weighting.m", ""]
    page = findings_markdown(table)
    assert "The arms' training specs differ on every dataset in `scoring`, `pacing.name`." in page
    assert "The arms' training specs differ in `weighting.m` on one; nothing on two." in page


def test_findings_stage_writes_every_file_from_metric_files(tmp_path):
    rng = np.random.default_rng(3)
    base = rng.uniform(0.2, 0.8, 50)
    paths = {}
    for dataset, shift in (("one", 0.05), ("two", -0.05)):
        long = _metrics({"baseline": base, "x": base + shift, "y": base})
        for (experiment, seed), part in long.group_by("experiment", "seed"):
            path = tmp_path / dataset / f"{experiment}-{seed}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            part.select("qid", "measure", "value").write_parquet(path)
            paths[(dataset, experiment, seed)] = path
    out = {"findings": tmp_path / "s" / "findings.md", "table": tmp_path / "s" / "findings.csv",
           "parquet": tmp_path / "s" / "findings.parquet", "figure": tmp_path / "s" / "findings.png"}
    table = findings_stage(paths, CLAIMS, out, measure="AP")
    assert all(Path(p).is_file() for p in out.values())
    assert pl.read_parquet(out["parquet"]).equals(table)
    assert pl.read_csv(out["table"]).height == 4
    assert Path(out["figure"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in out["findings"].parent.iterdir()) == sorted(p.name for p in out.values())


def test_active_learning_claims_pair_per_round_test_values(tmp_path):
    """A claim may name an active-learning method's model after a round (active:<method>@<round>, Wang et al.
    2020); its per-query test values come from the active rule's test_metrics files."""
    from curricula.active_loop import ACTIVE_TEST_METRICS
    from curricula.study import parse_active_name
    from curricula.tables import write_table

    assert parse_active_name("active:dasl@3") == ("dasl", 3) and parse_active_name("hcl") is None
    with pytest.raises(ValueError, match="active:<method>@<round>"):
        parse_active_name("active:dasl")
    rng = np.random.default_rng(4)
    base = rng.uniform(0.2, 0.8, 200)
    paths = {}
    for method, gain in (("random", 0.0), ("dasl", 0.08)):
        for seed in ("1", "2"):
            rows = [{"round": r, "qid": f"q{i}", "measure": m, "value": float(v + gain * r)}
                    for r in range(2) for m in ("RR", "AP") for i, v in enumerate(base)]
            path = tmp_path / f"{method}-{seed}.parquet"
            write_table(pl.DataFrame(rows, schema=ACTIVE_TEST_METRICS.columns), path, ACTIVE_TEST_METRICS)
            paths[("one", method, seed)] = path
    claims = [{"paper": "Wang et al. 2020", "claim": "DASL beats random acquisition", "experiment": "active:dasl@1",
               "against": "active:random@1", "expect": "better"},
              {"paper": "Wang et al. 2020", "claim": "round 0 is the same", "experiment": "active:dasl@0",
               "against": "active:random@0", "expect": "better"}]
    out = {k: tmp_path / "s" / f"findings.{e}" for k, e in
           (("findings", "md"), ("table", "csv"), ("parquet", "parquet"), ("figure", "png"))}
    table = findings_stage({}, claims, out, measure="AP", active_paths=paths)
    assert table["verdict"].to_list() == [REPRODUCED, EQUIVALENT]  # round 0 is the same model: equivalent
    assert table["effect"][0] == pytest.approx(0.08) and table["effect"][1] == pytest.approx(0.0, abs=1e-12)
    assert table["seeds"].to_list() == [2, 2]


def _seed_dominated(rng: np.random.Generator, queries: int = 1000) -> pl.DataFrame:
    """baseline and x on 3 seeds: x - baseline = seed effect (SD 0.03) + query effect (0.1) + noise (0.05), no
    true effect."""
    d = (rng.normal(0, 0.03, (3, 1)) + rng.normal(0, 0.1, (1, queries)) + rng.normal(0, 0.05, (3, queries)))
    base = rng.uniform(0.3, 0.7, (3, queries))
    rows = [{"experiment": name, "seed": str(s + 1), "qid": f"q{q:04d}", "measure": "AP", "value": float(v[s, q])}
            for name, v in (("baseline", base), ("x", base + d)) for s in range(3) for q in range(queries)]
    return pl.DataFrame(rows)


def test_a_claim_is_judged_by_the_seed_aware_test_with_the_per_query_p_beside():
    frame = _seed_dominated(np.random.default_rng(5))
    row = claim_row(frame, "x", "baseline", "AP", "better")
    assert row["p_per_query"] < 0.05 <= row["p"] and row["verdict"] == INCONCLUSIVE
    assert row["sd_seed"] > 0.01 and row["df"] < 10
    old = claim_row(frame, "x", "baseline", "AP", "better", inference="per_query")
    assert old["p"] == pytest.approx(old["p_per_query"], rel=1e-9) and old["verdict"] != INCONCLUSIVE
    page = findings_markdown(findings_table({"one": frame}, CLAIMS[:1], "AP"))
    assert "seeds paired across the two experiments by seed id" in page and "| p | p per query |" in page
    with pytest.raises(ValueError, match="unbalanced design: x, seed 3"):
        claim_row(frame.filter(~((pl.col("experiment") == "x") & (pl.col("seed") == "3") & (pl.col("qid") == "q0001"))),
                  "x", "baseline", "AP", "better")


def test_multiplicity_marks_the_verdicts_that_survive_the_family():
    rng = np.random.default_rng(6)
    base = rng.uniform(0.2, 0.8, 200)
    frames = {f"d{i}": _metrics({"baseline": base, "x": base + shift + rng.normal(0, 0.1, 200)})
              for i, shift in enumerate((0.3, 0.016, 0.017, 0.0))}
    holm_table = findings_table(frames, CLAIMS[:1], "AP")
    bh_table = findings_table(frames, CLAIMS[:1], "AP", multiplicity="bh")
    none_table = findings_table(frames, CLAIMS[:1], "AP", multiplicity="none")
    p = holm_table["p_verdict"].to_list()
    assert holm_table["p_adjusted"].to_list() == pytest.approx(holm(p))
    assert bh_table["p_adjusted"].to_list() == pytest.approx(stats.false_discovery_control(p, method="bh"))
    assert none_table["p_adjusted"].to_list() == pytest.approx(p)
    decided = [v != INCONCLUSIVE for v in holm_table["verdict"]]
    for table in (holm_table, bh_table, none_table):
        assert table["survives"].to_list() == [d and q < 0.05 for d, q in zip(decided, table["p_adjusted"])]
    assert sum(bh_table["survives"]) >= sum(holm_table["survives"])  # BH is the less strict
    page = findings_markdown(bh_table, multiplicity="bh")
    assert "Benjamini-Hochberg" in page and "1 claims x 4 datasets = 4 tests" in page


def test_the_findings_page_carries_the_planner_per_dataset(tmp_path):
    frames = {"one": _seed_dominated(np.random.default_rng(5), 300),
              "two": _seed_dominated(np.random.default_rng(9), 300)}
    table = findings_table(frames, CLAIMS[:1], "AP")
    plans = dataset_plans(table)
    assert plans["dataset"].to_list() == ["one", "two"]
    row = plans.row(0, named=True)
    assert row["sd_seed"] == pytest.approx(table["sd_seed"][0]) and row["seeds"] == 3 and row["queries"] == 300
    components = (row["sd_seed"] ** 2, row["sd_query"] ** 2, row["sd_resid"] ** 2)
    assert row["effect"] == pytest.approx(0.02 * table["against_mean"][0])
    assert [row[f"seeds_{s}"] for s in range(2, 11)] == list(plan(components, row["effect"]).values())
    assert (row["cheapest_seeds"], row["cheapest_queries"]) == (None, None)  # sd_seed 0.018: 2% is out of reach
    assert cheapest(plan(components, 5 * row["effect"])) is not None  # a 10% effect is not
    page = findings_markdown(table, plans=plans)
    assert "## Seeds and test queries for a 2% effect" in page and "| one | 3 x 300 |" in page

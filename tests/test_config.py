"""Config validation against schemas/config.schema.yaml: unknown keys and wrong types stop the run."""

from __future__ import annotations

import pytest
import yaml
from curricula.plumbing.config import REPO, load_config, merge, read_yaml, results_dir, validate_config
from curricula.plumbing.config_errors import ConfigError


def default():
    return yaml.safe_load((REPO / "config.yaml").read_text())


def test_default_config_is_valid_and_gets_defaults():
    cfg = load_config(REPO / "config.yaml")
    assert cfg["dataset"]["format"] == "chitchat"
    assert cfg["dataset"]["split"]["resplit"] is False
    assert str(results_dir(cfg)) == "results/chitchat"


@pytest.mark.parametrize(
    "patch, needle",
    [
        ({"colour": 1}, "colour: unknown key"),
        ({"dataset": {"nmae": "x"}}, "dataset.nmae: unknown key (did you mean name?)"),
        ({"pipeline_seed": "one"}, "pipeline_seed: expected an integer, got 'one'"),
        ({"dataset": {"format": "csv"}}, "dataset.format: 'csv' is not one of chitchat,"),
        ({"dataset": {"options": {"negatives": "9"}}}, "dataset.options.negatives: expected an integer, got '9'"),
        ({"dataset": {"options": {"negative": 9}}}, "dataset.options.negative: unknown key (did you mean negatives?)"),
        ({"dataset": {"split": {"fractions": {"valid": 0.1}}}},
         "dataset.split.fractions.valid: unknown key (expected one of: train, dev, test)"),
    ],
)
def test_bad_config_names_the_key(patch, needle):
    with pytest.raises(ConfigError) as err:
        validate_config(merge(default(), patch))
    assert err.value.lines == [needle] or (needle.endswith(",") and err.value.lines[0].startswith(needle))


def test_format_specific_options_are_checked():
    cfg = merge(default(), {"dataset": {"format": "semeval_cqa", "options": {"task": "B"}}})
    cfg["dataset"]["options"] = {"task": "B"}
    with pytest.raises(ConfigError, match="^dataset.options.task: 'B' is not one of A, C$"):
        validate_config(cfg)
    cfg["dataset"]["options"] = {"task": "C"}
    validate_config(cfg)


def test_an_overlay_naming_another_dataset_replaces_the_dataset_section():
    base = default()
    wiki = {"dataset": {"name": "wikiqa", "format": "wikiqa", "files": {"train": "t.tsv"}}}
    merged = merge(base, wiki)
    assert merged["dataset"] == wiki["dataset"]  # no chitchat options leak in
    same = merge(base, {"dataset": {"options": {"negatives": 4}}})
    assert same["dataset"]["options"]["negatives"] == 4 and same["dataset"]["options"]["max_context_turns"] == 10
    validate_config(merged)


def test_an_overlay_with_experiments_replaces_the_default_grid():
    base = default()
    assert set(base["experiments"]) >= {"penha_bert_pred_root2", "macavaney_recip", "hcl"}
    mine = merge(base, {"experiments": {"mine": {"scoring": "turns", "pacing": {"name": "linear"}}}})
    assert list(mine["experiments"]) == ["mine"]
    assert merge(base, {"experiments": {}})["experiments"] == {}
    assert merge(base, {"pipeline_seed": 3})["experiments"] == base["experiments"]  # untouched without the key
    validate_config(mine)


@pytest.mark.parametrize(
    "patch, needle",
    [
        ({"experiments": {"x": {"pacign": {"name": "linear"}}}},
         r"^experiments.x.pacign: unknown key \(did you mean pacing\?\)$"),
        ({"experiments": {"x": {"weighting": {"scoring": "kde", "m": -1}}}},
         "^experiments.x.weighting.m: -1 is less than or equal to the minimum of 0$"),
        ({"train": {"loss": "listnet"}}, "^train.loss: 'listnet' is not one of pointwise_ce, "),
        ({"seeds": []}, r"^seeds: \[\] should be non-empty$"),
    ],
)
def test_bad_experiment_config_names_the_key(patch, needle):
    with pytest.raises(ConfigError, match=needle):
        validate_config(merge(default(), patch))


# presets that overlay another preset, not the default alone
OVERLAYS = {"study_curricula.yaml": ["study.yaml"], "study_rounds.yaml": ["study.yaml"],
            "study_replication.yaml": ["study.yaml", "study_rounds.yaml"],
            "study_cross_encoder.yaml": ["study.yaml"],
            "selection_noise_cross_encoder.yaml": ["wikiqa.yaml", "selection_noise.yaml"],
            "selection_noise_cross_encoder_dailydialog_pp.yaml": ["dailydialog_pp.yaml", "selection_noise.yaml",
                                                                  "selection_noise_cross_encoder.yaml"]}


@pytest.mark.parametrize("preset", sorted(p.name for p in (REPO / "configs").glob("*.yaml")))
def test_every_preset_validates_over_the_default_and_resolves_its_runs(preset):
    from curricula.experiments.specs import experiment_runs

    under = [REPO / "configs" / name for name in OVERLAYS.get(preset, [])]
    cfg = load_config(REPO / "config.yaml", *under, REPO / "configs" / preset)
    runs = experiment_runs(cfg)
    assert "baseline" in runs and all(runs.values())
    # every arm of a preset's grid shares one minimum budget, within the budget when patience counts after it
    specs = [spec for of in runs.values() for spec in of.values()]
    assert len({spec.fit.min_steps for spec in specs}) == 1
    assert all(spec.fit.min_steps <= (spec.fit.max_steps or spec.fit.steps) for spec in specs if spec.fit.patience)
    # config.yaml's teacher is a cut of the packaged MiniLM (4 layers, mean-pooled): a preset naming another teacher
    # model says how much of it to keep, instead of inheriting a depth and head meant for MiniLM
    own = read_yaml(REPO / "configs" / preset).get("teacher") or {}
    if own.get("model", "minilm") != "minilm":
        assert {"layers", "pooling"} <= own.keys(), f"{preset}: teacher.model {own['model']} inherits the MiniLM cut"


def test_the_default_grid_trains_convknrm_at_a_constant_rate_and_the_active_ranker_keeps_linear():
    from curricula.experiments.specs import active_spec, experiment_runs

    cfg = load_config(REPO / "config.yaml")
    assert cfg["train"]["schedule"] is None and cfg["train"]["min_steps"] is None  # schema defaults: the ranker's
    specs = [spec for of in experiment_runs(cfg).values() for spec in of.values()]
    assert {(spec.ranker.ranker, spec.fit.schedule, spec.fit.lr) for spec in specs} == {("convknrm", "constant", 1e-3)}
    # the training length (steps: 700, the baselines' median dev-best step) ends after macavaney_recip's m = 20
    # iterations of 32 steps (640): every arm, the baseline included, trains at least 700 steps
    assert {spec.fit.min_steps for spec in specs} == {700}
    active = active_spec(load_config(REPO / "config.yaml", REPO / "configs" / "active_wikiqa.yaml"))
    assert (active.ranker.ranker, active.fit.schedule) == ("lstm_qa", "linear")  # Wang et al. state no schedule


def test_the_cross_encoder_preset_is_the_mean_pooled_cut_in_its_own_results_folder():
    cfg = load_config(REPO / "config.yaml", REPO / "configs" / "cross_encoder.yaml")
    assert cfg["train"]["ranker"] == "cross_encoder" and cfg["train"]["pooling"] == "mean"
    assert cfg["train"]["layers"] is not None  # a cut: the reason it needs mean pooling
    assert results_dir(cfg) != results_dir(load_config(REPO / "config.yaml"))  # keeps the ConvKNRM run


@pytest.mark.parametrize("preset", ["config.yaml", "configs/cross_encoder.yaml"])
def test_every_arm_of_the_default_grid_differs_from_the_baseline_in_its_curriculum_only(preset):
    """Issue 30: the default grid's marks compare each curriculum with the baseline, so nothing else may differ
    (the baseline once drew random negatives where MacAvaney's arm drew candidates, and HCL had its own loss)."""
    from curricula.experiments.spec import spec_params
    from curricula.experiments.specs import experiment_specs
    from curricula.study.grid import flatten

    config = load_config(REPO / "config.yaml")
    if preset != "config.yaml":
        config = validate_config(merge(config, yaml.safe_load((REPO / preset).read_text())))
    specs = experiment_specs(config)
    base = flatten(spec_params(specs["baseline"]))
    curriculum = {"hcl": ("scoring", "pacing", "negatives"), "penha_bert_pred_root2": ("scoring", "pacing"),
                  "macavaney_recip": ("weighting",)}
    for run, spec in specs.items():
        flat = flatten(spec_params(spec))
        differ = {k for k in set(flat) | set(base) if flat.get(k) != base.get(k)}
        allowed = curriculum.get(run.split("@")[0], ())
        assert differ and all(k.split(".")[0] in allowed for k in differ) or run == "baseline", (run, differ)


def test_the_macavaney_bm25_preset_weights_bm25_negatives_by_the_run_in_its_own_results_folder():
    """configs/macavaney_bm25.yaml: D = the BM25 run, negatives from its top 100 in every arm, and the MacAvaney arm
    differs from the baseline in its weights alone."""
    from curricula.experiments.spec import spec_params
    from curricula.experiments.specs import experiment_specs
    from curricula.study.grid import flatten

    cfg = load_config(REPO / "config.yaml", REPO / "configs" / "macavaney_bm25.yaml")
    assert cfg["difficulty"]["bm25_list"] == "run" and cfg["bm25"]["k"] >= 100
    assert results_dir(cfg) != results_dir(load_config(REPO / "config.yaml"))
    specs = experiment_specs(cfg)
    assert set(specs) == {"baseline", "macavaney_recip@weighting.m=5", "macavaney_recip@weighting.m=20"}
    base = flatten(spec_params(specs["baseline"]))
    assert spec_params(specs["baseline"])["negatives"] == {"mode": "bm25", "m": 1, "depth": 100, "pacing": None}
    for run, spec in specs.items():
        flat = flatten(spec_params(spec))
        differ = {k.split(".")[0] for k in set(flat) | set(base) if flat.get(k) != base.get(k)}
        assert differ == (set() if run == "baseline" else {"weighting"}), (run, differ)
        assert run == "baseline" or spec.curriculum.weighting.get("scoring") == "recip"


def test_g_is_fine_tuned_whenever_a_curriculum_uses_it():
    """Su et al. 2021 §3.4: G is trained on the training data before HCL. dense.finetune.enabled null = on exactly
    when a run reads G (HCL-IC's neighbours, or hcl_corpus as ordering or weights); true/false force it."""
    from curricula.experiments.spec import parse_train_spec, spec_params
    from curricula.experiments.specs import experiment_specs, finetune_dense_model, uses_dense_model

    config = load_config(REPO / "config.yaml")
    specs = experiment_specs(config)
    assert [run for run, spec in specs.items() if uses_dense_model(spec)] == ["hcl"]
    assert config["dense"]["finetune"]["enabled"] is None and finetune_dense_model(config, specs)
    without = {run: spec for run, spec in specs.items() if run != "hcl"}
    assert not finetune_dense_model(config, without)
    ordered = {"x": parse_train_spec({**spec_params(specs["baseline"]), "scoring": "hcl_corpus"})}
    weighted = {"x": parse_train_spec({**spec_params(specs["baseline"]), "weighting": {"scoring": "hcl_corpus"}})}
    assert finetune_dense_model(config, ordered) and finetune_dense_model(config, weighted)
    forced = merge(config, {"dense": {"finetune": {"enabled": False}}})
    assert not finetune_dense_model(forced, specs)
    assert finetune_dense_model(merge(config, {"dense": {"finetune": {"enabled": True}}}), without)


def test_g_encodes_at_the_length_it_was_fine_tuned_at_unless_told():
    """dense.max_length null: a fine-tuned G encodes texts cut as in its fine-tuning (dense.finetune.max_length),
    G as shipped at 128; a number wins either way (the study and the HCL ablation pin the 128 they ran with)."""
    from curricula.retrieval.precompute import SHIPPED_DENSE_LENGTH, dense_max_length

    config = load_config(REPO / "config.yaml")
    assert config["dense"]["max_length"] is None and config["dense"]["finetune"]["max_length"] == 64
    assert dense_max_length(config, finetuned=True) == 64
    assert dense_max_length(config, finetuned=False) == SHIPPED_DENSE_LENGTH == 128
    assert dense_max_length(merge(config, {"dense": {"finetune": {"max_length": 96}}}), finetuned=True) == 96
    assert dense_max_length(merge(config, {"dense": {"max_length": 128}}), finetuned=True) == 128
    for preset in ("study.yaml", "hcl_ablation_g.yaml"):
        pinned = merge(config, yaml.safe_load((REPO / "configs" / preset).read_text()))
        assert dense_max_length(pinned, finetuned=True) == 128, preset


def test_the_pipeline_seed_cannot_be_taken_for_the_training_seeds():
    renamed = ("seed: renamed pipeline_seed (the seed of the splits, negatives, ties and the teacher's and G's "
               "fine-tuning); the rankers' training seeds are the list `seeds`")
    for value in (2, [1, 2]):  # the old key, meant as the split's seed or as the training seeds
        with pytest.raises(ConfigError) as err:
            validate_config(merge(default(), {"seed": value}))
        assert err.value.lines == [renamed]
    with pytest.raises(ConfigError) as err:
        validate_config(merge(default(), {"pipeline_seed": [1, 2]}))
    assert err.value.lines == ["pipeline_seed: expected an integer, got [1, 2]; `pipeline_seed` is one seed, the "
                               "rankers' training seeds are the list `seeds`"]


def test_each_error_names_the_file_that_set_the_key(tmp_path):
    from curricula.plumbing.config import config_layers

    mine = tmp_path / "mine.yaml"
    mine.write_text("train:\n  eval_evry: 5\n  steps: many\n")
    layers = config_layers(default(), [mine], ["seeds=x"], {"train": {"eval_evry": 5, "steps": "many"}, "seeds": "x"})
    cfg = merge(merge(default(), read_yaml(mine)), {"seeds": "x"})
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, layers)
    assert err.value.lines == ["seeds: expected a list, got 'x' (set in --config)",
                               f"train.eval_evry: unknown key (did you mean eval_every?) (set in {mine})",
                               f"train.steps: expected an integer, got 'many' (set in {mine})"]
    # a key of the default config: config.yaml; one set nowhere (a missing required key): its parent's file
    from curricula.plumbing.config_errors import key_source

    assert key_source(("train", "ranker"), layers) == "config.yaml"
    assert key_source(("nowhere", "at_all"), layers) is None


def test_a_long_value_is_quoted_short():
    with pytest.raises(ConfigError) as err:
        validate_config(merge(default(), {"pipeline_seed": "x" * 500}))
    assert len(err.value.lines[0]) < 120 and err.value.lines[0].endswith("...")

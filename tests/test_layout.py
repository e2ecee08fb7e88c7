"""The results tree's paths (curricula.plumbing.layout)."""

from pathlib import Path

import pytest

from curricula.plumbing.layout import Layout, round_file, round_records, selection_rounds, study_selection, table_files


def test_a_dataset_writes_under_results_and_its_name():
    layout = Layout("results", "chitchat")
    assert layout.root == "results/chitchat"
    assert Layout("./results/", "chitchat") == layout
    assert layout.data("queries") == "results/chitchat/data/queries.parquet"
    assert layout.data() == "results/chitchat/data/{kind}.parquet"
    assert layout.bm25()["tuned_scores"] == "results/chitchat/bm25/tuned/candidate_scores.parquet"
    assert layout.bm25()["trec"] == "results/chitchat/bm25/run.trec"
    assert layout.dense()["docs"] == layout.dense_vectors("docs") == "results/chitchat/dense/docs.parquet"
    assert layout.teacher() == {"model": "results/chitchat/teacher/model",
                                "scores": "results/chitchat/teacher/scores.parquet"}
    assert layout.difficulty_table == "results/chitchat/difficulty/difficulty.parquet"
    assert layout.difficulty_function("kde") == "results/chitchat/difficulty/functions/kde.parquet"
    assert layout.difficulty_test("kde") == "results/chitchat/difficulty/test/kde.parquet"
    assert layout.curriculum("bm25") == "results/chitchat/curricula/bm25"
    assert layout.shard("bm25", "run") == "results/chitchat/bm25/shards/run.{scatteritem}.parquet"


def test_an_experiment_folder_holds_its_training_and_test_outputs():
    layout = Layout("results", "wikiqa")
    out = "results/wikiqa/experiments/hcl/seed=3"
    assert layout.experiment("hcl", 3) == out
    assert layout.experiment() == "results/wikiqa/experiments/{experiment}/seed={seed}"
    assert layout.train("hcl", 3) == {"model": f"{out}/model", "dev_curve": f"{out}/dev_curve.parquet",
                                      "config": f"{out}/config.json"}
    assert layout.selection("hcl", 3) == f"{out}/selection.parquet"
    assert layout.evaluate("hcl", 3) == {"run": f"{out}/test.run", "metrics": f"{out}/metrics.parquet"}
    assert layout.evaluate("hcl", 3, additive=True)["additive_metrics"] == f"{out}/metrics+bm25.parquet"
    assert layout.reference("teacher", additive=True)["additivity"] == \
        "results/wikiqa/references/teacher/additivity.parquet"
    assert set(layout.reference("bm25")) == {"run", "metrics"}
    assert layout.active("dasl", 1)["curve"] == "results/wikiqa/active/dasl/seed=1/curve.parquet"


def test_report_tables_come_as_csv_markdown_and_parquet():
    assert table_files("seeds", "r/table_seeds") == {"seeds": "r/table_seeds.csv", "seeds_md": "r/table_seeds.md",
                                                     "seeds_parquet": "r/table_seeds.parquet"}
    report = Layout("results", "chitchat").report()
    assert report["seeds_md"] == "results/chitchat/report/table_seeds.md"
    assert report["power"] == "results/chitchat/report/table_power.csv"
    assert report["figures"] == "results/chitchat/report/figures"
    assert Layout("r", "d").tuning_report()["tuning"] == "r/d/report/table_tuning.csv"
    assert Layout("r", "d").active_report()["figure"] == "r/d/report/figures_active/learning_curves.png"


def test_a_study_selection_has_a_folder_of_its_own():
    keys = ["chitchat", "wikiqa", "dailydialog_pp"]
    assert study_selection(keys, None) == study_selection(keys, list(reversed(keys))) == ()
    assert study_selection(keys, ["wikiqa", "chitchat"]) == ("chitchat", "wikiqa")
    assert Layout().study_dir == "results/report/study"
    selected = Layout("results", only=("chitchat", "wikiqa"))
    assert selected.study_name == "study/only=chitchat+wikiqa"
    assert selected.study_round(2) == "results/report/study/only=chitchat+wikiqa/rounds/round=2.json"
    assert selected.study_report()["costs"] == "results/report/study/only=chitchat+wikiqa/costs.csv"
    assert selected.study_log("report_study") == "logs/study/only=chitchat+wikiqa/report_study.log"
    config = {"results": "results", "dataset": {"name": "chitchat"},
              "study": {"datasets": {"chitchat": None, "wikiqa": None}, "only": ["wikiqa"]}}
    assert Layout.of(config).study_name == "study/only=wikiqa"
    assert Layout.of({"dataset": {"name": "x"}}) == Layout("results", "x")


def test_logs_and_benchmarks_of_another_results_folder_are_apart():
    assert Layout("results", "chitchat").log("curriculum/{scoring}") == "logs/chitchat/curriculum/{scoring}.log"
    assert Layout("results", "chitchat").benchmark("ingest") == "benchmarks/chitchat/ingest.tsv"
    ablation = Layout("results/hcl_ablation", "chitchat")
    assert ablation.logs == "logs/results_hcl_ablation/chitchat"
    assert ablation.side("logs", "study") == "logs/results_hcl_ablation/study"
    assert Layout("/scratch/me/runs", "chitchat").benchmarks == "benchmarks/scratch_me_runs/chitchat"
    with pytest.raises(ValueError, match="unknown side folder 'results'"):
        ablation.side("results")


def test_globs_find_experiment_files_and_round_records(tmp_path):
    layout = Layout.at(tmp_path / "results" / "tiny")
    assert layout == Layout(str(tmp_path / "results"), "tiny")
    for experiment, seed in [("baseline", 1), ("hcl", 2), ("hcl", 10)]:
        path = Path(layout.evaluate(experiment, seed)["metrics"])
        path.parent.mkdir(parents=True)
        path.write_text("")
    assert list(layout.experiment_files()) == [("baseline", "1"), ("hcl", "10"), ("hcl", "2")]
    assert list(layout.experiment_files(experiment="hcl")) == [("hcl", "10"), ("hcl", "2")]
    assert layout.experiment_files("dev_curve.parquet") == {}
    rounds = Path(Layout(str(tmp_path)).study_rounds)
    rounds.mkdir(parents=True)
    for k in (10, 2, 1):
        (rounds / round_file(k)).write_text("{}")
    assert [p.name for p in round_records(rounds)] == ["round=1.json", "round=2.json", "round=10.json"]
    selection = Path(Layout(str(tmp_path), only=("b",)).study_round(1))
    selection.parent.mkdir(parents=True)
    selection.write_text("{}")
    assert selection_rounds(rounds.parent) == [str(selection.parent)]

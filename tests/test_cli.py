"""``python -m curricula.cli``: Snakemake's --configfile arguments (``make run ARGS=...``) reach ``outputs``."""

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from curricula.cli import config_overrides_in, configfiles_in, main
from curricula.evaluation.comparisons import experiment_files, load_metrics
from curricula.plumbing.contracts import DEV_CURVE, write_table
from curricula.report.power import pooled_components, power_table
from curricula.report.tables import converged_length
from curricula.statistics.power import design_mde

REPO = Path(__file__).resolve().parents[1]


def test_configfiles_in_reads_snakemake_style_arguments():
    assert configfiles_in([]) == []
    assert configfiles_in(["-n", "--until", "ingest"]) == []
    assert configfiles_in(["--configfile", "a.yaml"]) == ["a.yaml"]
    assert configfiles_in(["--configfile", "a.yaml", "b.yaml", "-n", "c.yaml"]) == ["a.yaml", "b.yaml"]
    assert configfiles_in(["--configfile=a.yaml", "x", "--configfiles", "b.yaml"]) == ["a.yaml", "b.yaml"]
    assert configfiles_in(["--config", "seed=1", "--cores", "2"]) == []


def test_outputs_follows_the_configfile_of_the_snakemake_arguments(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no results/ here: only the header names the dataset
    assert main(["outputs", str(REPO / "config.yaml"), "--", "-n"]) == 0
    assert "Outputs of dataset 'chitchat'" in capsys.readouterr().out
    wikiqa = str(REPO / "configs" / "wikiqa.yaml")
    assert main(["outputs", str(REPO / "config.yaml"), "--", "--cores", "2", "--configfile", wikiqa]) == 0
    out = capsys.readouterr().out
    assert "Outputs of dataset 'wikiqa'" in out and "Logs: logs/wikiqa/" in out


def test_config_overrides_are_parsed_as_snakemake_parses_them():
    assert config_overrides_in(["--configfile", "a.yaml", "-n"]) == {}
    assert config_overrides_in(["--config", "pipeline_seed=1", "study={only: [wikiqa]}", "--cores", "2"]) == {
        "pipeline_seed": 1, "study": {"only": ["wikiqa"]}}
    assert config_overrides_in(["--config=results=r", "-C", "flag=True"]) == {"results": "r", "flag": True}


def test_outputs_of_a_study_selection_reads_its_own_folder(tmp_path, monkeypatch, capsys):
    """``make run ARGS="... --config 'study={only: [wikiqa]}'"``: the selected datasets, and the selection's round
    records and findings page (not the whole study's)."""
    monkeypatch.chdir(tmp_path)
    args = ["outputs", str(REPO / "config.yaml"), "--", "--configfile", str(REPO / "configs" / "study.yaml"),
            "--config", "study={only: [wikiqa]}"]
    own = tmp_path / "results" / "report" / "study" / "only=wikiqa"
    (own / "rounds").mkdir(parents=True)
    (own / "rounds" / "round=1.json").write_text("{}")
    (own.parent / "findings.md").write_text("# the whole study's page\n")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Study over 1 datasets" in out and "  wikiqa: results/wikiqa/" in out and "chitchat" not in out
    assert f"Round records: {Path('results/report/study/only=wikiqa/rounds')}/" in out
    assert "Findings:" not in out and "the whole study's page" not in out
    (own / "findings.md").write_text("# the selection's page\n")
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"Findings: {Path('results/report/study/only=wikiqa/findings.md')}" in out
    assert "the selection's page" in out


def test_outputs_of_a_study_lists_each_dataset_and_prints_the_findings(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    study = str(REPO / "configs" / "study.yaml")
    assert main(["outputs", str(REPO / "config.yaml"), "--", "--configfile", study]) == 0
    out = capsys.readouterr().out
    assert "Study over 4 datasets" in out and "  semeval_cqa: results/semeval_cqa/" in out
    assert "Findings:" not in out  # not written yet
    page = tmp_path / "results" / "report" / "study" / "findings.md"
    page.parent.mkdir(parents=True)
    page.write_text("# Findings of the study\n")
    assert main(["outputs", str(REPO / "config.yaml"), "--", "--configfile", study]) == 0
    out = capsys.readouterr().out
    assert f"Findings: {Path('results/report/study/findings.md')}" in out and "# Findings of the study" in out


@pytest.mark.slow  # a simulation per number of seeds
def test_plan_prints_what_each_number_of_seeds_detects_on_a_finished_grid(tmp_path, capsys):
    rng = np.random.default_rng(0)
    seed_effect = {"1": 0.03, "2": -0.02, "3": 0.0}
    for name in ("baseline", "x"):
        for seed, shift in seed_effect.items():
            folder = tmp_path / "experiments" / name / f"seed={seed}"
            folder.mkdir(parents=True)
            values = rng.uniform(0.2, 0.8, 200) + (shift if name == "x" else 0.0)
            pl.DataFrame({"qid": [f"q{i}" for i in range(200)], "measure": ["AP"] * 200,
                          "value": values}).write_parquet(folder / "metrics.parquet")
    assert main(["plan", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"## {tmp_path}" in out and "1 comparisons, 3 seeds x 200 test queries" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [int(r.split("|")[1]) for r in rows] == list(range(2, 11))
    # the MDE column is design_mde of the pooled components at the grid's 200 queries; it falls with the seeds
    metrics = load_metrics(experiment_files(tmp_path))
    components = pooled_components(power_table(metrics, "AP"))
    mdes = [float(r.split("|")[3].split()[0]) for r in rows]  # then its range over sd_seed's interval
    assert mdes == [round(design_mde(components, s, 200), 4) for s in range(2, 11)]
    assert mdes == sorted(mdes, reverse=True)
    with pytest.raises(FileNotFoundError, match="no experiments/<name>/seed=<s>/metrics.parquet"):
        main(["plan", str(tmp_path / "experiments")])


def test_length_is_the_median_step_of_the_baselines_kept_models(tmp_path, capsys):
    for seed, best in (("1", 300), ("2", 1000), ("3", 1300)):
        steps = list(range(100, 1700, 100))
        curve = pl.DataFrame({"step": steps, "metric": ["AP"] * len(steps), "value": [0.5] * len(steps),
                              "train_loss": [0.6] * len(steps), "allowed": [10] * len(steps),
                              "negatives_k": [0] * len(steps),
                              "best": [s == best for s in steps], "stopped": [None] * (len(steps) - 1) + ["patience"]})
        folder = tmp_path / "experiments" / "baseline" / f"seed={seed}"
        folder.mkdir(parents=True)
        write_table(curve.select(list(DEV_CURVE.columns)).with_columns(pl.col("stopped").cast(pl.String)),
                    folder / "dev_curve.parquet", DEV_CURVE)
    assert main(["length", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "seed 1: 300, seed 2: 1000, seed 3: 1300; median 1000 (train.steps)" in out
    assert converged_length({"a": pl.DataFrame({"step": [100, 200], "best": [False, True]}),
                             "b": pl.DataFrame({"step": [100, 200], "best": [True, False]})})[0] == 150
    with pytest.raises(ValueError, match="seed a: the dev curve marks no kept"):
        converged_length({"a": pl.DataFrame({"step": [100], "best": [False]})})
    with pytest.raises(FileNotFoundError, match="no experiments/su_ic/seed=<s>/dev_curve.parquet"):
        main(["length", str(tmp_path), "--experiment", "su_ic"])


def test_logs_and_benchmarks_of_another_results_folder_are_kept_apart(tmp_path, monkeypatch, capsys):
    from curricula.plumbing.config import side_folder

    default = {"dataset": {"name": "chitchat"}, "results": "results"}
    assert side_folder(default, "logs") == "logs/chitchat"
    assert side_folder({"dataset": {"name": "chitchat"}}, "benchmarks") == "benchmarks/chitchat"
    ablation = {**default, "results": "results_hcl_ablation"}
    assert side_folder(ablation, "logs") == "logs/results_hcl_ablation/chitchat"
    absolute = {**default, "results": "/scratch/me/runs"}
    assert side_folder(absolute, "benchmarks") == "benchmarks/scratch_me_runs/chitchat"
    assert side_folder(ablation, "logs", "study") == "logs/results_hcl_ablation/study"
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "other.yaml"
    other.write_text("results: results_b\n")
    assert main(["outputs", str(REPO / "config.yaml"), str(other)]) == 0
    assert "Logs: logs/results_b/chitchat/  Benchmarks: benchmarks/results_b/chitchat/" in capsys.readouterr().out


def test_rounds_prints_each_round_in_order_and_fails_on_an_empty_folder(tmp_path, capsys):
    from curricula.statistics.sequential_verdicts import SequentialDecision

    for round_, verdict in ((2, "reproduced"), (1, "continue")):  # written out of order: read in round order
        decision = SequentialDecision(verdict, round_ - 1, 5 * round_, 0.001, 0.9, 0.005, 0.005)
        record = {"round": round_, "looks": [5, 10], "alpha": 0.045, "multiplicity": "holm", "level": 0.045,
                  "hypotheses": 2, "rejected": round_ - 1,
                  "decisions": [{"claim": "c", "dataset": "d", **decision.__dict__,
                                 "tests": [[0.03, 0.01, 0.9]] * round_}],
                  "trained": [{"dataset": "d", "arm": "a", "seeds": 5 * round_}],
                  "next": [{"dataset": "d", "arm": "a"}] if round_ == 1 else []}
        (tmp_path / f"round={round_}.json").write_text(json.dumps(record))
    assert main(["rounds", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.index("## Round 1 of 2") < out.index("## Round 2 of 2")
    assert "| c | d | reproduced | 10 | +0.0300 | 0.001 | 0.005 |" in out and "next round's seeds: a (d)." in out
    # a round 3 left by an earlier run with another dataset's cells is named on stderr, not printed as this run's
    stale = json.loads((tmp_path / "round=2.json").read_text())
    stale |= {"round": 3, "decisions": [{**stale["decisions"][0], "dataset": "other"}]}
    (tmp_path / "round=3.json").write_text(json.dumps(stale))
    assert main(["rounds", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "## Round 2 of 2" in out and "## Round 3" not in out and "| other |" not in out
    assert "round=3.json in" in err and "not shown: round 3 judges other cells than round 2" in err
    (tmp_path / "round=1.json").unlink()
    assert main(["rounds", str(tmp_path)]) == 1
    assert "round=2.json: the first record is round 2, not round 1" in capsys.readouterr().err
    assert main(["rounds", str(tmp_path / "none")]) == 1
    assert "no round records" in capsys.readouterr().err
    # a study.only selection keeps its rounds in its own folder: an empty default folder points there
    selection = tmp_path / "study" / "only=d" / "rounds"
    selection.mkdir(parents=True)
    (tmp_path / "round=2.json").rename(selection / "round=1.json")
    assert main(["rounds", str(tmp_path / "study" / "rounds")]) == 1
    assert f"the study.only selections' rounds are in {selection}" in capsys.readouterr().err


def test_pair_lengths_reports_the_share_each_max_length_keeps_whole_on_real_wikiqa(tmp_path, capsys, shared_data):
    """``pair-lengths`` on the real WikiQA sample: the untruncated pair lengths are the tokenizer's own, and the
    share kept whole at each max_length counts them."""
    from curricula.data import wikiqa
    from curricula.models.cross_encoder import full_pair_lengths, length_coverage
    from curricula.models.hf import load_tokenizer, resolve_model_dir
    from curricula.plumbing.contracts import CANDIDATES, DOCS, QUERIES
    from tests.conftest import shared_file

    files = {s: shared_file(shared_data, "wikiqa", f"WikiQA-{s}.tsv") for s in ("train", "dev")}
    data = wikiqa.load(files).validate("wikiqa")
    (tmp_path / "data").mkdir()
    for frame, spec, name in ((data.queries, QUERIES, "queries"), (data.docs, DOCS, "docs"),
                              (data.candidates, CANDIDATES, "candidates")):
        write_table(frame, tmp_path / "data" / f"{name}.parquet", spec)
    assert main(["pair-lengths", str(tmp_path), "--split", "dev", "--lengths", "32,64"]) == 0
    out = capsys.readouterr().out
    pairs = (data.candidates.join(data.queries.filter(pl.col("split") == "dev"), on="qid")
             .join(data.docs.rename({"text": "doc"}), on="docid"))
    tokenizer = load_tokenizer(resolve_model_dir("minilm"))
    lengths = full_pair_lengths(tokenizer, pairs["text"].to_list(), pairs["doc"].to_list())
    # the tokenizer's own untruncated [CLS] q [SEP] a [SEP] on a sample of pairs
    for i in range(0, pairs.height, 97):
        assert lengths[i] == len(tokenizer(pairs["text"][i], pairs["doc"][i])["input_ids"])
    shares = length_coverage(lengths, [32, 64])
    assert 0 < shares[32] < shares[64] <= 1
    assert f"{pairs.height} dev pairs" in out and f"64: {100 * shares[64]:.1f}%" in out
    with pytest.raises(ValueError, match="no pairs"):
        length_coverage(np.array([], dtype=np.int64), [64])

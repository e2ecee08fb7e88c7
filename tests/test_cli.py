"""``python -m curricula.cli``: Snakemake's --configfile arguments (``make run ARGS=...``) reach ``outputs``."""

from pathlib import Path

from curricula.cli import configfiles_in, main

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

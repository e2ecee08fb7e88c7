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

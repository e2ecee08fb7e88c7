"""analyses/study_projection.py: the expected number of the study's cells that seeds in rounds would decide, from a
dataset's measured variance components (here the default run's 4-seed chitchat AP, tests/data)."""

from __future__ import annotations

import polars as pl
import pytest

from tests.conftest import REPO, script_module

FIXTURE = REPO / "tests" / "data" / "chitchat_ap_4seeds.parquet"


def bench():
    return script_module("analyses/study_projection")


def rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()[2:]]


@pytest.mark.slow  # a projection of 300 simulated studies per cap, four times
def test_the_projection_reads_components_and_counts_decisions_that_grow_with_the_cap_and_fall_with_the_seed_sd(capsys):
    projection = bench()
    assert projection.looks_up_to(20) == (5, 10, 15, 20) and projection.looks_up_to(8) == (2, 4, 6, 8)
    components, queries, base = projection.dataset_components(str(FIXTURE))
    assert queries == 1500 and base == pytest.approx(0.4692, abs=1e-4) and components[0] == pytest.approx(
        0.0158 ** 2, rel=0.01)
    with pytest.raises(ValueError, match="at least 8 seeds"):
        projection.looks_up_to(6)
    assert projection.main(["--dataset", f"chitchat={FIXTURE}", "--caps", "8,40", "--draws", "300"]) == 0
    (_, sd, _, _, cap8, few, *_), (*_, cap40, many, _, _, _, _) = rows(capsys.readouterr().out)
    assert (sd, cap8, cap40) == ("0.0158", "8", "40")
    assert 0 <= float(few) < float(many) <= 10  # more seeds decide more of the 10 cells
    projection.main(["--dataset", f"chitchat={FIXTURE}", "--caps", "40", "--draws", "300", "--sd-seed",
                     "chitchat=0.08"])
    (_, sd, *_, noisy, _, _, _, _), = rows(capsys.readouterr().out)
    assert sd == "0.0800" and float(noisy) < float(many)  # a noisier model decides fewer
    with pytest.raises(SystemExit):
        projection.main(["--dataset", f"douban={FIXTURE}"])
    # one family over the datasets given, as the rounds judge it: Holm over 9 sequential claims' cells per dataset
    projection.main(["--dataset", f"chitchat={FIXTURE}", "--caps", "40", "--draws", "300", "--family", "holm",
                     "--thresholds", "normal"])
    (name, _, _, _, cap, adjusted, of, _, _, family), = rows(capsys.readouterr().out)
    assert (name, cap, of, family) == ("chitchat", "40", "9", "holm")
    assert float(adjusted) < float(many)  # the family's thresholds are stricter than one cell's


FINDINGS = REPO / "tests" / "data" / "study_findings_wikiqa.parquet"


def test_a_findings_table_gives_each_cell_its_measured_effect_and_margin_and_leaves_the_active_claim_out():
    projection = bench()
    cells, active = projection.findings_cells(FINDINGS, "wikiqa_ce")
    assert (len(cells), active) == (9, 0)  # the cross-encoder copy has no active-learning claim
    assert cells[0] == pytest.approx((-0.002612, 0.014094), abs=1e-6)  # Penha's row: -0.4% of 0.7047, margin 2%
    cells, active = projection.findings_cells(FINDINGS, "wikiqa")
    assert (len(cells), active) == (9, 1)  # Wang's DASL row keeps fixed seeds
    (v_seed, v_query, v_resid), queries, base = projection.findings_components(FINDINGS, "wikiqa_ce")
    assert queries == 259 and 0.65 < base < 0.72 and 0.01 < v_seed ** 0.5 < 0.04 and v_resid > v_query > 0
    with pytest.raises(ValueError, match=r"study_findings_wikiqa.parquet: no AP rows for dataset 'semeval_cqa' "
                                         r"\(it has wikiqa, wikiqa_ce\)"):
        projection.findings_cells(FINDINGS, "semeval_cqa")
    with pytest.raises(ValueError, match="chitchat_ap_4seeds.parquet: not a study findings table"):
        projection.findings_cells(FIXTURE, "chitchat")


def test_the_projection_from_findings_follows_the_rows_effects(tmp_path, capsys):
    projection = bench()
    projection.main(["--effects", str(FINDINGS), "--dataset", f"wikiqa_ce={FINDINGS}", "--dataset",
                     f"wikiqa={FINDINGS}", "--caps", "8", "--draws", "300", "--family", "holm",
                     "--thresholds", "normal"])
    (ce, _, queries, _, cap, measured, of, *_), (convknrm, *_, of_convknrm, _, _, _) = rows(capsys.readouterr().out)
    assert (ce, queries, cap, of, convknrm, of_convknrm) == ("wikiqa_ce", "259", "8", "9", "wikiqa", "9")
    # the same cells with effects of 20% of the compared arm's mean: every one is decided at 8 seeds
    table = pl.read_parquet(FINDINGS)
    large = tmp_path / "large.parquet"
    table.with_columns(effect=0.2 * pl.col("against_mean")).write_parquet(large)
    projection.main(["--effects", str(large), "--dataset", f"wikiqa_ce={FINDINGS}", "--caps", "8", "--draws", "300",
                     "--family", "holm", "--thresholds", "normal"])
    (*_, decided, of, _, _, _), = rows(capsys.readouterr().out)
    assert float(decided) > 8.9 > float(measured) and of == "9"
    with pytest.raises(SystemExit):  # a dataset the findings table does not have
        projection.main(["--effects", str(FINDINGS), "--dataset", f"dailydialog_pp_ce={FINDINGS}"])

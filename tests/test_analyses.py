"""Every analysis of analyses/ (analyses/README.md) runs at a tiny size: exit code 0 and the shape of the table it
prints. The simulations run with a few draws (their rates are then noise; only the shape and the ranges are
checked); the analyses of a finished run read ``tiny_tree`` (conftest) and are slow tests. Two analyses are run by
their own tests: analyses/selection_noise.py in tests/test_selection_noise.py and analyses/study_projection.py in
tests/test_study_projection.py."""

from __future__ import annotations

import re

import polars as pl
import pytest

from tests.conftest import run_script, script_module
from tests.test_bench import table_rows

PERCENT = r"\d+\.\d%"


@pytest.mark.slow  # runs the analysis script's simulation
def test_seed_aware_size_prints_a_row_per_number_of_seeds_for_each_rule():
    out = run_script("analyses/seed_aware_size", "--draws", 20)
    rows = table_rows(out)
    assert rows[0][0] == "seeds" and len(rows[0]) == 1 + 2 * 3
    assert [int(r[0]) for r in rows[1:]] == list(script_module("analyses/seed_aware_size").SEEDS)
    for row in rows[1:]:
        assert all(re.fullmatch(PERCENT + r" \(" + PERCENT + r"\)", c) for c in row[1::2])
        assert all(0 <= float(c) <= 1 for c in row[2::2])


@pytest.mark.slow  # runs the analysis script's simulation
def test_sequential_seeds_prints_the_boundaries_the_cost_and_the_calibration():
    out = run_script("analyses/sequential_seeds", "--draws", 20, "--queries", 20, "--calibration-sds", "0,0.05")
    sections = [line for line in out.splitlines() if line.startswith("## ")]
    assert [s.split()[1] for s in sections] == ["Nominal", "Sequential", "Type-I"]
    boundaries = [r for r in table_rows(out) if r[0] in ("O'Brien-Fleming", "Pocock") and r[1] in
                  ("difference", "equivalence")]
    assert len(boundaries) == 8 and all(0 < float(p) < 0.05 for r in boundaries for p in r[3:])
    calibration = [r for r in table_rows(out) if r[0] in ("0.0", "0.05")]
    assert len(calibration) == 2 and all(re.fullmatch(PERCENT, c) for r in calibration for c in r[1:])


@pytest.mark.slow  # runs the analysis script's simulation
def test_sequential_family_prints_every_rule_for_every_scenario():
    out = run_script("analyses/sequential_family", "--cells", 2, "--draws", 5, "--queries", 20, "--thresholds",
                     "normal")
    rows = table_rows(out)[1:]
    rules = list(script_module("analyses/sequential_family").FAMILY_RULES)
    assert len(rows) % len(rules) == 0 and [r[2] for r in rows] == rules * (len(rows) // len(rules))
    assert all(re.fullmatch(PERCENT, r[3]) and r[4].endswith(" of 2") for r in rows)


@pytest.mark.slow  # runs the analysis script's simulation
def test_variance_ratio_power_prints_a_row_per_ratio_and_a_column_per_number_of_seeds():
    rows = table_rows(run_script("analyses/variance_ratio_power", "--rho", 0.5, "--ratios", "1,0.5", "--seeds", "4,8",
                                 "--draws", 20))
    assert rows[0] == ["SD ratio (rho 0.5)", "4 seeds", "8 seeds"]
    assert [r[0] for r in rows[1:]] == ["1.0", "0.5"] and all(0 <= float(c) <= 1 for r in rows[1:] for c in r[1:])


@pytest.mark.slow
def test_g_rank_prints_the_same_ranks_before_and_after_for_one_run(tiny_tree):
    out = run_script("analyses/g_rank", "--before", tiny_tree, "--after", tiny_tree, "--dataset", "tiny")
    assert [line.split()[1] for line in out.splitlines() if line.startswith("### ")] == ["train", "dev", "test"]
    for row in table_rows(out):
        if row[0] == "outside top k":
            assert row[1] == row[2] and row[3] == "+0.0 pt"


@pytest.mark.slow
def test_interop_scores_a_teacher_folder_as_sentence_transformers_does(tiny_tree):
    out = run_script("analyses/interop_cross_encoder", "--root", tiny_tree, "--config", tiny_tree / "tiny.yaml",
                     "--pairs", 10)
    diff = float(re.search(r"sentence-transformers: max \|diff\| (\S+),", out).group(1))
    assert diff < 1e-4 and "Spearman 1.0000" in out
    assert re.search(r"the run's teacher on dev: AP \d\.\d{4}, P@1 \d\.\d{4}", out)
    assert re.search(r"the run's teacher on test: AP \d\.\d{4}, P@1 \d\.\d{4}", out)


@pytest.mark.slow
def test_teacher_precision_ab_compares_an_fp32_teacher_with_the_runs(tiny_tree):
    out = run_script("analyses/teacher_precision_ab", "--root", tiny_tree, "--config", tiny_tree / "tiny.yaml")
    for teacher in ("fp32", "auto"):
        assert re.search(rf"{teacher} teacher on test: AP \d\.\d{{4}}, P@1 \d\.\d{{4}}", out)
    assert re.search(r"Spearman of train-pair logits, fp32 vs auto: -?\d\.\d{4} \(400 pairs\)", out)
    assert re.search(r"Spearman of BERT_pred difficulty per training query .*: -?\d\.\d{4} \(40 queries\)", out)


@pytest.mark.slow
def test_teacher_agreement_correlates_another_teachers_bert_pred_with_the_runs(tiny_tree, tmp_path):
    run = tiny_tree / "results" / "tiny"
    table = run / "difficulty" / "functions" / "bert_pred.parquet"
    out = run_script("analyses/teacher_agreement", "--root", run, "--config", tiny_tree / "tiny.yaml", "--seed", 43,
                     "--out", tmp_path / "teacher43", "--compare", table)
    rho = re.findall(r"Spearman of BERT_pred with .*: (-?\d\.\d{3}) over 40 queries", out)
    assert len(rho) == 2 and rho[0] == rho[1]  # the run's own table, given twice
    assert (tmp_path / "teacher43" / "scores.parquet").exists()


@pytest.mark.slow
def test_curve_active_ranker_prints_its_dev_evaluations(tiny_tree):
    out = run_script("analyses/curve_active_ranker", "--root", tiny_tree, "--dataset", "chitchat", "--fraction", 0.5,
                     "--train", '{"steps": 4, "max_steps": 4, "patience": 0, "eval_every": 2}')
    assert out.startswith("chitchat: 20 of 40 train queries, convknrm")  # the study's active.train on chitchat
    assert re.fullmatch(r"best dev RR \d\.\d{4} in \d+ s", out.splitlines()[-1])  # the fitting log is on stderr


@pytest.mark.slow
def test_curve_convknrm_writes_one_row_per_dev_evaluation(tiny_tree, tmp_path):
    run_script("analyses/curve_convknrm", "--root", tiny_tree, "--steps", 4, "--eval-every", 2, "--dev-queries", 2,
               "--out", tmp_path / "curve.csv")
    curve = pl.read_csv(tmp_path / "curve.csv")
    assert curve.columns == ["step", "metric", "value", "train_loss", "seconds"] and curve["step"].to_list() == [2, 4]


def test_draw_difference_size_prints_a_row_per_pair_of_seed_counts_and_query_count():
    out = run_script("analyses/draw_difference_size", "--draws", 200)
    rows = re.findall(r"^\| (\d+) and (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", out, flags=re.M)
    module = script_module("analyses/draw_difference_size")
    assert [((int(a), int(b)), int(q)) for a, b, q, *_ in rows] == [
        (pair, q) for pair in module.SEED_PAIRS for q in module.QUERIES]
    assert all(0 <= float(low) <= float(high) <= 1 and float(null) <= float(high) for *_, low, high, null in rows)


@pytest.mark.slow  # a fresh interpreter loading DailyDialog++ twice
def test_replication_draws_compares_the_two_splits_of_the_same_pool(shared_data):
    from tests.conftest import shared_file

    shared_file(shared_data, "dailydialog_pp", "dev.json")
    out = run_script("analyses/replication_draws", "--only", "dailydialog_pp")
    sizes = re.findall(r"draw \((\w+), pipeline seed (\d+)\): queries \{'train': (\d+), 'dev': (\d+), 'test': (\d+)\}",
                       out)
    assert sizes == [("dailydialog_pp", "42", "565", "103", "360"),
                     ("dailydialog_pp_rep1", "1042", "565", "103", "360")]
    moved = re.search(r"splits: \{'train': (\d+), 'dev': (\d+), 'test': (\d+)\}", out)
    assert moved and sum(map(int, moved.groups())) == 360 and int(moved[3]) < 360  # a fresh carve of the same pool
    assert "arms' test AP over their first 5 seeds" in out
    # every replicated cell on both draws, at the seeds its verdict rests on, with the draw-difference test
    cells = out.split("each replicated cell at the seeds its verdict rests on")[1]
    rows = re.findall(r"^\| (\w+) +\| (\w+) \((\d+) seeds\)", cells, flags=re.M)
    assert [claim for claim, _, _ in rows] == ["macavaney_kde", "macavaney_anti", "macavaney_minf", "su_ic",
                                               "su_ic_over_cc", "composed_teacher_kde"]
    assert ("macavaney_kde", "reproduced", "15") in rows  # the committed ledger's verdict and its look

"""Selection noise (curricula.selection, bench/selection_noise.py): the evaluation each model-selection rule keeps on
hand-made dev curves, the paired differences between two arms under each rule, and the diagnostic dev curve's
contract through the select_tuned stage."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import polars as pl
import pytest

from curricula.selection import (KEPT_COLUMNS, NOISE_COLUMNS, Rule, kept_index, kept_values, last_common_step,
                                 load_curves, parse_rule, selection_noise)
from curricula.tables import DEV_CURVE, DEV_CURVE_TEST, dev_curve_spec, read_dev_curve, write_table
from curricula.tuning import select_stage
from tests.conftest import REPO

STEPS = [100, 200, 300, 400, 500, 600]
DEV = [0.1, 0.5, 0.2, 0.4, 0.45, 0.3]


def curve(dev: list[float], test: list[float] | None = None, steps: list[int] | None = None) -> pl.DataFrame:
    """A dev curve (DEV_CURVE, or DEV_CURVE_TEST with ``test``) evaluated every 100 steps, its best row marked."""
    n = len(dev)
    best = int(np.argmax(dev))
    frame = pl.DataFrame({"step": steps or [100 * (i + 1) for i in range(n)], "metric": ["AP"] * n, "value": dev,
                          "train_loss": [0.5] * n, "allowed": [8] * n, "negatives_k": [0] * n,
                          "best": [i == best for i in range(n)], "stopped": [None] * (n - 1) + ["budget"]},
                         schema=DEV_CURVE.columns)
    return frame if test is None else frame.with_columns(test_value=pl.Series(test, dtype=pl.Float64))


@pytest.mark.parametrize("rule,step", [
    ("best_dev", 200),            # the highest dev value, 0.5
    ("fixed_budget:400", 400),    # whatever dev says
    ("smoothed_best:2", 500),     # trailing means 0.3, 0.35, 0.3, 0.425, 0.375: the window ending at 500
    ("smoothed_best:3", 600),     # 0.2667, 0.3667, 0.35, 0.3833: the window ending at 600
    ("eval_every:2", 200),        # evaluations 2, 4, 6 (0.5, 0.4, 0.3)
    ("eval_every:4", 400),        # evaluation 4 and the last (0.4, 0.3)
    ("eval_every:5", 500),        # evaluation 5 and the last (0.45, 0.3)
    ("eval_every:10", 600),       # the last alone: a run always evaluates at the end of its budget
    ("smoothed_best:1", 200),     # a window of one is best_dev
])
def test_each_rule_keeps_the_evaluation_worked_out_by_hand(rule, step):
    assert STEPS[kept_index(STEPS, DEV, parse_rule(rule))] == step


def test_ties_keep_the_first_and_bad_rules_or_curves_are_clear_errors():
    assert kept_index([10, 20, 30], [0.5, 0.5, 0.1], Rule("best_dev")) == 0
    assert kept_index([10, 20, 30, 40], [0.4, 0.2, 0.4, 0.2], Rule("smoothed_best", 2)) == 1  # 0.3 thrice: the first
    assert [parse_rule(r).name for r in ("best_dev", "fixed_budget:3000", " eval_every:2 ")] == [
        "best_dev", "fixed_budget:3000", "eval_every:2"]
    for text, message in (("median", "expected one of"), ("smoothed_best", "expected a positive integer"),
                          ("best_dev:3", "takes no number"), ("eval_every:-1", "expected <kind>")):
        with pytest.raises(ValueError, match=message):
            parse_rule(text)
    with pytest.raises(ValueError, match="no evaluation at step 450"):
        kept_index(STEPS, DEV, Rule("fixed_budget", 450))
    with pytest.raises(ValueError, match="fewer than the window"):
        kept_index(STEPS, DEV, Rule("smoothed_best", 7))
    with pytest.raises(ValueError, match="at least 1"):
        kept_index([], [], Rule("best_dev"))


#: arm -> seed -> (dev, test) of two evaluations (steps 100, 200); seed 4 of the arm has no baseline to pair with
PAIRED = {"baseline": {"1": ([0.3, 0.4], [0.50, 0.60]), "2": ([0.5, 0.4], [0.55, 0.65]),
                       "3": ([0.2, 0.6], [0.40, 0.70])},
          "arm": {"1": ([0.6, 0.1], [0.70, 0.20]), "2": ([0.1, 0.9], [0.30, 0.75]), "3": ([0.3, 0.35], [0.45, 0.50]),
                  "4": ([0.9, 0.1], [0.99, 0.10])}}


def paired_curves() -> dict[str, dict[str, pl.DataFrame]]:
    return {arm: {seed: curve(dev, test) for seed, (dev, test) in of.items()} for arm, of in PAIRED.items()}


def test_paired_differences_under_each_rule_against_hand_values():
    kept = kept_values(paired_curves(), [Rule("best_dev"), Rule("fixed_budget", 100)])
    assert kept.columns == list(KEPT_COLUMNS) and kept.height == 7 * 2
    seed2 = kept.filter((pl.col("arm") == "arm") & (pl.col("seed") == "2"))
    assert seed2.select("rule", "step", "dev_value", "test_value").rows() == [("best_dev", 200, 0.9, 0.75),
                                                                               ("fixed_budget:100", 100, 0.1, 0.30)]
    table = selection_noise(kept, "baseline", "arm")
    assert table.columns == list(NOISE_COLUMNS) and table["rule"].to_list() == ["best_dev", "fixed_budget:100"]
    assert table["seeds"].to_list() == [3, 3]  # seed 4 has no pair
    # best_dev keeps baseline 0.60, 0.55, 0.70 and arm 0.70, 0.75, 0.50: differences 0.10, 0.20, -0.20
    best = table.row(0, named=True)
    assert best["mean_difference"] == pytest.approx(0.1 / 3)
    assert best["sd_difference"] == pytest.approx(np.sqrt(((0.1 - 0.1 / 3) ** 2 + (0.2 - 0.1 / 3) ** 2
                                                           + (-0.2 - 0.1 / 3) ** 2) / 2))
    assert best["test_baseline"] == pytest.approx(1.85 / 3) and best["test_arm"] == pytest.approx(1.95 / 3)
    # the fixed budget at step 100 keeps baseline 0.50, 0.55, 0.40 and arm 0.70, 0.30, 0.45: 0.20, -0.25, 0.05
    fixed = table.row(1, named=True)
    assert fixed["mean_difference"] == pytest.approx(0.0, abs=1e-12)
    assert fixed["sd_difference"] == pytest.approx(np.sqrt((0.2 ** 2 + 0.25 ** 2 + 0.05 ** 2) / 2))
    single = selection_noise(kept.filter(pl.col("seed") == "1"), "baseline", "arm")
    assert single["seeds"].to_list() == [1, 1] and single["sd_difference"].to_list() == [None, None]
    with pytest.raises(ValueError, match="share no seed"):
        selection_noise(kept, "baseline", "other")
    assert last_common_step({"a": {"1": curve(DEV)}, "b": {"1": curve([0.1, 0.2])}}) == 200


def test_a_curve_without_the_diagnostic_column_is_named():
    with pytest.raises(ValueError, match="arm seed 1: the dev curve has no test_value column"):
        kept_values({"arm": {"1": curve(DEV)}}, [Rule("best_dev")])


def write_grid(root, curves: dict[str, dict[str, pl.DataFrame]]) -> None:
    for arm, of in curves.items():
        for seed, frame in of.items():
            write_table(frame, root / "experiments" / arm / f"seed={seed}" / "dev_curve.parquet",
                        dev_curve_spec(frame.columns))


def test_both_dev_curve_contracts_read_back_and_pass_through_select_tuned(tmp_path):
    plain, diagnostic = curve(DEV), curve(DEV, [0.2, 0.3, 0.25, 0.5, 0.55, 0.35])
    assert dev_curve_spec(plain.columns) is DEV_CURVE and dev_curve_spec(diagnostic.columns) is DEV_CURVE_TEST
    for name, frame in (("plain", plain), ("diagnostic", diagnostic)):
        path = write_table(frame, tmp_path / name / "dev_curve.parquet", dev_curve_spec(frame.columns))
        assert read_dev_curve(path).equals(frame)
    with pytest.raises(FileNotFoundError, match="has its stage run"):
        read_dev_curve(tmp_path / "none.parquet")
    paths, models = {}, {}
    for run, dev in (("e@m=1", [0.2, 0.3]), ("e@m=5", [0.6, 0.1])):
        paths[run] = write_table(curve(dev, [0.4, 0.5]), tmp_path / run / "dev_curve.parquet", DEV_CURVE_TEST)
        models[run] = tmp_path / run / "model"
        models[run].mkdir()
    out = {"model": tmp_path / "e" / "model", "dev_curve": tmp_path / "e" / "dev_curve.parquet",
           "selection": tmp_path / "e" / "selection.parquet"}
    select_stage(paths, models, {"e@m=1": {"m": 1}, "e@m=5": {"m": 5}}, out)
    assert read_dev_curve(out["dev_curve"]).equals(curve([0.6, 0.1], [0.4, 0.5]))


def test_the_bench_prints_one_row_per_rule_from_a_results_folder(tmp_path, capsys):
    write_grid(tmp_path, paired_curves())
    assert load_curves(tmp_path, ["baseline"])["baseline"]["2"].equals(curve(*PAIRED["baseline"]["2"]))
    spec = importlib.util.spec_from_file_location("selection_noise", REPO / "bench" / "selection_noise.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    assert bench.main(["--root", str(tmp_path), "--arms", "baseline,arm", "--rules", "best_dev,fixed_budget:100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"## {tmp_path}: arm - baseline, test AP of the evaluation each rule keeps"
    assert lines[2] == "| rule | seeds | SD of paired differences | mean effect | test baseline | test arm |"
    assert lines[4].startswith("| best_dev | 3 | 0.2082 | 0.0333 | 0.6167 | 0.6500 |")
    assert len(lines) == 6
    # the default rules: the fixed budget is the last step every seed reached (200)
    bench.main(["--root", str(tmp_path), "--arms", "baseline,arm", "--per-seed"])
    out = capsys.readouterr().out
    assert "| fixed_budget:200 | 3 |" in out and "| eval_every:2 | 3 |" in out and "smoothed_best" not in out
    assert "| arm | 4 | best_dev | 100 | 0.9000 | 0.9900 |" in out  # --per-seed: the unpaired seed too

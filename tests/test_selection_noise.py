"""Selection noise (analyses/selection_noise_lib.py, analyses/selection_noise.py): the evaluation each
model-selection rule keeps on hand-made dev curves, the paired differences between two arms under each rule, and the
diagnostic dev curve's contract through the select_tuned stage."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from curricula.experiments.tuning import select_best_run
from curricula.plumbing.contracts import DEV_CURVE, DEV_CURVE_TEST, dev_curve_spec, read_dev_curve, write_table
from tests.conftest import script_module

# analysis code beside its script (not in the package), imported by name as analyses/selection_noise.py does
script_module("analyses/selection_noise_lib")
from selection_noise_lib import (  # noqa: E402
    KEPT_COLUMNS,
    NOISE_COLUMNS,
    Rule,
    dev_query_count,
    dev_subset_noise,
    grid_min_steps,
    kept_index,
    kept_values,
    last_common_step,
    load_curves,
    parse_rule,
    per_query_column,
    selection_noise,
    subset_dev,
)

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
    ("best_dev/2", 200),          # the stride: evaluations 2, 4, 6, as eval_every:2
    ("best_dev/4", 400),          # evaluation 4 and the last
    ("patience:1", 200),          # 300 brings no improvement on 200: stop there, keep 200
    ("patience:3", 200),          # 300, 400, 500 none above 0.5: stop at 500, keep 200
    ("patience:1/2", 200),        # on 200, 400, 600: 400 is no improvement, stop, keep 200
    ("smoothed_best:2/2", 400),   # on 200, 400, 600 (0.5, 0.4, 0.3): trailing means 0.45, 0.35, window ending at 400
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


def test_early_stopping_is_replayed_as_fit_stops_counting_only_after_min_steps():
    from curricula.training.core import FitConfig, fit

    rising = [0.1, 0.2, 0.15, 0.14, 0.13, 0.3]  # best at 200, then three without improvement, then a better one
    assert STEPS[kept_index(STEPS, rising, Rule("patience", 3))] == 200  # stopped at 500, before 600's 0.3
    # only evaluations after min_steps count: with min_steps 300, 400 and 500 are two, so the run reaches 600
    assert STEPS[kept_index(STEPS, rising, Rule("patience", 3), min_steps=300)] == 600
    assert STEPS[kept_index(STEPS, rising, Rule("patience", 2), min_steps=300)] == 200
    # fit itself, on the same dev values, stops and keeps the same evaluation
    import torch

    for patience, min_steps in ((3, 0), (3, 300), (2, 300), (1, 0)):
        net = torch.nn.Linear(2, 1)
        cfg = FitConfig(steps=600, lr=0.01, eval_every=100, patience=patience, min_steps=min_steps)
        result = fit(net, lambda step: net(torch.ones(1, 2)).sum(), cfg, seed=1, progress=False,
                     evaluate=lambda done: {"value": rising[done // 100 - 1]})
        replay = kept_index(STEPS, rising, Rule("patience", patience), min_steps=min_steps)
        assert (result.best_step, result.curve[-1]["step"]) == (STEPS[replay], result.curve[-1]["step"])
        assert len(result.curve) == (
            next(i for i in range(1, 7) if i == 6 or sum(1 for s in STEPS[:i] if s > max(STEPS[replay], min_steps))
                 >= patience))


def test_the_shadow_averages_columns_are_replayed_and_named_when_missing():
    base = curve(DEV, [0.2, 0.3, 0.25, 0.5, 0.55, 0.35])
    shadow = base.with_columns(ema_value=pl.Series([0.1, 0.2, 0.6, 0.4, 0.3, 0.2]),
                               ema_test_value=pl.Series([0.3, 0.3, 0.9, 0.1, 0.1, 0.1]))
    kept = kept_values({"a": {"1": shadow}}, [Rule("best_dev")], average="ema")
    assert kept.select("step", "dev_value", "test_value").row(0) == (300, 0.6, 0.9)
    assert kept_values({"a": {"1": shadow}}, [Rule("best_dev")]).select("step", "test_value").row(0) == (200, 0.3)
    with pytest.raises(ValueError, match="no swa_value, swa_test_value column .*diagnostic_averages: \\[swa\\]"):
        kept_values({"a": {"1": shadow}}, [Rule("best_dev")], average="swa")
    with pytest.raises(ValueError, match="average 'mean'"):
        kept_values({"a": {"1": shadow}}, [Rule("best_dev")], average="mean")
    assert [parse_rule(r).name for r in ("patience:3/2", "best_dev/1", "eval_every:2/3")] == [
        "patience:3/2", "best_dev", "eval_every:2/3"]
    with pytest.raises(ValueError, match="stride 0"):
        Rule("best_dev", stride=0)


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
    # each arm's spread and their correlation across seeds: Var(diff) = Var(a) + Var(b) - 2 rho SD(a) SD(b)
    assert best["sd_baseline"] == pytest.approx(np.std([0.60, 0.55, 0.70], ddof=1))
    assert best["rho"] == pytest.approx(np.corrcoef([0.60, 0.55, 0.70], [0.70, 0.75, 0.50])[0, 1])
    assert best["sd_difference"] ** 2 == pytest.approx(best["sd_baseline"] ** 2 + best["sd_arm"] ** 2
                                                       - 2 * best["rho"] * best["sd_baseline"] * best["sd_arm"])
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
    select_best_run(paths, models, {"e@m=1": {"m": 1}, "e@m=5": {"m": 5}}, out)
    assert read_dev_curve(out["dev_curve"]).equals(curve([0.6, 0.1], [0.4, 0.5]))


def write_configs(root, curves, min_steps) -> None:
    import json

    for arm, of in curves.items():
        for seed in of:
            path = root / "experiments" / arm / f"seed={seed}" / "config.json"
            path.write_text(json.dumps({"seed": int(seed), "spec": {"min_steps": min_steps.get((arm, seed), 100)}}))


def test_the_grid_min_steps_is_read_from_the_runs_and_must_be_one(tmp_path):
    write_grid(tmp_path, paired_curves())
    write_configs(tmp_path, paired_curves(), {})
    assert grid_min_steps(tmp_path, ["baseline", "arm"]) == 100
    write_configs(tmp_path, paired_curves(), {("arm", "2"): 200})
    with pytest.raises(ValueError, match="record min_steps \\['100', '200'\\]: expected one value"):
        grid_min_steps(tmp_path, ["baseline", "arm"])


def test_the_bench_prints_one_row_per_average_and_rule_from_a_results_folder(tmp_path, capsys):
    curves = paired_curves()
    curves["baseline"] = {seed: frame.with_columns(swa_value=pl.col("value") * 2, swa_test_value=pl.col("test_value"))
                          for seed, frame in curves["baseline"].items()}
    curves["arm"] = {seed: frame.with_columns(swa_value=pl.col("value"), swa_test_value=pl.col("test_value") / 2)
                     for seed, frame in curves["arm"].items()}
    write_grid(tmp_path, curves)
    write_configs(tmp_path, curves, {})
    assert load_curves(tmp_path, ["baseline"])["baseline"]["2"].equals(curves["baseline"]["2"])
    bench = script_module("analyses/selection_noise")
    assert bench.main(["--root", str(tmp_path), "--arms", "baseline,arm", "--rules", "best_dev,fixed_budget:100",
                       "--reference", "none:best_dev"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"## {tmp_path}: arm - baseline, test AP of the evaluation each rule keeps (min_steps 0)"
    assert lines[2] == ("| average | rule | seeds | SD of paired differences | SD / none:best_dev's | 95% CI | "
                        "p (Pitman-Morgan) | r with reference | mean effect | test baseline | test arm | SD baseline | "
                        "SD arm | rho |")
    assert lines[4].startswith("| none | best_dev | 3 | 0.2082 | 1.0000 | – | – | – | 0.0333 | 0.6167 | 0.6500 |")
    # the swa curves: the same kept evaluations (its dev values are the trained ones' times 2 or 1), arm halved
    assert lines[6].startswith("| swa | best_dev | 3 | ")
    assert "| swa | fixed_budget:100 | 3 |" in lines[7] and len(lines) == 8
    # the ratio column against the reference, with the Pitman-Morgan interval and p of the same seeds' differences
    from curricula.statistics.paired import pitman_morgan

    fixed = pitman_morgan([0.10, 0.20, -0.20], [0.20, -0.25, 0.05])
    r = np.corrcoef([0.10, 0.20, -0.20], [0.20, -0.25, 0.05])[0, 1]  # the two rules' differences across seeds
    assert lines[5].startswith(f"| none | fixed_budget:100 | 3 | 0.2291 | {fixed.ratio:.4f} | "
                               f"{fixed.low:.2f}-{fixed.high:.2f} | {fixed.p:.4f} | {r:.4f} |")
    # the default rules: patience replays need the runs' min_steps; the fixed budget is the last common step (200)
    bench.main(["--root", str(tmp_path), "--arms", "baseline,arm", "--per-seed"])
    out = capsys.readouterr().out
    assert "(min_steps 100)" in out and "SD / none:patience:3/2's" in out
    for rule in ("best_dev", "best_dev/2", "patience:3", "patience:3/2", "fixed_budget:200"):
        assert f"| none | {rule} | 3 |" in out and f"| swa | {rule} | 3 |" in out
    assert "smoothed_best" not in out
    assert "| swa | arm | 4 | best_dev | 100 | 0.9000 | 0.4950 |" in out  # --per-seed: the unpaired seed too


def with_queries(frame: pl.DataFrame, per_query: list[list[float]], column: str = "dev_query_values") -> pl.DataFrame:
    """``frame`` with per-query dev values (one list per evaluation) whose mean is its dev value column."""
    return frame.with_columns(pl.Series(column, per_query, dtype=pl.List(pl.Float64)))


def test_selection_on_a_dev_subset_is_the_curve_of_those_queries_alone():
    # three dev queries; query 0 prefers step 100, queries 1 and 2 step 200 (their mean: step 200 is best)
    per_query = [[0.9, 0.1, 0.2], [0.3, 0.6, 0.6]]
    frame = with_queries(curve([0.4, 0.5], [0.6, 0.7]), per_query)
    assert frame["dev_query_values"].list.mean().to_list() == pytest.approx(frame["value"].to_list())
    only_first = subset_dev(frame, [0])
    assert only_first["value"].to_list() == pytest.approx([0.9, 0.3]) and only_first["test_value"].equals(
        frame["test_value"])
    assert kept_values({"a": {"1": only_first}}, [Rule("best_dev")])["step"].to_list() == [100]
    assert kept_values({"a": {"1": subset_dev(frame, [1, 2])}}, [Rule("best_dev")])["step"].to_list() == [200]
    assert subset_dev(frame, [0, 1, 2])["value"].to_list() == pytest.approx(frame["value"].to_list())
    # a shadow average's own per-query column
    shadow = with_queries(frame.with_columns(ema_value=pl.lit(0.0), ema_test_value=pl.lit(0.0)),
                          [[0.0, 1.0, 0.0], [0.0, 0.0, 0.5]], "ema_dev_query_values")
    assert subset_dev(shadow, [1], "ema")["ema_value"].to_list() == [1.0, 0.0]
    assert per_query_column("swa") == "swa_dev_query_values"
    # the contract: the list column reads back, with its shadow's
    assert dev_curve_spec(frame.columns).columns["dev_query_values"] == pl.List(pl.Float64)
    assert "ema_dev_query_values" in dev_curve_spec(shadow.columns).columns


def test_dev_subset_draws_pair_the_same_queries_in_every_run_and_name_bad_curves():
    rng = np.random.default_rng(3)
    curves = {arm: {str(s): with_queries(curve([0.0] * 4, list(rng.random(4))), rng.random((4, 6)).tolist())
                    for s in (1, 2, 3)} for arm in ("baseline", "arm")}
    table = dev_subset_noise(curves, [Rule("best_dev"), Rule("fixed_budget", 400)], "baseline", "arm", size=2,
                             draws=5, seed=7)
    assert table.columns == [*NOISE_COLUMNS, "draw"] and table.height == 10
    # the same draw seed gives the same subsets; the whole dev set gives the table of the curves' own dev values
    again = dev_subset_noise(curves, [Rule("best_dev"), Rule("fixed_budget", 400)], "baseline", "arm", size=2,
                             draws=5, seed=7)
    assert table.equals(again)
    # a fixed budget ignores dev: every draw keeps the same evaluation
    assert table.filter(pl.col("rule") == "fixed_budget:400")["sd_difference"].n_unique() == 1
    whole = {a: {s: c.with_columns(value=c["dev_query_values"].list.mean()) for s, c in of.items()}
             for a, of in curves.items()}
    full = selection_noise(kept_values(whole, [Rule("best_dev")]), "baseline", "arm")
    one = dev_subset_noise(curves, [Rule("best_dev")], "baseline", "arm", size=6, draws=1)
    assert one["sd_difference"].to_list() == pytest.approx(full["sd_difference"].to_list())
    with pytest.raises(ValueError, match="a dev subset of 7 queries: expected 1 to 6"):
        dev_subset_noise(curves, [Rule("best_dev")], "baseline", "arm", size=7, draws=1)
    curves["arm"]["2"] = with_queries(curves["arm"]["2"].drop("dev_query_values"), rng.random((4, 5)).tolist())
    with pytest.raises(ValueError, match="hold \\[5, 6\\] dev query values per evaluation"):
        dev_query_count(curves)
    with pytest.raises(ValueError, match="arm seed 1: the dev curve has no dev_query_values column"):
        dev_query_count({"arm": {"1": curve(DEV, DEV)}})


def test_the_bench_summarises_the_dev_subsets_beside_the_whole_dev_set(tmp_path, capsys):
    rng = np.random.default_rng(5)
    curves = {}
    for arm, of in PAIRED.items():
        curves[arm] = {}
        for seed, (dev, test) in of.items():
            per_query = rng.random((2, 4)).tolist()
            curves[arm][seed] = with_queries(curve(list(np.mean(per_query, axis=1)), test), per_query)
    write_grid(tmp_path, curves)
    write_configs(tmp_path, curves, {})
    bench = script_module("analyses/selection_noise")
    assert bench.main(["--root", str(tmp_path), "--arms", "baseline,arm", "--rules", "best_dev,fixed_budget:200",
                       "--dev-subsets", "20:4"]) == 0
    out = capsys.readouterr().out
    assert "## the same rules selecting on 4 random dev queries (20 draws; sd_all: all 4 dev queries)" in out
    # all 4 of 4 queries: every draw is the whole dev set, so the median SD is the all-dev one and none is above it
    row = next(line for line in out.splitlines() if line.startswith("| none | best_dev |") and line.endswith("| 20 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == cells[3] and cells[6] == "1.0000" and cells[7] == "0.0000" and cells[9] == cells[10]
    with pytest.raises(SystemExit):
        bench.main(["--root", str(tmp_path), "--arms", "baseline,arm", "--dev-subsets", "20"])

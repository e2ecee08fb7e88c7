"""Significance tests and the papers' tables on synthetic per-query metrics with known answers."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from curricula.evaluation.comparisons import baseline_of, experiment_order, paired_cells
from curricula.report.power import mde_sentence, power_table
from curricula.report.tables import mark, metrics_table, seeds_table, to_markdown
from curricula.stages.report import report_tables
from curricula.statistics.multiplicity import holm
from curricula.statistics.paired import paired_ttest
from curricula.statistics.power import mde, queries_needed
from tests.crossed_draws import _crossed


def test_holm_and_marks():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])  # 3*0.01, max(2*0.03, .), 1*0.04 -> 0.06
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert [mark(p) for p in (0.009, 0.01, 0.049, 0.05)] == ["‡", "†", "†", ""]
    assert [mark(p, -0.1) for p in (0.009, 0.049, 0.05)] == ["↓↓", "↓", ""]  # a reduction is never a dagger


def long_metrics() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for seed in ("1", "2", "3"):
        base = rng.uniform(0.2, 0.6, 40)
        for name, shift in (("baseline", 0.0), ("better", 0.2), ("same", 0.0), ("worse", -0.2)):
            noise = rng.normal(0, 0.01, 40) if name != "baseline" else 0
            for q, v in enumerate(base + shift + noise):
                rows.append((name, seed, f"q{q}", "AP", float(v)))
                rows.append((name, seed, f"q{q}", "P@1", float(v > 0.5)))
    return pl.DataFrame(rows, schema=["experiment", "seed", "qid", "measure", "value"], orient="row")


def test_seeds_table_rows_values_and_marks():
    m = long_metrics()
    t = seeds_table(m, "AP")
    assert t["row"].to_list() == ["seed 1", "seed 2", "seed 3", "AVG", "SD"]
    assert t.columns[:5] == ["row", "baseline", "better", "same", "worse"]
    assert t["worse_mark"].to_list()[:4] == ["↓↓"] * 4
    seed1 = m.filter((pl.col("seed") == "1") & (pl.col("measure") == "AP"))
    assert t["better"][0] == pytest.approx(seed1.filter(pl.col("experiment") == "better")["value"].mean())
    assert t["better_mark"].to_list()[:4] == ["‡"] * 4 and t["baseline_mark"][3] == ""
    means = [t["better"][i] for i in range(3)]
    assert t["better"][3] == pytest.approx(np.mean(means)) and t["better"][4] == pytest.approx(np.std(means, ddof=1))
    md = to_markdown(t, "row")
    assert "| row | baseline | better | same | worse |" in md and "‡" in md


def test_metrics_table_with_references():
    m = long_metrics()
    refs = m.filter(pl.col("experiment") == "baseline").with_columns(experiment=pl.lit("bm25"),
                                                                        value=pl.col("value") * 0.5)
    t = metrics_table(m, ["AP", "P@1"], references=refs)
    assert t["ranker"].to_list() == ["baseline", "better", "same", "worse", "bm25"]
    assert t.filter(pl.col("ranker") == "bm25")["AP"][0] == pytest.approx(
        m.filter((pl.col("experiment") == "baseline") & (pl.col("measure") == "AP"))["value"].mean() * 0.5)
    assert t.filter(pl.col("ranker") == "better")["AP_mark"][0] == "‡"


def test_tables_are_bit_identical_whatever_the_row_order():
    """Means sum in one fixed order: the same rows in another order give the same bytes (the default run once
    differed in the last bit of a mean between two runs of the same config)."""
    m = long_metrics()
    refs = m.filter(pl.col("experiment") == "baseline").with_columns(experiment=pl.lit("bm25"))
    tables = []
    for seed in range(6):
        shuffled, shuffled_refs = m.sample(fraction=1.0, shuffle=True, seed=seed), refs.sample(
            fraction=1.0, shuffle=True, seed=seed)
        tables.append((metrics_table(shuffled, ["AP", "P@1"], references=shuffled_refs), seeds_table(shuffled, "AP")))
    for metrics, seeds in tables[1:]:
        assert metrics.equals(tables[0][0]) and seeds.equals(tables[0][1])
        assert metrics.write_csv() == tables[0][0].write_csv()  # every digit, not only equal within tolerance


def test_seeds_and_metrics_tables_use_the_configured_test():
    m = long_metrics()
    for test in ("randomization", "wilcoxon"):
        t = seeds_table(m, "AP", test=test, permutations=2000, seed=1)
        assert t["better_mark"].to_list()[:4] == ["‡"] * 4 and t["worse_mark"].to_list()[:4] == ["↓↓"] * 4
        assert metrics_table(m, ["AP"], test=test, permutations=2000, seed=1)["AP_mark"].to_list() == [
            "", "‡", "", "↓↓"]


def bm25_metrics() -> pl.DataFrame:
    """baseline, x = baseline + 0.2, baseline+bm25 = baseline + 0.3 and x+bm25 = baseline + 0.25: x+bm25 beats
    the plain baseline but is worse than baseline+bm25, the one it is compared with."""
    rng = np.random.default_rng(1)
    rows = []
    for seed in ("1", "2"):
        base = rng.uniform(0.2, 0.6, 30)
        for name, shift in (("x+bm25", 0.25), ("baseline+bm25", 0.3), ("x", 0.2), ("baseline", 0.0)):
            noise = rng.normal(0, 0.01, 30) if name != "baseline" else 0
            rows += [(name, seed, f"q{q}", "AP", float(v)) for q, v in enumerate(base + shift + noise)]
    return pl.DataFrame(rows, schema=["experiment", "seed", "qid", "measure", "value"], orient="row")


def test_bm25_rows_are_compared_with_baseline_bm25():
    assert [baseline_of(e) for e in ("x", "baseline", "x+bm25", "baseline+bm25")] == [
        "baseline", "baseline", "baseline+bm25", "baseline+bm25"]
    assert experiment_order({"z", "x+bm25", "baseline+bm25", "a", "baseline"}) == [
        "baseline", "a", "z", "baseline+bm25", "x+bm25"]
    assert experiment_order({"x+bm25"}) == ["baseline+bm25", "x+bm25"]  # missing baseline: an error later
    m = bm25_metrics()
    for test in ("ttest", "randomization"):
        seeds = seeds_table(m, "AP", test=test, permutations=2000)
        assert seeds.columns[:5] == ["row", "baseline", "x", "baseline+bm25", "x+bm25"]
        # per seed the per-query test; the AVG row's seed-aware test over 2 seeds has at least 1 df, so p < 0.01
        # needs |t| > 63.7 there: the -0.05 shift of x+bm25 is marked at p < 0.05 only
        assert seeds["x+bm25_mark"].to_list()[:3] == ["↓↓", "↓↓", "↓"]
        assert seeds["x_mark"].to_list()[:3] == ["‡"] * 3
        assert seeds["baseline+bm25_mark"].to_list() == [""] * 4
        table = metrics_table(m, ["AP"], test=test, permutations=2000)
        assert table["ranker"].to_list() == ["baseline", "x", "baseline+bm25", "x+bm25"]
        assert table["AP_mark"].to_list() == ["", "‡", "", "↓"]
    power = power_table(m, "AP")
    assert power["experiment"].to_list() == ["x", "x+bm25"]
    assert power["baseline"].to_list() == ["baseline", "baseline+bm25"]
    assert power["difference"].to_list() == pytest.approx([0.2, -0.05], abs=0.01)
    with pytest.raises(ValueError, match="different queries"):
        seeds_table(m.filter(pl.col("experiment") != "baseline+bm25"), "AP")


def test_power_table_columns_and_the_mde_sentence():
    m = long_metrics()
    power = power_table(m, "AP", test="randomization", permutations=2000, seed=3, inference="per_query")
    assert power.columns == ["experiment", "baseline", "seeds", "queries", "baseline_mean", "experiment_mean",
                             "difference", "sd", "sd_seed", "sd_query", "sd_resid", "ms_seed", "ms_query", "ms_resid",
                             "se", "df", "p_seed_aware",
                             "p_ttest", "p_randomization", "mde", "mde_pct", "queries_2pct"]
    assert "p_randomization" not in power_table(m, "AP").columns  # the t-test alone when it is the configured test
    assert power["experiment"].to_list() == ["better", "same", "worse"]
    avg = m.filter(pl.col("measure") == "AP").group_by("experiment", "qid").agg(pl.col("value").mean()).sort("qid")
    base = avg.filter(pl.col("experiment") == "baseline")["value"].to_numpy()
    better = avg.filter(pl.col("experiment") == "better")["value"].to_numpy()
    row = power.row(0, named=True)
    d = better - base
    assert row["queries"] == 40 and row["baseline_mean"] == pytest.approx(base.mean())
    assert row["difference"] == pytest.approx(d.mean()) and row["sd"] == pytest.approx(d.std(ddof=1))
    assert row["mde"] == pytest.approx(mde(d)) and row["mde_pct"] == pytest.approx(100 * mde(d) / base.mean())
    assert row["queries_2pct"] == queries_needed(d.std(ddof=1), 0.02 * base.mean())
    assert row["p_ttest"] == pytest.approx(paired_ttest(better, base)) and row["p_randomization"] < 0.01
    sentence = mde_sentence(power, "AP", inference="per_query")
    median = float(np.median(power["mde"].to_numpy()))
    assert sentence.startswith(f"With 40 test queries the seed-averaged paired comparison detects (alpha 0.05, "
                               f"power 0.8) differences of AP ≥ {median:.3f} (")
    assert f"of the baseline's {base.mean():.4f}; median over experiments); a 2% effect would need " in sentence
    assert mde_sentence(power.clear(), "AP") == ""


def test_the_tables_stage_writes_the_power_table_and_states_the_test(tmp_path):
    m = long_metrics()
    paths = {}
    for (name, seed), part in m.group_by("experiment", "seed"):
        paths[f"metrics|{name}|{seed}"] = tmp_path / f"{name}_{seed}.parquet"
        part.select("qid", "measure", "value").write_parquet(paths[f"metrics|{name}|{seed}"])
    outputs = {k: tmp_path / "report" / f"table_{k}.csv" for k in ("seeds", "metrics", "power")}
    out = report_tables(paths, outputs, measure="AP", measures=["AP", "P@1"], holm=False, dataset="toy",
                        test="randomization", permutations=1000, seed=42)
    assert pl.read_parquet(tmp_path / "report" / "table_power.parquet").equals(out["power"])
    assert (tmp_path / "report" / "table_power.csv").exists()
    metrics_md = (tmp_path / "report" / "table_metrics.md").read_text()
    assert "paired randomization test (1,000 random sign flips, seed 42)" in metrics_md
    assert "With 40 test queries" in metrics_md and "| ranker | AP | P@1 |" in metrics_md
    assert "p_randomization" in (tmp_path / "report" / "table_power.md").read_text()
    with pytest.raises(ValueError, match="unknown paired test"):
        report_tables(paths, outputs, measure="AP", measures=["AP"], holm=False, dataset="toy", test="z")


def test_randomization_tables_are_bit_identical_whatever_the_row_order():
    m = bm25_metrics()
    first = None
    for seed in range(3):
        shuffled = m.sample(fraction=1.0, shuffle=True, seed=seed)
        got = tuple(f(shuffled).write_csv() for f in (
            lambda x: seeds_table(x, "AP", test="randomization", permutations=3000, seed=7),
            lambda x: metrics_table(x, ["AP"], test="randomization", permutations=3000, seed=7),
            lambda x: power_table(x, "AP", test="randomization", permutations=3000, seed=7)))
        first = first or got
        assert got == first


# ------------------------------------------------------------------------------------------- seed-aware inference


def seed_dominated_metrics() -> pl.DataFrame:
    """baseline and x on 3 seeds x 1,000 queries: x - baseline = 0 + seed effect + query effect + noise (seed SD
    0.03, the draw of the seed-dominance test), so the per-query test marks x and the seed-aware one does not."""
    d = _crossed(np.random.default_rng(5), seeds=3, queries=1000, mu=0.0, sd_seed=0.03, sd_query=0.1, sd_resid=0.05)
    base = np.random.default_rng(8).uniform(0.3, 0.7, (3, 1000))
    rows = [(name, str(s + 1), f"q{q:04d}", "AP", float(v[s, q])) for name, v in (("baseline", base), ("x", base + d))
            for s in range(3) for q in range(1000)]
    return pl.DataFrame(rows, schema=["experiment", "seed", "qid", "measure", "value"], orient="row")


def test_tables_mark_by_the_seed_aware_test_and_keep_the_per_query_mark():
    m = seed_dominated_metrics()
    table = metrics_table(m, ["AP"])
    x = table.row(1, named=True)
    assert x["AP_mark"] == "" and x["AP_mark_per_query"] == "↓↓"
    assert f"({x['AP_mark_per_query']})" in to_markdown(table, "ranker")
    assert metrics_table(m, ["AP"], inference="per_query")["AP_mark"][1] == x["AP_mark_per_query"]
    assert "AP_mark_per_query" not in metrics_table(m, ["AP"], inference="per_query").columns
    seeds = seeds_table(m, "AP")
    assert seeds["x_mark"][3] == "" and seeds["x_mark_per_query"][3] == x["AP_mark_per_query"]
    power = power_table(m, "AP").row(0, named=True)
    assert power["p_seed_aware"] >= 0.05 > power["p_ttest"] and power["seeds"] == 3
    with pytest.raises(ValueError, match="unknown inference"):
        metrics_table(m, ["AP"], inference="bayes")


def test_unbalanced_designs_are_refused_naming_experiment_and_seed():
    m = seed_dominated_metrics()
    gap = m.filter(~((pl.col("experiment") == "x") & (pl.col("seed") == "2") & (pl.col("qid") == "q0007")))
    with pytest.raises(ValueError, match="unbalanced design: x, seed 2 has 999"):
        paired_cells(gap, "x", "AP")
    fewer = m.filter(~((pl.col("experiment") == "x") & (pl.col("seed") == "3")))
    with pytest.raises(ValueError, match=r"x and baseline ran with different seeds \(AP\): x has \['1', '2'\]"):
        metrics_table(fewer, ["AP"])
    assert metrics_table(fewer, ["AP"], inference="per_query").height == 2  # per-query averages what there is
    a, b = paired_cells(m, "x", "AP")
    assert a.shape == b.shape == (3, 1000)



"""What differs between a study's original draw of a dataset and its replication's fresh draw
(docs/records/findings.md): the two splits, and the arms' test values in the two ledgers.

    PYTHONPATH=. .venv/bin/python analyses/replication_draws.py --only dailydialog_pp \\
        [--configs configs/study.yaml configs/study_rounds.yaml] [--replication configs/study_replication.yaml]

Prints, per draw: queries per split and how many of the original draw's test queries each split of the fresh draw
holds (a fresh carve of the same pool with the same fractions shares about the test fraction of them by chance);
candidates, relevant responses and context words per test query; then, from both ledgers, each arm's mean test value
(seed-averaged per query, then over queries) and the SD of its per-seed means, over the first ``--seeds`` seeds both
ledgers hold (the rounds' first look by default), so that the draws are compared at the same number of seeds.
Last, each replicated cell on both draws at the seeds its verdict rests on: the seed-aware effect, its SE and 95% CI,
and whether the two draws' effects differ by more than their seed and query noise
(:func:`curricula.statistics.seed_aware.draw_difference_test`; its error rate is simulated in
tests/test_error_rates.py), with Holm's adjustment over the replicated cells.
Reads the dataset files and the committed ledgers only (no model, no results folder).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from curricula.data.base import RankingData
from curricula.data.ingest import load_configured
from curricula.evaluation.comparisons import seed_aware_result
from curricula.pipeline.study import study_plan_of
from curricula.statistics.multiplicity import holm
from curricula.statistics.seed_aware import SeedAwareResult, draw_difference_test
from curricula.study.ledger import Ledger
from curricula.study.ledger_runs import claim_frames, gather
from curricula.study.recompute import recompute
from curricula.study.rounds import read_round
from curricula.study.verdicts import CellVerdict, findings_cells, round_cells


def test_profile(data: RankingData) -> dict[str, float]:
    """Per test query: candidates, relevant responses (rel >= 1) and words in the context, as means."""
    test = data.queries.filter(pl.col("split") == "test")
    qids = test["qid"].to_list()
    candidates = data.candidates.filter(pl.col("qid").is_in(qids)).group_by("qid").len()["len"]
    relevant = data.qrels.filter(pl.col("qid").is_in(qids) & (pl.col("rel") >= 1)).group_by("qid").len()["len"]
    words = test["text"].str.split(" ").list.len()
    return {"candidates": float(candidates.mean() or 0), "relevant": float(relevant.mean() or 0),
            "context words": float(words.mean() or 0)}


def overlap(original: RankingData, fresh: RankingData) -> dict[str, int]:
    """How many of the original draw's test queries each split of the fresh draw holds."""
    test = set(original.queries.filter(pl.col("split") == "test")["qid"].to_list())
    return {split: int(fresh.queries.filter((pl.col("split") == split) & pl.col("qid").is_in(list(test))).height)
            for split in ("train", "dev", "test")}


def arm_means(ledger: str | Path, measure: str, seeds: int) -> pl.DataFrame:
    """(arm, seeds, mean, sd_seed) of each arm of a ledger over its first ``seeds`` seeds (sorted): the mean of the
    seed-averaged per-query values and the SD of the per-seed means."""
    per_seed: dict[str, dict[int, float]] = {}
    for entry in Ledger(ledger).entries():
        arm, seed = entry.record["arm"], int(entry.record["seed"])
        values = entry.values.filter((pl.col("experiment") == arm) & (pl.col("measure") == measure))["value"]
        if values.len():
            per_seed.setdefault(arm, {})[seed] = float(values.cast(pl.Float64).mean() or 0)
    rows = []
    for arm, by_seed in sorted(per_seed.items()):
        means = [by_seed[s] for s in sorted(by_seed)[:seeds]]
        rows.append({"arm": arm, "seeds": len(means), "mean": statistics.fmean(means),
                     "sd_seed": statistics.stdev(means) if len(means) > 1 else float("nan")})
    return pl.DataFrame(rows, schema={"arm": pl.String, "seeds": pl.Int64, "mean": pl.Float64, "sd_seed": pl.Float64})


def final_cells(plan: Any) -> dict[str, CellVerdict]:
    """{claim id: its cell} of a one-dataset study plan at the ledger's last round (the findings where the rounds
    ended), recomputed from the ledger."""
    with tempfile.TemporaryDirectory() as tmp:
        done = recompute(plan, tmp)
        cells = (findings_cells(pl.read_parquet(done.findings["parquet"]), plan.claims) if done.findings
                 else round_cells(read_round(done.rounds[-1]), plan.claims) if done.rounds else [])
    return {cell.id: cell for cell in cells}


def cell_result(plan: Any, claim: dict[str, Any], seeds: int) -> SeedAwareResult:
    """The seed-aware test of ``claim``'s two arms on the plan's one dataset over its first ``seeds`` seeds, their
    values read from the plan's ledger."""
    (dataset,) = plan.datasets
    runs = {(dataset, arm, seed): str(Path(plan.layout.study_ledger) / "in-ledger")
            for arm in (claim["experiment"], claim["against"]) for seed in plan.seeds[dataset][:seeds]}
    frame = claim_frames(gather(plan.layout.study_ledger, runs))[dataset]
    result = seed_aware_result(frame, claim["experiment"], plan.settings["measure"], claim["against"])
    assert result is not None  # seed-aware inference raises on an unbalanced design instead
    return result


def draw_comparison(plans: dict[str, Any]) -> pl.DataFrame:
    """Each cell of the replication on both draws at the seeds its verdict rests on (the last look it reached):
    verdicts, seed-aware effects with SE and CI, and the draw-difference test of the two effects (its p, and Holm's over
    the replicated cells)."""
    cells = {name: final_cells(plan) for name, plan in plans.items()}
    rows = []
    for claim in plans["fresh"].claims:
        original, fresh = cells["original"].get(claim["id"]), cells["fresh"].get(claim["id"])
        if original is None or fresh is None:
            continue
        results = {name: cell_result(plans[name], claim, cell.seeds)
                   for name, cell in (("original", original), ("fresh", fresh))}
        diff = draw_difference_test(results["original"], results["fresh"])
        row: dict[str, Any] = {"claim": claim["id"]}
        for name, cell in (("original", original), ("fresh", fresh)):
            r = results[name]
            row |= {f"{name} verdict": f"{cell.verdict} ({cell.seeds} seeds)", f"{name} effect": r.effect,
                    f"{name} SE": r.se, f"{name} 95% CI": f"{r.ci_low:+.4f} .. {r.ci_high:+.4f}"}
        rows.append(row | {"difference": diff.difference, "difference p": diff.p})
    table = pl.DataFrame(rows)
    return table.with_columns(pl.Series("Holm p", holm(table["difference p"].to_list())))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", required=True, help="the dataset key whose two draws to compare")
    parser.add_argument("--configs", nargs="+", default=["configs/study.yaml", "configs/study_rounds.yaml"])
    parser.add_argument("--replication", default="configs/study_replication.yaml")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per arm (default: the rounds' first look)")
    args = parser.parse_args(argv)
    only = {"study": {"only": [args.only]}}
    plans = {"original": study_plan_of(args.configs, only),
             "fresh": study_plan_of([*args.configs, args.replication], only)}
    data = {}
    for name, plan in plans.items():
        (config,) = [p.config for p in plan.datasets.values()]
        data[name] = load_configured(config["dataset"], int(config["pipeline_seed"]))
        print(f"{name} draw ({config['dataset']['name']}, pipeline seed {config['pipeline_seed']}): "
              f"queries {data[name].split_counts()}; per test query "
              + ", ".join(f"{k} {v:.2f}" for k, v in test_profile(data[name]).items()))
    print(f"the original draw's test queries in the fresh draw's splits: {overlap(data['original'], data['fresh'])}")
    seeds = args.seeds or (plans["original"].looks or (5,))[0]
    measure = plans["original"].settings["measure"]
    frames = [arm_means(plan.layout.study_ledger, measure, seeds).rename(
        {"seeds": f"{name} seeds", "mean": f"{name} {measure}", "sd_seed": f"{name} sd_seed"})
        for name, plan in plans.items()]
    table = frames[0].join(frames[1], on="arm", how="inner")
    with pl.Config(tbl_rows=-1, tbl_cols=-1, float_precision=4, tbl_hide_dataframe_shape=True,
                   tbl_formatting="MARKDOWN", tbl_hide_column_data_types=True, tbl_width_chars=300):
        print(f"arms' test {measure} over their first {seeds} seeds:")
        print(table)
        print(f"each replicated cell at the seeds its verdict rests on (effects in {measure}; difference p: "
              "original against fresh, seed-aware SEs, Welch df):")
        print(draw_comparison(plans))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

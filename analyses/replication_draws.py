"""What differs between a study's original draw of a dataset and its replication's fresh draw
(docs/records/findings.md): the two splits, and the arms' test values in the two ledgers.

    PYTHONPATH=. .venv/bin/python analyses/replication_draws.py --only dailydialog_pp \\
        [--configs configs/study.yaml configs/study_rounds.yaml] [--replication configs/study_replication.yaml]

Prints, per draw: queries per split and how many of the original draw's test queries each split of the fresh draw
holds (a fresh carve of the same pool with the same fractions shares about the test fraction of them by chance);
candidates, relevant responses and context words per test query; then, from both ledgers, each arm's mean test value
(seed-averaged per query, then over queries) and the SD of its per-seed means, over the first ``--seeds`` seeds both
ledgers hold (the rounds' first look by default), so that the draws are compared at the same number of seeds. Reads
the dataset files and the committed ledgers only (no model, no results folder).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from curricula.data.base import RankingData
from curricula.data.ingest import load_configured
from curricula.pipeline.study import study_plan_of
from curricula.study.ledger import Ledger


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
                   tbl_formatting="MARKDOWN", tbl_hide_column_data_types=True, tbl_width_chars=200):
        print(f"arms' test {measure} over their first {seeds} seeds:")
        print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

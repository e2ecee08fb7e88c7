"""PyTerrier's ``pt.Experiment`` on a finished run: BM25 on the test candidates against every trained ranker and the
teacher, each re-ranking BM25's candidates, then how far its AP and scores are from the evaluate stage's.

    make run ARGS="--configfile docs/examples/byod/byod.yaml"            # the byod example's results/byod
    .venv/bin/pip install -e '.[pyterrier]'                               # PyTerrier (no Java needed here)
    .venv/bin/python docs/examples/ecosystem_pyterrier.py [--root results/byod] [--export DIR]

``--export DIR`` also writes every split's topics, qrels, candidates and BM25 run as files PyTerrier reads
(curricula.ecosystem.frames.export_frames).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def systems_of(root: str) -> dict:
    """{name: PyTerrier pipeline}: BM25 on the test candidates, then BM25 >> each trained ranker and the teacher."""
    from curricula.ecosystem.frames import read_frames
    from curricula.ecosystem.pyterrier import candidates_source, from_results
    from curricula.plumbing.layout import Layout

    bm25 = candidates_source(read_frames(root).candidates)
    systems = {"BM25": bm25}
    for experiment, seed in Layout.at(root).experiment_files("model"):
        if "@" not in experiment:  # a tuned knob's runs: their experiment's folder holds the chosen one
            systems[f"{experiment} seed {seed}"] = bm25 >> from_results(root, experiment, seed)
    systems["teacher"] = bm25 >> from_results(root, "teacher")
    return systems


def stage_files(root: str, name: str) -> tuple[str, str]:
    """The evaluate stage's (metrics, scores) files of a system: a run's test metrics and TREC run, or a
    reference's (BM25's and the teacher's scores come from their tables)."""
    from curricula.plumbing.layout import Layout

    layout = Layout.at(root)
    if name == "BM25":
        return layout.reference("bm25")["metrics"], layout.bm25()["candidate_scores"]
    if name == "teacher":
        return layout.reference("teacher")["metrics"], layout.teacher()["scores"]
    experiment, seed = name.split(" seed ")
    return layout.evaluate(experiment, seed)["metrics"], layout.evaluate(experiment, seed)["run"]


def stage_scores(path: str):
    """(qid, docid, score) of a TREC run or of a scores table."""
    import polars as pl

    if path.endswith(".parquet"):
        return pl.read_parquet(path).select("qid", "docid", "score")
    return pl.read_csv(path, separator=" ", has_header=False, schema={
        "qid": pl.String, "q0": pl.String, "docid": pl.String, "rank": pl.Int64, "score": pl.Float64,
        "tag": pl.String}).select("qid", "docid", "score")


def agreement(root: str, systems: dict, per_query) -> list[tuple[str, float, float]]:
    """(system, max |AP difference| per query, max |score difference|) against the evaluate stage."""
    import numpy as np
    import polars as pl

    from curricula.ecosystem.frames import read_frames

    candidates = read_frames(root).candidates
    rows = []
    for name, system in systems.items():
        metrics, scores = stage_files(root, name)
        stage = pl.read_parquet(metrics).filter(pl.col("measure") == "AP").sort("qid")
        ours = per_query[(per_query["name"] == name) & (per_query["measure"] == "AP")].sort_values("qid")
        ap_gap = float(np.abs(ours["value"].to_numpy() - stage["value"].to_numpy()).max())
        scored = pl.from_pandas(system.transform(candidates)[["qid", "docno", "score"]]).rename({"docno": "docid"})
        joined = scored.join(stage_scores(scores), on=["qid", "docid"], suffix="_stage")
        assert joined.height == scored.height, name
        rows.append((name, ap_gap, float((joined["score"] - joined["score_stage"]).abs().max())))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="results/byod", help="a finished run's dataset folder (results/<dataset>)")
    ap.add_argument("--export", help="also write every split as PyTerrier files into this folder")
    args = ap.parse_args()

    import pyterrier as pt
    from pyterrier.measures import AP, RR, nDCG

    from curricula.ecosystem.frames import export_frames, read_frames

    frames = read_frames(args.root)
    systems = systems_of(args.root)
    table = pt.Experiment(list(systems.values()), frames.topics, frames.qrels, eval_metrics=[AP, RR @ 10, nDCG @ 10],
                          names=list(systems), baseline=0, correction="holm", round=4, plan="tree", verbose=False)
    print(f"pt.Experiment on {len(frames.topics)} test queries of {args.root} ({len(frames.candidates)} candidates;"
          " baseline BM25, paired t-tests, Holm-corrected):\n")
    print(table[["name", "AP", "RR@10", "nDCG@10", "AP +", "AP -", "AP p-value corrected"]].to_markdown(index=False))
    print("\nagainst the evaluate stage on the same candidates:\n\n| system | max abs AP difference (per query) | "
          "max abs score difference |\n|---|---|---|")
    per_query = pt.Experiment(list(systems.values()), frames.topics, frames.qrels, eval_metrics=[AP],
                              names=list(systems), perquery=True, plan="tree", verbose=False)
    for name, ap_gap, score_gap in agreement(args.root, systems, per_query):
        print(f"| {name} | {ap_gap:.3g} | {score_gap:.3g} |")
    if args.export:
        files = export_frames(args.root, args.export)
        print(f"\nwrote {len(files)} files into {args.export}: {', '.join(sorted(p.name for p in files.values()))}")


if __name__ == "__main__":
    main()

"""Scale curve of the precompute stages on the embedded chitchat data: time and peak memory per stage per size.

For each target number of responses (documents) the script picks the number of chitchat instances that yields
about that many distinct responses (calibrated with the loader itself: a train/dev/test split of 80/10/10), runs
the workflow's precompute targets in a fresh working folder with Snakemake (ingest, BM25 index, BM25 run,
BM25 candidate scores, dense encoding of queries and docs, FAISS neighbours; with ``--teacher`` also teacher
training and scoring), and reads each job's wall time and peak resident memory from its ``benchmark:`` file.
The growth exponent between two sizes is log(t2/t1) / log(n2/n1) (1 = linear in the number of responses).

    .venv/bin/python bench/bench_scale.py [--docs 5000 20000 80000] [--cores 2] [--workdir /tmp/curricula-scale]

Prints a Markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curricula.data import chitchat  # noqa: E402

FRACTIONS = {"train": 0.8, "dev": 0.1, "test": 0.1}
STAGES = [  # (label, benchmark files under benchmarks/<dataset>/, summed)
    ("ingest", ["ingest.tsv"]),
    ("bm25_index", ["bm25_index.tsv"]),
    ("bm25_run", ["bm25_run_shard/*.tsv", "bm25_run.tsv"]),
    ("bm25_candidate_scores", ["bm25_candidate_scores_shard/*.tsv", "bm25_candidate_scores.tsv"]),
    ("dense_encode_queries", ["dense_encode_shard/queries.*.tsv", "dense_encode_queries.tsv"]),
    ("dense_encode_docs", ["dense_encode_shard/docs.*.tsv", "dense_encode_docs.tsv"]),
    ("dense_neighbors", ["dense_neighbors_shard/*.tsv", "dense_neighbors.tsv"]),
    ("teacher_train", ["teacher_train.tsv"]),
    ("teacher_score", ["teacher_score_shard/*.tsv", "teacher_score.tsv"]),
]


def caps(instances: int) -> dict[str, int]:
    return {split: max(1, round(instances * f)) for split, f in FRACTIONS.items()}


def n_docs(instances: int) -> int:
    return chitchat.load(max_instances=caps(instances), max_context_turns=10).docs.height


def calibrate(target_docs: int, start: int) -> tuple[int, int]:
    """Instances giving about ``target_docs`` distinct responses (secant steps on the loader's own count)."""
    instances = start
    docs = n_docs(instances)
    for _ in range(4):
        if abs(docs - target_docs) <= 0.03 * target_docs:
            break
        instances = max(10, round(instances * target_docs / docs))
        docs = n_docs(instances)
    return instances, docs


def run_size(workdir: Path, instances: int, cores: int, teacher: bool) -> float:
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = {"dataset": {"name": "chitchat", "format": "chitchat",
                       "options": {"max_instances": caps(instances), "max_context_turns": 10}},
           "experiments": {}}
    (workdir / "scale.yaml").write_text(yaml.safe_dump(cfg))
    res = "results/chitchat"
    targets = [f"{res}/bm25/run.parquet", f"{res}/bm25/candidate_scores.parquet", f"{res}/dense/neighbors.parquet"]
    if teacher:
        targets.append(f"{res}/teacher/scores.parquet")
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", str(cores), *targets, "--configfile", str(workdir / "scale.yaml")]
    t0 = time.perf_counter()
    with open(workdir / "snakemake.log", "w") as log:  # Snakemake's own output; the jobs log under logs/
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - t0


def stage_figures(workdir: Path) -> dict[str, tuple[float, float]]:
    """{stage: (seconds summed over its jobs, peak max_rss in MB over its jobs)} from the benchmark files."""
    bench = workdir / "benchmarks" / "chitchat"
    out = {}
    for label, patterns in STAGES:
        files = [p for pattern in patterns for p in bench.glob(pattern)]
        if not files:
            continue
        rows = pl.concat([pl.read_csv(f, separator="\t").select("s", "max_rss") for f in files])
        out[label] = (float(rows["s"].sum()), float(rows["max_rss"].cast(pl.Float64, strict=False).max() or 0.0))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, nargs="+", default=[5000, 20000, 80000])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--teacher", action="store_true", help="also teacher training and scoring (slow on a CPU)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/curricula-scale"))
    args = ap.parse_args()
    sizes, figures = [], []
    start = 500
    for target in args.docs:
        instances, docs = calibrate(target, start)
        start = instances
        print(f"# {target} responses: {instances} instances give {docs} responses", flush=True)
        wall = run_size(args.workdir / f"docs{target}", instances, args.cores, args.teacher)
        sizes.append(docs)
        figures.append(stage_figures(args.workdir / f"docs{target}"))
        print(f"#   precompute wall time {wall:.0f} s", flush=True)
    head = "| stage | " + " | ".join(f"{n} responses: s / peak MB" for n in sizes) + " | growth exponent (time) |"
    print(head)
    print("|" + "---|" * (len(sizes) + 2))
    for label, _ in STAGES:
        if not all(label in f for f in figures):
            continue
        cells = [f"{f[label][0]:.1f} / {f[label][1]:.0f}" for f in figures]
        exps = [math.log(max(figures[i + 1][label][0], 1e-3) / max(figures[i][label][0], 1e-3))
                / math.log(sizes[i + 1] / sizes[i]) for i in range(len(sizes) - 1)]
        print(f"| {label} | " + " | ".join(cells) + " | " + ", ".join(f"{e:.2f}" for e in exps) + " |")


if __name__ == "__main__":
    main()

"""Scale curve of the pipeline on the embedded chitchat data: time and peak memory of every job per size.

For each target number of responses (documents) the script picks the number of chitchat instances that yields
about that many distinct responses (calibrated with the loader itself: a train/dev/test split of 80/10/10;
``all`` is the whole corpus, uncapped), writes ``configs/chitchat_full.yaml`` with those caps into a fresh working
folder and runs the workflow there with Snakemake: ingest, BM25 index, run and candidate scores, dense encoding
and neighbours (k = 1,000), every difficulty function that does not need the teacher, the curricula, and the
config's short training jobs, one per negative mode (random, candidates, bm25, neighbours); ``--teacher`` adds
teacher training and scoring. Each job's wall time and peak resident memory come from its ``benchmark:`` file.

The growth exponent between two sizes is log(y2/y1) / log(n2/n1) for y the time or the peak memory and n the
number of queries (contexts = training instances; 1 = linear, 0 = flat). Queries, not responses: from 80k
responses to the whole corpus the responses grow 1.7x but the queries 11x (the capped sizes sample conversations,
the whole corpus has every turn of each), and every query-keyed stage follows the queries.

    .venv/bin/python bench/bench_scale.py [--docs 5000 20000 80000 all] [--cores 2] [--workdir /tmp/curricula-scale]
        [--repo CHECKOUT]     # measure another checkout of the pipeline (e.g. the code before a change)
        [--forcerun RULE ..]  # in an existing working folder: re-run only these rules (and what depends on them)
        [--table-only]        # print the table of existing working folders without running anything

Prints a Markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml
from benchmark_tsv import benchmark_files, last_rows

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curricula.data import chitchat  # noqa: E402
from curricula.plumbing.layout import Layout  # noqa: E402

FRACTIONS = {"train": 0.8, "dev": 0.1, "test": 0.1}
BASE_CONFIG = REPO / "configs" / "chitchat_full.yaml"
#: (label, benchmark files under benchmarks/<dataset>/, summed over a stage's jobs; the peak is the largest job's)
PRECOMPUTE = [
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


def caps(instances: int | None) -> dict[str, int | None]:
    if instances is None:
        return {split: None for split in FRACTIONS}
    return {split: max(1, round(instances * f)) for split, f in FRACTIONS.items()}


def n_docs(instances: int | None) -> int:
    return size_of(instances)[0]


def size_of(instances: int | None) -> tuple[int, int]:
    """(responses, queries) the loader gives for an instance cap (None = the whole corpus)."""
    data = chitchat.load(max_instances=caps(instances), max_context_turns=10)
    return data.docs.height, data.queries.height


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


def size_config(instances: int | None) -> dict:
    """configs/chitchat_full.yaml with the size's caps, results under ``results/`` of the working folder."""
    cfg = yaml.safe_load(BASE_CONFIG.read_text())
    cfg["results"] = "results"
    cfg["dataset"]["options"]["max_instances"] = caps(instances)
    return cfg


def targets(cfg: dict, teacher: bool) -> list[str]:
    res = Layout.of(cfg)
    out = [res.bm25()["run"], res.bm25()["candidate_scores"], res.dense()["neighbors"], res.difficulty_table]
    out += [res.train(name, seed)["dev_curve"]
            for name in ["baseline", *cfg["experiments"]] for seed in cfg["seeds"]]
    if teacher:
        out.append(res.teacher()["scores"])
    return out


def run_size(workdir: Path, instances: int | None, cores: int, teacher: bool, repo: Path,
             forcerun: list[str]) -> float:
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = size_config(instances)
    (workdir / "scale.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(repo / "Snakefile"), "--directory", str(workdir),
           "--cores", str(cores), *targets(cfg, teacher), "--configfile", str(workdir / "scale.yaml")]
    if forcerun:  # only what changed: the other jobs' outputs (and benchmark files) stay
        cmd += ["--rerun-triggers", "mtime", "--forcerun", *forcerun]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    t0 = time.perf_counter()
    with open(workdir / "snakemake.log", "a") as log:  # Snakemake's own output; the jobs log under logs/
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, env=env)
    return time.perf_counter() - t0


def stages(bench: Path) -> list[tuple[str, list[str]]]:
    """The table's rows: the precompute stages, each difficulty function, the join, the curricula, each training."""
    rows = list(PRECOMPUTE)
    rows += [(f"difficulty_function: {p.stem}", [f"difficulty_function/{p.name}"])
             for p in sorted((bench / "difficulty_function").glob("*.tsv"))]
    rows += [("difficulty (join)", ["difficulty.tsv"]), ("curriculum (each)", ["curriculum/*.tsv"])]
    rows += [(f"train: {p.name}", [f"train/{p.name}/*.tsv"]) for p in sorted((bench / "train").glob("*"))]
    return rows


def stage_figures(workdir: Path) -> dict[str, tuple[float, float]]:
    """{stage: (seconds summed over its jobs, peak max_rss in MB over its jobs)} from the benchmark files."""
    bench = workdir / Layout(dataset="chitchat").benchmarks
    out = {}
    for label, patterns in stages(bench):
        files = benchmark_files(bench, patterns)
        if not files:
            continue
        rows = last_rows(files)
        seconds = float(rows["s"].sum()) if not label.startswith("curriculum") else float(rows["s"].max())
        out[label] = (seconds, float(rows["max_rss"].max() or 0.0))
    return out


def exponent(y1: float, y2: float, n1: int, n2: int) -> float:
    """Growth exponent log(y2/y1) / log(n2/n1)."""
    return math.log(max(y2, 1e-3) / max(y1, 1e-3)) / math.log(n2 / n1)


def table(sizes: list[int], figures: list[dict[str, tuple[float, float]]], queries: list[int]) -> str:
    labels = []
    for f in figures:
        labels += [label for label in f if label not in labels]
    head = ("| job | " + " | ".join(f"{n:,} responses, {q:,} queries: s / peak MB" for n, q in zip(sizes, queries))
            + " | exponent (per query), time | exponent (per query), peak |")
    lines = [head, "|" + "---|" * (len(sizes) + 3)]
    for label in labels:
        if not all(label in f for f in figures):
            continue
        cells = [f"{f[label][0]:.1f} / {f[label][1]:,.0f}" for f in figures]
        pairs = range(len(sizes) - 1)
        t = ", ".join(f"{exponent(figures[i][label][0], figures[i + 1][label][0], queries[i], queries[i + 1]):.2f}"
                      for i in pairs)
        m = ", ".join(f"{exponent(figures[i][label][1], figures[i + 1][label][1], queries[i], queries[i + 1]):.2f}"
                      for i in pairs)
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {t} | {m} |")
    return "\n".join(lines)


DATA_SIDE = """
import gc, json, sys, psutil
import polars as pl
from curricula.data.ingest import ingest_paths, read_ingest
from curricula.curriculum.negatives import NegativeSampler, resolve_negatives
from curricula.experiments.train import TRAIN_COLUMNS, dev_pairs
proc = psutil.Process()
base = proc.memory_info().rss
data = read_ingest(ingest_paths(sys.argv[1]), columns=TRAIN_COLUMNS)
negs = NegativeSampler(resolve_negatives({"mode": "candidates", "m": 1}, 1), queries=data["queries"], docs=data["docs"],
                       qrels=data["qrels"], candidates=data["candidates"])
train = data["queries"].filter(pl.col("split") == "train")
context_of = dict(zip(train["qid"].to_list(), train["text"].to_list()))
doc_texts = data["docs"]["text"].to_list()
dev = dev_pairs(data, 500, 42, 1)
gc.collect()
print(json.dumps((proc.memory_info().rss - base) / 2**20))
"""


def data_side_mb(workdir: Path, repo: Path) -> float:
    """RSS (MB) a training job's data side takes in a fresh process: the ingest tables it reads, the id maps and
    sampler lists, the training contexts and the dev pairs (what grows with the collection by design)."""
    data = next(workdir.glob("results*/chitchat/data"))
    out = subprocess.run([sys.executable, "-c", DATA_SIDE, str(data)], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", nargs="+", default=["5000", "20000", "80000", "all"],
                    help="target numbers of responses; 'all' = the whole corpus, uncapped")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--teacher", action="store_true", help="also teacher training and scoring (slow on a CPU)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/curricula-scale"))
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose Snakefile and code run")
    ap.add_argument("--forcerun", nargs="*", default=[], help="re-run only these rules in existing folders")
    ap.add_argument("--table-only", action="store_true", help="print the table of existing folders; run nothing")
    ap.add_argument("--data-side", action="store_true",
                    help="also measure each size's training data side (tables, id maps) and the peak without it")
    args = ap.parse_args()
    sizes, figures, queries = [], [], []
    start = 500
    for target in args.docs:
        folder = args.workdir / f"docs{target}"
        if target == "all":
            instances = None
        else:
            instances, _ = calibrate(int(target), start)
            start = instances
        docs, n_queries = size_of(instances)
        queries.append(n_queries)
        print(f"# {target} responses: {instances or 'all'} instances give {docs} responses", flush=True)
        if not args.table_only:
            wall = run_size(folder, instances, args.cores, args.teacher, args.repo.resolve(), args.forcerun)
            print(f"#   wall time {wall:.0f} s ({folder})", flush=True)
        sizes.append(docs)
        figures.append(stage_figures(folder))
    print(table(sizes, figures, queries))
    if args.data_side:  # the training job's peak with and without its data side
        side = [data_side_mb(args.workdir / f"docs{t}", args.repo.resolve()) for t in args.docs]
        print("\n| training job | " + " | ".join(f"{n:,} responses" for n in sizes)
              + " | exponent (per query), first to last |")
        print("|" + "---|" * (len(sizes) + 2))
        print("| data side: ingest tables, id maps, lists, contexts, dev pairs (MB) | "
              + " | ".join(f"{x:,.0f}" for x in side)
              + f" | {exponent(side[0], side[-1], queries[0], queries[-1]):.2f} |")
        for label in [label for label in figures[-1] if label.startswith("train: ")]:
            rest = [f[label][1] - x for f, x in zip(figures, side)]
            print(f"| {label} peak minus data side (MB) | " + " | ".join(f"{x:,.0f}" for x in rest)
                  + f" | {exponent(rest[0], rest[-1], queries[0], queries[-1]):.2f} |")


if __name__ == "__main__":
    main()

"""A paper-scale plan from measured numbers: what each stage of configs/msmarco_passage.yaml would cost on a cluster.

Reads a finished run of the whole chitchat corpus (``bench/bench_scale.py --docs all`` or ``make run ARGS=
"--configfile configs/chitchat_full.yaml"``): each job's CPU seconds, peak memory and output size from its
benchmark file and outputs, and the counts that drive each stage from its ingest tables (queries, docs, pairs,
word-pieces). It divides to get a **measured per-item cost on this machine** (CPU core-seconds per doc word, per
query, per pair, per word-piece, per query x doc product) and multiplies by MS MARCO passage's counts.

The transformer stages also get **GPU-hours from published throughput**: their FLOPs (2 x parameters per token
forward, 6 x for forward + backward) over an NVIDIA A100's published dense peak (312 TFLOPS bf16; 19.5 TFLOPS
fp32 for FAISS's exact search) at an assumed 30% utilisation (50% for FAISS's GEMM). Which number is which is
printed beside each. Peak memory is extrapolated from the growth exponent between the two measured sizes (``--smaller``;
else taken as flat), for one job: a sharded stage's job sees its share of the items (``SHARDS``, the config's
counts); disk is the measured bytes per row times the rows.

    .venv/bin/python bench/plan_cluster.py --run /tmp/curricula-scale/docsall [--smaller /tmp/curricula-scale/docs80000]
    .venv/bin/python bench/plan_cluster.py --run /tmp/curricula-scale/docsall --resources   # profile requests

``--resources`` prints, per rule, the SLURM requests profiles/slurm/config.yaml takes from the same run: mem_mb =
the rule's largest measured peak x 1.5, rounded up to 500 MB (at least 1,000), runtime = 3 x its longest job in
minutes (at least 10).

Prints a Markdown table; asserts nothing. Every MS MARCO count is a constant below with its source.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import polars as pl
from benchmark_tsv import benchmark_files, last_rows

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curricula.plumbing.layout import Layout  # noqa: E402

#: the measured run's dataset: the whole chitchat corpus
CHITCHAT = Layout(dataset="chitchat")

# ------------------------------------------------------------------ MS MARCO passage / TREC DL 2019 (published)
MSMARCO = {
    "docs": 8_841_823,          # collection.tsv passages (Nguyen et al. 2016; MacAvaney et al. 2020 Table 2: 8.8M)
    "train_queries": 502_939,   # training queries with a judged passage (MacAvaney Table 2: 504k, 1.1 judgments)
    "dev_queries": 200,         # MacAvaney's held-out validation queries
    "test_queries": 43,         # TREC DL 2019 judged queries
    "train_depth": 100,         # configs/msmarco_passage.yaml: BM25 top 100 per training query
    "eval_depth": 1000,         # re-ranking depth at validation and test (MacAvaney: the official top 1000)
    "query_words": 6,           # MS MARCO queries are short web queries (assumed ~6 words)
    "doc_words": 56,            # passages (assumed ~56 words)
    "wordpieces_per_word": 1.3,  # assumed for English BERT vocabularies
}
BERT_BASE = 110e6                # bert-base parameters (Devlin et al. 2019)
MINILM = 22.7e6                  # all-MiniLM-L6-v2 parameters (the dense encoder, max_length 128)
A100_BF16, A100_FP32 = 312e12, 19.5e12   # NVIDIA A100 datasheet, dense
UTIL_TRANSFORMER, UTIL_GEMM = 0.30, 0.50  # assumed utilisation
RUN_SHAPE = {"experiments": 3 * 6 * 5 + 5,  # 3 curricula x 6 values of m x 5 seeds + 5 baselines
             "max_steps": 6400, "batch": 16, "m": 1, "eval_every": 32, "evaluations": 130,  # up to 130 (MacAvaney)
             "max_length": 512, "teacher_steps": 6400}


def bench(run: Path, patterns: list[str]) -> dict[str, float]:
    files = benchmark_files(run / CHITCHAT.benchmarks, patterns)
    if not files:
        return {}
    rows = last_rows(files)
    # Snakemake writes NA (null here) for what a very short job did not measure; a stage of such jobs counts 0 MB
    return {"s": float(rows["s"].sum()), "cpu": float(rows["cpu_time"].sum()),
            "rss": float(rows["max_rss"].max() or 0.0)}


def counts(run: Path) -> dict[str, float]:
    """What drives each stage in the measured run: queries, docs, pairs, words and word-pieces."""
    from curricula.models.hf import load_tokenizer

    data = run / "results" / "chitchat" / "data"
    if not data.exists():
        data = next(run.glob("results*/chitchat/data"))
    q = pl.read_parquet(data / "queries.parquet", columns=["qid", "split", "text"])
    d = pl.read_parquet(data / "docs.parquet")
    cand = pl.read_parquet(data / "candidates.parquet")
    tok = load_tokenizer("minilm")

    def pieces(texts: list[str]) -> float:
        return float(sum(len(ids) for ids in tok(texts, truncation=True, max_length=128)["input_ids"]))

    train = q.filter(pl.col("split") == "train")
    pools = cand.join(q.select("qid", "split"), on="qid").group_by("split").agg(pl.col("docid").n_unique())
    pool = dict(zip(pools["split"].to_list(), pools["docid"].to_list()))
    sizes = q.group_by("split").len()
    nq = dict(zip(sizes["split"].to_list(), sizes["len"].to_list()))
    return {
        "queries": q.height, "docs": d.height, "pairs": cand.height,
        "train_pairs": cand.join(train.select("qid"), on="qid").height, "train_queries": train.height,
        "query_words": float(q["text"].str.split(" ").list.len().sum()),
        "doc_words": float(d["text"].str.split(" ").list.len().sum()),
        "query_pieces": pieces(q["text"].to_list()), "doc_pieces": pieces(d["text"].to_list()),
        "products": float(sum(nq[s] * pool.get(s, 0) for s in nq)),
    }


def msmarco_counts() -> dict[str, float]:
    m = MSMARCO
    queries = m["train_queries"] + m["dev_queries"] + m["test_queries"]
    train_pairs = m["train_queries"] * m["train_depth"]
    pairs = train_pairs + (m["dev_queries"] + m["test_queries"]) * m["eval_depth"]
    wp = m["wordpieces_per_word"]
    # within-split pools: a training query searches the training pool (its BM25 lists' passages, at most all)
    train_pool = min(m["docs"], train_pairs)
    products = m["train_queries"] * train_pool + (m["dev_queries"] + m["test_queries"]) * m["eval_depth"] * 2
    return {
        "queries": queries, "docs": m["docs"], "pairs": pairs, "train_pairs": train_pairs,
        "train_queries": m["train_queries"],
        "query_words": queries * m["query_words"], "doc_words": m["docs"] * m["doc_words"],
        "query_pieces": queries * (m["query_words"] * wp + 2),
        "doc_pieces": m["docs"] * min(128, m["doc_words"] * wp + 2),
        "products": float(products),
    }


#: shards per sharded stage in configs/msmarco_passage.yaml: a shard job's memory follows its share of the items
SHARDS = {"bm25_run": 64, "bm25_candidate_scores": 64, "dense_encode": 32, "dense_neighbors": 32}


#: (stage, benchmark files, the count its cost scales with, the rows it writes (a count key or None), GPU FLOPs)
def stages(ms: dict[str, float]) -> list[tuple]:
    r = RUN_SHAPE
    pair_tokens = r["max_length"]  # a cross-encoder pair is padded/truncated to max_length at paper scale
    eval_pairs = (MSMARCO["dev_queries"]) * MSMARCO["eval_depth"]
    step_flops = r["experiments"] * r["max_steps"] * r["batch"] * (1 + r["m"]) * pair_tokens * 6 * BERT_BASE
    eval_flops = r["experiments"] * r["evaluations"] * eval_pairs * pair_tokens * 2 * BERT_BASE
    return [
        ("ingest", ["ingest.tsv"], "pairs", None, None),
        ("bm25_index", ["bm25_index.tsv"], "doc_words", None, None),
        ("bm25_run (k=100)", ["bm25_run_shard/*.tsv", "bm25_run.tsv"], "query_words*docs", "queries*100", None),
        ("bm25_candidate_scores", ["bm25_candidate_scores_shard/*.tsv", "bm25_candidate_scores.tsv"], "pairs",
         "pairs", None),
        ("dense_encode_queries", ["dense_encode_shard/queries.*.tsv", "dense_encode_queries.tsv"], "query_pieces",
         "queries", (2 * MINILM * ms["query_pieces"], A100_BF16 * UTIL_TRANSFORMER)),
        ("dense_encode_docs", ["dense_encode_shard/docs.*.tsv", "dense_encode_docs.tsv"], "doc_pieces", "docs",
         (2 * MINILM * ms["doc_pieces"], A100_BF16 * UTIL_TRANSFORMER)),
        ("dense_neighbors (k=1000)", ["dense_neighbors_shard/*.tsv", "dense_neighbors.tsv"], "products",
         "queries*1000", (2 * 384 * ms["products"], A100_FP32 * UTIL_GEMM)),
        ("difficulty_function (each)", ["difficulty_function/recip.tsv"], "train_pairs", "train_pairs", None),
        ("curriculum (each)", ["curriculum/*.tsv"], "train_pairs", "train_queries", None),
        ("teacher_train", [], None, None, (r["teacher_steps"] * r["batch"] * 2 * pair_tokens * 6 * BERT_BASE,
                                           A100_BF16 * UTIL_TRANSFORMER)),
        ("teacher_score", [], None, "train_pairs", (ms["train_pairs"] * pair_tokens * 2 * BERT_BASE,
                                                    A100_BF16 * UTIL_TRANSFORMER)),
        (f"train: {r['experiments']} jobs x {r['max_steps']} steps (bert-base, 512 tokens)", [], None, None,
         (step_flops, A100_BF16 * UTIL_TRANSFORMER)),
        (f"train: their dev evaluations ({r['evaluations']} x 200 queries x 1,000 candidates each)", [], None, None,
         (eval_flops, A100_BF16 * UTIL_TRANSFORMER)),
        ("evaluate: test re-ranking (43 queries x 1,000, 20 selected models + references)", [], None, None,
         (22 * MSMARCO["test_queries"] * MSMARCO["eval_depth"] * pair_tokens * 2 * BERT_BASE,
          A100_BF16 * UTIL_TRANSFORMER)),
    ]


def scaled(expr: str | None, c: dict[str, float]) -> float | None:
    if expr is None:
        return None
    value = 1.0
    for term in expr.split("*"):
        value *= float(term) if term.replace(".", "").isdigit() else c[term]
    return value


def output_bytes_per_row(run: Path, stage: str) -> float | None:
    res = Layout.at(next(run.glob(f"results*/{CHITCHAT.dataset}")))
    files = {"bm25_run": res.bm25()["run"], "bm25_candidate_scores": res.bm25()["candidate_scores"],
             "dense_neighbors": res.dense()["neighbors"], "dense_encode_queries": res.dense_vectors("queries"),
             "dense_encode_docs": res.dense_vectors("docs"), "difficulty_function": res.difficulty_function("recip")}
    for key, path in ((key, Path(path)) for key, path in files.items()):
        if stage.startswith(key) and path.exists():
            import pyarrow.parquet as pq

            return path.stat().st_size / max(1, pq.ParquetFile(path).metadata.num_rows)
    return None


def resources(run: Path) -> None:
    """Per rule: mem_mb = 1.5 x the largest measured peak (500 MB steps, >= 1,000); runtime = 3 x the longest job."""
    root = run / CHITCHAT.benchmarks
    peaks: dict[str, tuple[float, float]] = {}
    files = sorted(root.rglob("*.tsv"))
    for f, row in zip(files, last_rows(files).iter_rows(named=True)):
        rel = f.relative_to(root)
        rule = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if len(rel.parts) == 1 and rule.startswith("dense_encode_"):  # dense_encode_{kind}.tsv: rule dense_encode
            rule = "dense_encode"
        rss = float(row["max_rss"] or 0.0)
        old = peaks.get(rule, (0.0, 0.0))
        peaks[rule] = (max(old[0], rss), max(old[1], float(row["s"])))
    for rule, (rss, secs) in sorted(peaks.items()):
        mem = max(1000, math.ceil(1.5 * rss / 500) * 500)
        minutes = max(10, math.ceil(3 * secs / 60))
        print(f"  {rule}: {{mem_mb: {mem}, runtime: {minutes}}}   # measured peak {rss:,.0f} MB, "
              f"longest job {secs:,.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True, help="working folder of a whole-corpus chitchat run")
    ap.add_argument("--smaller", type=Path, help="a smaller run's folder, for the memory growth exponent")
    ap.add_argument("--resources", action="store_true", help="print the SLURM requests the measured peaks give")
    args = ap.parse_args()
    if args.resources:
        resources(args.run)
        return
    here, ms = counts(args.run), msmarco_counts()
    small = counts(args.smaller) if args.smaller else None
    print(f"# measured run: {here['queries']:,} queries, {here['docs']:,} docs, {here['pairs']:,} candidate pairs; "
          f"MS MARCO plan: {ms['queries']:,.0f} queries, {ms['docs']:,} passages, {ms['pairs']:,.0f} pairs")
    print("| stage | CPU core-hours (measured per item x items) | GPU-hours on one A100 (published peak, "
          "assumed utilisation) | peak memory GB (measured, extrapolated) | disk GB (measured bytes/row x rows) |")
    print("|---|---|---|---|---|")
    for stage, patterns, driver, rows, gpu in stages(ms):
        b = bench(args.run, patterns) if patterns else {}
        cpu = gpu_h = mem = disk = "n/a"
        if b and driver:
            per_item = b["cpu"] / scaled(driver, here)
            cpu = f"{per_item * scaled(driver, ms) / 3600:,.1f} ({per_item:.3g} s per {driver})"
            peak = b["rss"] / 1024
            shards = next((n for key, n in SHARDS.items() if stage.startswith(key)), 1)
            if small is not None and (bs := bench(args.smaller, patterns)):
                grow = (math.log(max(b["rss"], 1) / max(bs["rss"], 1))
                        / math.log(scaled(driver, here) / scaled(driver, small)))
                grow = max(0.0, grow)
                ratio = scaled(driver, ms) / shards / scaled(driver, here)
                mem = (f"{peak * ratio ** grow:,.1f} per job (exp {grow:.2f}; here {peak:.1f}"
                       + (f"; {shards} shards" if shards > 1 else "") + ")")
            else:
                mem = f"{peak:.1f} (here)"
        if gpu is not None:
            flops, rate = gpu
            gpu_h = f"{flops / rate / 3600:,.1f} ({flops:.2g} FLOP)"
        bpr = output_bytes_per_row(args.run, stage)
        if bpr is not None and rows:
            disk = f"{bpr * scaled(rows, ms) / 1e9:,.1f} ({bpr:.1f} B/row)"
        print(f"| {stage} | {cpu} | {gpu_h} | {mem} | {disk} |")


if __name__ == "__main__":
    main()

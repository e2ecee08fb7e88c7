"""MC-dropout passes (Wang et al. 2020 eq. 7): ``curricula.models.base.mc_dropout_probabilities`` against a bare torch
loop doing ``passes`` full forward passes of the same module over the same length-sorted batches, in one run.

Without embedding dropout (``architecture.embedding_dropout: 0``, as configs/study.yaml sets for DASL) the ranker
encodes each batch once and runs only its dropout head per pass; with embedding dropout every pass is a whole forward
pass, like the bare loop. Pairs: the first ``--pairs`` (context, response) pairs of the embedded chitchat data
(the default config's ingest, read from ``--root``).

    .venv/bin/python bench/bench_mc_dropout.py --root /tmp/study --pairs 3000 --passes 10

Measured so (2 cores, one thread, untrained rankers with dropout 0.5; seconds for 3,000 pairs x 10 passes):

| ranker | embedding dropout | mc_dropout_probabilities | bare loop | ratio |
|---|---|---|---|---|
| lstm_qa | 0.0 | 1.7 | 13.2 | 7.86x |
| lstm_qa | 0.5 | 30.7 | 32.2 | 1.05x |
| convknrm | 0.0 | 2.5 | 28.0 | 11.31x |
| convknrm | 0.5 | 42.6 | 42.6 | 1.00x |
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="working directory of a run with results/chitchat/data")
    ap.add_argument("--pairs", type=int, default=3000)
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--rankers", default="lstm_qa,convknrm")
    ap.add_argument("--embedding-dropout", default="0.0,0.5", help="comma-separated values to measure")
    ap.add_argument("--no-bare", action="store_true", help="time only mc_dropout_probabilities (e.g. at 100 passes)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    import numpy as np
    import torch

    from curricula.data.ingest import INGEST_TABLES, candidate_pairs, read_ingest
    from curricula.experiments.spec import parse_train_spec
    from curricula.experiments.specs import resolve_ranker
    from curricula.models import build_ranker
    from curricula.models.base import mc_dropout_probabilities
    from curricula.models.runtime import set_threads
    from curricula.plumbing.layout import Layout

    set_threads(1)
    data = read_ingest({n: Path(args.root, Layout(dataset="chitchat").data(n)) for n in INGEST_TABLES})
    pairs = candidate_pairs(data, ("train",)).head(args.pairs)
    contexts, responses = pairs["context"].to_list(), pairs["response"].to_list()
    print(f"{len(contexts)} chitchat train pairs, {args.passes} passes, batches of {args.batch_size}, 1 thread")
    print("| ranker | embedding dropout | mc_dropout_probabilities s | bare loop s | ratio |")
    print("|---|---|---|---|---|")
    for name in args.rankers.split(","):
        for emb in (float(v) for v in args.embedding_dropout.split(",")):
            arch = {"dropout": 0.5, "embedding_dropout": emb, "freeze_embeddings": True}
            spec = parse_train_spec(resolve_ranker({"ranker": name, "model": "minilm", "architecture": arch}))
            ranker = build_ranker(spec.ranker, seed=1)
            items = ranker.encode(contexts, responses)  # tokenising is shared; both sides below start from the ids
            torch.manual_seed(0)
            start = time.perf_counter()
            probs = mc_dropout_probabilities(ranker, contexts, responses, passes=args.passes,
                                             batch_size=args.batch_size, progress=False)
            ours = time.perf_counter() - start
            if args.no_bare:
                print(f"| {name} | {emb} | {ours:.1f} | – | – |", flush=True)
                continue
            order = np.argsort([ranker.length(x) for x in items], kind="stable")
            bare = np.empty_like(probs)
            start = time.perf_counter()
            with torch.inference_mode(), ranker.mc_dropout():
                for b in range(0, len(items), args.batch_size):
                    idx = order[b : b + args.batch_size]
                    batch = ranker.collate([items[i] for i in idx])
                    args_ = (batch["q"], batch["q_mask"], batch["d"], batch["d_mask"])
                    for t in range(args.passes):
                        bare[t, idx] = torch.sigmoid(ranker.module(*args_)).numpy()
            raw = time.perf_counter() - start
            # same distribution per pair: the pass means agree up to MC noise
            gap = float(np.abs(probs.mean(axis=0) - bare.mean(axis=0)).mean())
            print(f"| {name} | {emb} | {ours:.1f} | {raw:.1f} | {raw / ours:.2f}x (mean |pass-mean gap| {gap:.3f}) |",
                  flush=True)


if __name__ == "__main__":
    main()

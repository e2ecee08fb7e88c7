"""Teacher cost by precision: scoring pairs/s of :func:`curricula.models.base.score_pairs` and training s/step of
:func:`curricula.models.teacher.train_cross_encoder` with the default teacher (the packaged 6-layer MiniLM,
``max_length`` 64, score batch 128, 2 threads) on ``--pairs`` real candidate pairs (the first queries of the train split
of a scratch workflow run, 10 candidates each, as rule teacher_score sees them), once per ``--precision`` (``auto`` is
bf16 on a CPU with bf16 instructions, :func:`curricula.models.hf.autocast_dtype`). Scoring: best of ``--repeat`` calls,
and each precision's Spearman correlation and max |difference| against the first one's scores. Training:
``--train-steps`` balanced batches from the same seed (first/last losses printed; 0 skips). An untrained head
costs what a trained one does; ``--model DIR`` scores with a trained teacher folder instead.
``--code DIR`` imports ``curricula`` from DIR (A/B); ``--save`` writes the scores (npz) to compare two runs.

    .venv/bin/python bench/bench_teacher_score.py --root /tmp/prof [--pairs 2000] [--precision fp32 auto]
        [--train-steps 40] [--model results/chitchat/teacher/model] [--code /copy/of/old] [--save x.npz]
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
    ap.add_argument("--model", help="a trained cross-encoder folder (default: the packaged MiniLM, new head)")
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--precision", nargs="+", default=["fp32", "auto"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--train-steps", type=int, default=40)
    ap.add_argument("--save")
    args = ap.parse_args()
    sys.path.insert(0, args.code)
    import numpy as np
    import torch
    from scipy.stats import spearmanr

    from curricula.data.ingest import candidate_pairs, read_ingest
    from curricula.models import load_ranker, score_pairs
    from curricula.models.cross_encoder import CrossEncoderRanker
    from curricula.models.hf import autocast_dtype
    from curricula.models.runtime import set_threads
    from curricula.models.runtime import start_job
    from curricula.models.teacher import TeacherConfig, train_cross_encoder, training_texts
    from curricula.training.spec import RankerSpec

    base = Path(args.root) / "results" / "chitchat" / "data"
    data = read_ingest({n: base / f"{n}.parquet" for n in ("queries", "docs", "qrels", "candidates")})
    pairs = candidate_pairs(data, splits=("train",))
    head = pairs.head(args.pairs)
    contexts, responses = head["context"].to_list(), head["response"].to_list()
    set_threads(args.threads)
    if args.model:
        ranker = load_ranker(args.model, device=torch.device("cpu"), max_length=args.max_length)
    else:
        ranker = CrossEncoderRanker.build(RankerSpec(model="minilm", layers=None, max_length=args.max_length), 42)
    ranker.eval()
    n = len(contexts)
    print(f"{n} pairs ({head['qid'].n_unique()} contexts), threads {torch.get_num_threads()}, batch "
          f"{args.batch_size}, max_length {args.max_length}, code {args.code}, model {args.model or 'minilm'}")
    first = None
    saved = {}
    for precision in args.precision:
        dtype = autocast_dtype("cpu", precision, transformer=True)
        total = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            scores = score_pairs(ranker, contexts, responses, batch_size=args.batch_size, precision=precision,
                                 progress=False)
            total.append(time.perf_counter() - t0)
        saved[precision] = scores
        line = (f"  scoring {precision:5s} ({str(dtype).replace('torch.', '') if dtype else 'fp32'}) "
                f"{min(total):7.3f} s ({n / min(total):7.1f} pairs/s)")
        if first is None:
            first = (precision, scores, min(total))
        else:
            rho = spearmanr(first[1], scores).statistic
            line += (f"   {first[2] / min(total):4.2f}x {first[0]}; Spearman {rho:.5f}, "
                     f"max |diff| {np.abs(first[1] - scores).max():.4f}")
        print(line, flush=True)
    if args.train_steps:
        texts = training_texts(pairs)
        base_time = None
        for precision in args.precision:
            cfg = TeacherConfig(layers=None, steps=args.train_steps, precision=precision, max_length=args.max_length,
                                threads=args.threads)
            t0 = time.perf_counter()
            _, losses = train_cross_encoder(*texts, cfg, start_job(cfg.runtime, True, "training"), progress=False)
            per = (time.perf_counter() - t0) / cfg.steps
            base_time = base_time or per
            print(f"  training {precision:5s} {per:6.3f} s/step ({base_time / per:4.2f}x)  loss first 10 "
                  f"{np.mean(losses[:10]):.5f}, last 10 {np.mean(losses[-10:]):.5f}", flush=True)
    if args.save:
        np.savez(args.save, **saved)


if __name__ == "__main__":
    main()

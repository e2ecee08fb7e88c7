"""Teacher cost by precision: scoring pairs/s of :func:`curricula.models.base.score_pairs` and training s/step of
:func:`curricula.models.teacher.train_cross_encoder` with the default teacher (the packaged MiniLM cut to
``--layers`` 4, ``--pooling`` mean, as config.yaml's ``teacher``; ``max_length`` 64, score batch 128) on ``--pairs``
real candidate pairs (the first queries of the train split of a scratch workflow run, 10 candidates each, as rule
teacher_score sees them), once per ``--precision`` (``auto`` is bf16 on a CPU with bf16 instructions,
:func:`curricula.models.hf.autocast_dtype`). Scoring: best of ``--repeat`` calls, and each precision's Spearman
correlation and max |difference| against the first one's scores. Training: ``--train-steps`` balanced batches from
the same seed (first/last losses printed; 0 skips). An untrained head costs what a trained one does; ``--model DIR``
scores with a trained teacher folder instead. ``--code DIR`` imports ``curricula`` from DIR (A/B); ``--save`` writes
the scores (npz) to compare two runs.

``--batch-sizes`` times scoring at each batch size instead (the first precision) in interleaved rounds whose order
rotates, with ``--sample`` drawing the pairs at random from every split (as the scoring job's mix of lengths) instead
of the first train queries: median wall and CPU seconds (CPU: the steadier figure on a busy host), pairs per
CPU-second, the ratios to the first size and whether the scores are bitwise the first size's. ``--tokenise-steps N``
times the word-piece ids of N training batches (the training's seeded balanced batches, ``--train-batch`` pairs)
tokenised batch by batch against a job-long cache of each distinct text (``CrossEncoderRanker.token_cache``),
interleaved, and checks the ids are equal.

    .venv/bin/python bench/bench_teacher_score.py --root /tmp/prof [--pairs 2000] [--precision fp32 auto]
        [--train-steps 40] [--model results/chitchat/teacher/model] [--code /copy/of/old] [--save x.npz]
    .venv/bin/python bench/bench_teacher_score.py --root /tmp/prof --threads 1 --precision auto --train-steps 0 \\
        --sample --pairs 1500 --batch-sizes 128 32 64 256 --repeat 5 --tokenise-steps 600
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rounds import interleaved

REPO = Path(__file__).resolve().parents[1]


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/prof")
    ap.add_argument("--code", default=str(REPO))
    ap.add_argument("--model", help="a trained cross-encoder folder (default: the packaged MiniLM, new head)")
    ap.add_argument("--layers", type=int, default=4, help="layers of the packaged MiniLM kept (default 4)")
    ap.add_argument("--pooling", choices=("cls", "mean"), default="mean")
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--sample", action="store_true", help="pairs drawn at random from every split")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--precision", nargs="+", default=["fp32", "auto"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--train-steps", type=int, default=40)
    ap.add_argument("--batch-sizes", type=int, nargs="+", help="scoring batch sizes to time, interleaved")
    ap.add_argument("--tokenise-steps", type=int, default=0, help="training batches to tokenise, cached or not")
    ap.add_argument("--train-batch", type=int, default=16, help="pairs per training batch (--tokenise-steps)")
    ap.add_argument("--save")
    return ap.parse_args()


def by_precision(args, ranker, contexts, responses) -> dict:
    """Scoring time per precision, Spearman and max |diff| against the first; returns the scores per precision."""
    import numpy as np
    from scipy.stats import spearmanr

    from curricula.models import score_pairs
    from curricula.models.hf import autocast_dtype

    first, saved, n = None, {}, len(contexts)
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
    return saved


def batch_sweep(args, ranker, contexts, responses) -> None:
    """Scoring at each of ``args.batch_sizes`` (the first precision), interleaved: median s, pairs/s, ratio to the
    first size, bitwise equality with its scores."""
    import numpy as np

    from curricula.models import score_pairs

    def run(size: int):
        return lambda: score_pairs(ranker, contexts, responses, batch_size=size, precision=args.precision[0],
                                   progress=False)

    wall, cpu, outs = interleaved({size: run(size) for size in args.batch_sizes}, args.repeat)
    first = args.batch_sizes[0]
    med = {size: (float(np.median(wall[size])), float(np.median(cpu[size]))) for size in args.batch_sizes}
    for size in args.batch_sizes:
        (w, c), (w0, c0) = med[size], med[first]
        print(f"  scoring batch {size:4d} ({args.precision[0]}): median {w:7.2f} s wall, {c:7.2f} CPU-s "
              f"({len(contexts) / c:6.1f} pairs/CPU-s), {c0 / c:4.2f}x batch {first} ({w0 / w:4.2f}x wall); bitwise "
              f"= batch {first}: {np.array_equal(outs[size], outs[first])} (max |diff| "
              f"{np.abs(outs[size] - outs[first]).max():.1e}); CPU-s {' '.join(f'{t:.2f}' for t in cpu[size])}",
              flush=True)


def tokenise_ab(args, ranker, pairs) -> None:
    """The ids of ``args.tokenise_steps`` training batches, tokenised batch by batch and with a job-long cache."""
    import numpy as np

    from curricula.models.cross_encoder import pair_token_ids
    from curricula.models.teacher import balanced_batches, training_texts

    contexts, responses, labels = training_texts(pairs)
    batches = list(balanced_batches(labels, args.tokenise_steps, args.train_batch, np.random.default_rng(42)))

    def run(cached: bool):
        def go():
            cache: dict | None = {} if cached else None
            return [pair_token_ids(ranker.tokenizer, [contexts[i] for i in b], [responses[i] for i in b],
                                   args.max_length, cache) for b in batches]
        return go

    wall, cpu, outs = interleaved({"per batch": run(False), "cached": run(True)}, args.repeat)
    per, cached = (float(np.median(cpu[k])) for k in ("per batch", "cached"))
    print(f"  tokenising {len(batches)} training batches of {args.train_batch}: per batch {per:.3f} CPU-s, job-long "
          f"cache {cached:.3f} CPU-s ({per / cached:.2f}x; wall {np.median(wall['per batch']):.3f} s against "
          f"{np.median(wall['cached']):.3f} s); same ids: {outs['per batch'] == outs['cached']}", flush=True)


def training(args, pairs) -> None:
    """``args.train_steps`` steps of the teacher's training per precision: s/step and first/last losses."""
    import numpy as np

    from curricula.models.runtime import start_job
    from curricula.models.teacher import TeacherConfig, train_cross_encoder, training_texts

    texts = training_texts(pairs)
    base_time = None
    for precision in args.precision:
        cfg = TeacherConfig(layers=args.layers, pooling=args.pooling, steps=args.train_steps, precision=precision,
                            max_length=args.max_length, threads=args.threads)
        t0 = time.perf_counter()
        _, losses = train_cross_encoder(*texts, cfg, start_job(cfg.runtime, True, "training"), progress=False)
        per = (time.perf_counter() - t0) / cfg.steps
        base_time = base_time or per
        print(f"  training {precision:5s} {per:6.3f} s/step ({base_time / per:4.2f}x)  loss first 10 "
              f"{np.mean(losses[:10]):.5f}, last 10 {np.mean(losses[-10:]):.5f}", flush=True)


def main() -> None:
    args = arguments()
    sys.path.insert(0, args.code)
    import numpy as np
    import torch

    from curricula.data.ingest import candidate_pairs, read_ingest
    from curricula.models import load_ranker
    from curricula.models.cross_encoder import CrossEncoderRanker
    from curricula.models.runtime import set_threads
    from curricula.plumbing.provenance import cpu_info
    from curricula.training.spec import RankerSpec

    base = Path(args.root) / "results" / "chitchat" / "data"
    data = read_ingest({n: base / f"{n}.parquet" for n in ("queries", "docs", "qrels", "candidates")})
    pairs = candidate_pairs(data, splits=("train",))
    every = candidate_pairs(data, splits=("train", "dev", "test"))
    head = (every[np.random.default_rng(0).permutation(every.height)[: args.pairs]] if args.sample
            else pairs.head(args.pairs))
    contexts, responses = head["context"].to_list(), head["response"].to_list()
    set_threads(args.threads)
    if args.model:
        ranker = load_ranker(args.model, device=torch.device("cpu"), max_length=args.max_length)
    else:
        spec = RankerSpec(model="minilm", layers=args.layers, pooling=args.pooling, max_length=args.max_length)
        ranker = CrossEncoderRanker.build(spec, 42)
    ranker.eval()
    flags = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in cpu_info().get("flags", "").split()]
    print(f"{len(contexts)} pairs ({head['qid'].n_unique()} contexts), threads {torch.get_num_threads()}, batch "
          f"{args.batch_size}, max_length {args.max_length}, code {args.code}, model {args.model or 'minilm'}, CPU "
          f"flags {' '.join(flags)}, 1-min load {os.getloadavg()[0]:.2f}")
    saved = {} if args.batch_sizes else by_precision(args, ranker, contexts, responses)
    if args.batch_sizes:
        batch_sweep(args, ranker, contexts, responses)
    if args.tokenise_steps:
        tokenise_ab(args, ranker, pairs)
    if args.train_steps:
        training(args, pairs)
    if args.save:
        np.savez(args.save, **saved)


if __name__ == "__main__":
    main()

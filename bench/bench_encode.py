"""Benchmark: the pipeline's ``curricula.retrieval.dense.encode`` against a bare transformers forward loop.

Same texts (real WikiQA sentences), same model, batch size, max_length and precision. The bare loops are what a user
would write by hand: batches in input order (naive), and batches of texts sorted by token length, under the autocast
dtype the pipeline's ``--precision`` resolves to on this CPU (``auto`` is bf16 on a CPU with AVX512-BF16 or AMX, fp32
elsewhere; ``bf16`` forces it, emulated where the CPU has no bf16). Prints texts/s for each, the ratios and the
largest difference of a vector component; never asserts. The pipeline time is end to end (model load, tokenisation,
Parquet-ready polars frame); the bare loops are timed after their model is loaded.

    .venv/bin/python bench/bench_encode.py [--n 2000] [--batch-size 64] [--max-length 128] [--threads 2] [--repeat 1]
                                           [--precision auto|fp32|bf16]

``--batch-sizes`` instead times the pipeline's ``dense.encode_rows`` alone (model loaded once) at each batch size,
in interleaved rounds whose order rotates, and with ``--code DIR`` also DIR's ``encode_rows`` (another checkout: A/B)
at the first size; it prints the median wall and CPU seconds (CPU: the steadier figure on a busy host), texts per
CPU-second, the ratios to the first variant and whether the vectors are bitwise the first variant's.
``--root RUN --kind queries|docs`` draws ``--n`` chitchat contexts (cut from the left) or responses of a workflow
root's ingest tables instead of WikiQA sentences:

    .venv/bin/python bench/bench_encode.py --root /tmp/prof --kind docs --n 3000 --max-length 64 --threads 1 \
        --batch-sizes 64 32 128 --repeat 5 [--code /copy/of/old]
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from curricula.models.hf import PRECISIONS, autocast_dtype, load_encoder, load_tokenizer  # noqa: E402
from curricula.models.runtime import set_threads  # noqa: E402
from curricula.plumbing.provenance import cpu_info  # noqa: E402
from curricula.retrieval import dense  # noqa: E402
from curricula.retrieval.dense import encode  # noqa: E402
from curricula.retrieval.similarity import vectors_to_numpy  # noqa: E402
from rounds import interleaved  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "wikiqa" / "WikiQA-train.tsv"


def wikiqa_sentences(path: Path, n: int) -> list[str]:
    """The first ``n`` distinct candidate sentences of a WikiQA .tsv, in file order."""
    seen: dict[str, None] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        rows = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(rows)
        for row in rows:
            seen.setdefault(row[5], None)
            if len(seen) == n:
                break
    if len(seen) < n:
        print(f"note: {path} has only {len(seen)} distinct sentences", file=sys.stderr)
    return list(seen)


def chitchat_texts(root: Path, kind: str, n: int, seed: int = 0) -> tuple[list[str], str]:
    """A seeded sample of ``n`` queries (dialogue contexts) or docs of a workflow root's ingest tables, and the side
    the pipeline cuts them from (left for contexts, right for responses)."""
    import polars as pl

    table = pl.read_parquet(root / "results" / "chitchat" / "data" / f"{kind}.parquet", columns=["text"])
    rows = np.random.default_rng(seed).permutation(table.height)[:n]
    return [table["text"][int(i)] for i in rows], "left" if kind == "queries" else "right"


def dense_module(code: str):
    """The ``curricula.retrieval.dense`` module of another checkout ``code`` (its own file, the rest of the package
    this checkout's): the old side of an A/B."""
    spec = importlib.util.spec_from_file_location("ab_dense", Path(code) / "curricula" / "retrieval" / "dense.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sweep(args, texts: list[str], side: str) -> None:
    """``encode_rows`` at each of ``args.batch_sizes`` (and another checkout's at the first with ``args.code``),
    interleaved; prints median wall and CPU seconds, the ratios to the first variant and bitwise equality with it."""
    model, tok = load_encoder("minilm", layers=args.layers), load_tokenizer("minilm")
    kw = dict(max_length=args.max_length, precision=args.precision, progress=False, truncation_side=side)

    def run(module, size: int) -> Callable[[], np.ndarray]:
        return lambda: module.encode_rows(texts, model, tok, batch_size=size, **kw)[1]

    variants = {f"this checkout, batch {b}": run(dense, b) for b in args.batch_sizes}
    if args.code:
        variants[f"{args.code}, batch {args.batch_sizes[0]}"] = run(dense_module(args.code), args.batch_sizes[0])
    wall, cpu, outs = interleaved(variants, args.repeat)
    first = next(iter(variants))
    med = {name: (float(np.median(wall[name])), float(np.median(cpu[name]))) for name in variants}
    print(f"{'variant':<44}{'wall s':>8}{'CPU s':>8}{'texts/CPU-s':>12}{'ratio':>7}{'(wall)':>8}  bitwise = first "
          "(max |diff|); CPU s of each run")
    for name in variants:
        same = np.array_equal(outs[name], outs[first])
        (w, c), (w0, c0) = med[name], med[first]
        print(f"{name:<44}{w:>8.2f}{c:>8.2f}{len(texts) / c:>12.1f}{c0 / c:>6.2f}x{w0 / w:>7.2f}x  {same} "
              f"({np.abs(outs[name] - outs[first]).max():.1e}); {' '.join(f'{t:.2f}' for t in cpu[name])}")


def bare_loop(model, tok, texts: list[str], batch_size: int, max_length: int, sort: bool,
              dtype: torch.dtype | None) -> np.ndarray:
    """A hand-written loop: tokenise each batch with padding, forward (under ``dtype`` autocast; None = fp32),
    mean-pool and normalise in fp32."""
    order = list(range(len(texts)))
    if sort:
        lengths = [len(x) for x in tok(texts, truncation=True, max_length=max_length)["input_ids"]]
        order.sort(key=lambda i: lengths[i])
    out = np.empty((len(texts), model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            batch = tok([texts[i] for i in rows], padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
            with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                h = model(**batch).last_hidden_state.float()
            m = batch["attention_mask"].unsqueeze(-1).float()
            v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            out[rows] = torch.nn.functional.normalize(v, dim=1).numpy()
    return out


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="number of texts (default 2000)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--layers", type=int, default=None, help="keep the first N layers (default all 6)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the best of each is kept")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a WikiQA .tsv (sentences are column 6)")
    ap.add_argument("--precision", choices=PRECISIONS, default="auto", help="the pipeline's precision (default auto)")
    ap.add_argument("--batch-sizes", type=int, nargs="+", help="time encode_rows alone at each batch size")
    ap.add_argument("--code", help="with --batch-sizes: also another checkout's encode_rows (A/B)")
    ap.add_argument("--root", type=Path, help="a workflow root: chitchat texts of its ingest tables (not WikiQA)")
    ap.add_argument("--kind", choices=("queries", "docs"), default="docs", help="with --root: contexts or responses")
    return ap.parse_args()


def main() -> None:
    args = arguments()
    threads = set_threads(args.threads)
    if not args.batch_sizes:
        against_bare_loops(args, threads)
        return
    flags = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in cpu_info().get("flags", "").split()]
    texts, side = chitchat_texts(args.root, args.kind, args.n) if args.root else (
        wikiqa_sentences(args.data, args.n), "right")
    print(f"{len(texts)} {args.kind if args.root else 'WikiQA'} texts, max_length {args.max_length}, layers "
          f"{args.layers or 6}, precision {args.precision}, torch threads {threads}, CPU flags {' '.join(flags)}, "
          f"1-min load {os.getloadavg()[0]:.2f}; {args.repeat} interleaved round(s)")
    sweep(args, texts, side)


def against_bare_loops(args: argparse.Namespace, threads: int) -> None:
    """The pipeline's ``encode`` (end to end) against the bare loops on WikiQA sentences: texts/s, ratios, max
    vector differences."""
    texts = wikiqa_sentences(args.data, args.n)
    ids = [f"s{i}" for i in range(len(texts))]
    tok = load_tokenizer("minilm")
    lengths = np.array([len(x) for x in tok(texts, truncation=True, max_length=args.max_length)["input_ids"]])
    print(f"texts: {len(texts)} WikiQA sentences from {args.data.name}; tokens/text mean {lengths.mean():.1f}, "
          f"max {lengths.max()} (truncated at {args.max_length}); batch {args.batch_size}; "
          f"layers {args.layers or 6}; torch threads {threads}; torch {torch.__version__}")
    dtype = autocast_dtype("cpu", args.precision, transformer=True)
    print(f"precision {args.precision}: {'bf16 autocast' if dtype is not None else 'fp32'}")

    model = load_encoder("minilm", layers=args.layers)

    def pipeline():
        df = encode(texts, ids, "minilm", max_length=args.max_length, batch_size=args.batch_size,
                    layers=args.layers, device="cpu", precision=args.precision, progress=False)
        return vectors_to_numpy(df)

    variants = {
        "pipeline encode (end to end, incl. model load)": pipeline,
        "bare transformers loop, input order (naive)":
            lambda: bare_loop(model, tok, texts, args.batch_size, args.max_length, sort=False, dtype=dtype),
        "bare transformers loop, sorted by length":
            lambda: bare_loop(model, tok, texts, args.batch_size, args.max_length, sort=True, dtype=dtype),
    }
    wall = {name: float("inf") for name in variants}
    cpu = {name: float("inf") for name in variants}
    vecs = {}
    load_before = os.getloadavg()[0]
    for _ in range(args.repeat):  # interleaved rounds; the best round of each counts
        for name, fn in variants.items():
            t0, c0 = time.perf_counter(), time.process_time()
            vecs[name] = fn()
            wall[name] = min(wall[name], time.perf_counter() - t0)
            cpu[name] = min(cpu[name], time.process_time() - c0)
    load_after = os.getloadavg()[0]

    n = len(texts)
    print(f"1-min load average before/after: {load_before:.2f}/{load_after:.2f} on {os.cpu_count()} cores "
          f"(other processes make wall times noisy); best of {args.repeat} interleaved round(s)")
    print(f"{'variant':<48}{'wall s':>8}{'texts/s':>9}{'CPU s':>8}{'texts/CPU-s':>13}")
    for name in variants:
        print(f"{name:<48}{wall[name]:>8.2f}{n / wall[name]:>9.1f}{cpu[name]:>8.2f}{n / cpu[name]:>13.1f}")
    names = list(variants)
    for other in names[1:]:
        print(f"ratio pipeline / {other.split(', ')[1]} bare loop: {wall[other] / wall[names[0]]:.2f}x the throughput "
              f"(CPU time: {cpu[other] / cpu[names[0]]:.2f}x)")
    pipe, naive, sorted_ = (vecs[k] for k in names)
    print(f"max |pipeline - naive| = {np.abs(pipe - naive).max():.2e}; "
          f"max |pipeline - sorted| = {np.abs(pipe - sorted_).max():.2e}; largest |component| {np.abs(pipe).max():.3f}")


if __name__ == "__main__":
    main()

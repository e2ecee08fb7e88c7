"""Floor bench (issue 32, item 1): per model and stage, the FLOPs of the work, the achieved GFLOP/s and the share of
this machine's measured matmul peak, so each stage can be called compute-bound or overhead-bound.

Reads the ingest tables and the trained teacher of a run of the default pipeline (``--root``:
``results/chitchat/data/*.parquet``, ``results/chitchat/teacher/model``) and the config (``--config``). Stages, each
on real chitchat text, built with the pipeline's own APIs and knobs, at the threads its jobs use:

* teacher train step: the ``teacher`` section's cross-encoder (``CrossEncoderRanker.build``), ``batch_size`` pairs of
  the train split's balanced batches (``curricula.models.teacher.balanced_batches``), forward + BCE + backward + fused
  AdamW step (``curricula.training.core.make_optimizer``), as ``train_cross_encoder`` does;
* teacher scoring: the trained teacher folder (``load_ranker``) on ``score_batch_size``-pair batches of test
  candidates, through ``curricula.models.score_pairs`` (length-sorted batches, inference mode);
* dense encoding: the ``dense`` section's encoder (``load_encoder``) on ``batch_size`` contexts (left-truncated) and
  responses at its ``max_length``, through ``curricula.retrieval.dense.encode_rows``;
* ConvKNRM train step: the config's baseline spec (``experiment_specs``; ``build_ranker``), ``batch_size`` train
  positives with their ``NegativeSampler`` negatives, forward + loss + backward + fused Adam step;
* ConvKNRM dev evaluation: ``curricula.evaluation.rerank.ranker_metrics`` on ``--dev-queries`` dev queries
  (``dev_pairs``, 10 candidates each), as training's dev selection runs it.

For each stage: GFLOP per unit, counted with ``torch.utils.flop_counter.FlopCounterMode`` over one run of the same
calls (not timed; matmuls, convolutions and attention only: elementwise work, embedding lookups, kernel pooling's
exp and the optimiser are not FLOPs here; the CPU flash-attention ops are added to its table); times per unit, the
median of ``--repeats`` timed runs after one warm-up run, without the counter: ``model`` on tensors built up front
(forward, and for the train steps loss, backward and optimiser step), ``prep`` outside it (tokenisation and
collate: measured on their own for the train steps, as bench/prof_convknrm.py does; end-to-end API time minus
``model`` for the scoring stages, which then also holds the metric computation of the dev evaluation), ``total`` =
prep + model. GFLOP/s and the share of peak are given on ``total`` and on ``model``; the peak is the best of
``torch.matmul`` on square matrices (2048 and 4096, 3 repeats) measured in the same run at the stage's thread count
and precision: fp32, and bf16 where the CPU has bf16 instructions (AVX512-BF16 or AMX) and precision is auto.
``bound``: compute when total reaches half the peak; else prep when prep is at least 30% of total; else ops (the
model's time goes to work other than large matmuls: small matmuls, elementwise ops, optimiser, framework).

The ConvKNRM tokeniser cache is warm after the warm-up run, as it is for most of a training run. Threads are the
config's ``teacher.threads``, ``dense.threads`` and ``train.threads`` (the Snakemake rules' ``threads:``).

To emulate the AVX2 class of CPU (issue 32's Zen 3) on a newer one, set the ISA caps on the command line; torch and
oneDNN read them at import, and the header prints the capability torch then reports:

    .venv/bin/python bench/floor.py --root <run dir> [--config config.yaml] [--repeats 5] \
        [--batches 4] [--dev-queries 500] [--precision auto|fp32]
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python bench/floor.py --root <run dir> --precision fp32
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import torch  # noqa: E402
from torch.utils import flop_counter  # noqa: E402

from curricula.curriculum.negatives import NegativeSampler  # noqa: E402
from curricula.data.ingest import candidate_pairs, read_ingest  # noqa: E402
from curricula.evaluation.rerank import ranker_metrics  # noqa: E402
from curricula.experiments.spec import TrainSpec  # noqa: E402
from curricula.experiments.specs import experiment_specs, finetune_dense_model  # noqa: E402
from curricula.experiments.train import dev_pairs  # noqa: E402
from curricula.models import build_ranker, load_ranker, score_pairs  # noqa: E402
from curricula.models.cross_encoder import CrossEncoderRanker  # noqa: E402
from curricula.models.hf import (  # noqa: E402
    autocast,
    autocast_dtype,
    cpu_has_native_bf16,
    load_encoder,
    load_tokenizer,
    resolve_model_dir,
)
from curricula.models.runtime import set_threads  # noqa: E402
from curricula.models.teacher import balanced_batches, teacher_config  # noqa: E402
from curricula.plumbing.config import load_config  # noqa: E402
from curricula.plumbing.layout import Layout  # noqa: E402
from curricula.plumbing.shards import length_batches  # noqa: E402
from curricula.retrieval import dense  # noqa: E402
from curricula.retrieval.precompute import dense_max_length  # noqa: E402
from curricula.training.core import FitConfig, make_optimizer  # noqa: E402
from curricula.training.losses import binary_ce, element_losses, weighted_mean  # noqa: E402
from curricula.training.spec import RankerSpec  # noqa: E402

CPU = torch.device("cpu")
FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")
SEED = 1


# ------------------------------------------------------------------------------------------------ measuring
def _cpu_sdpa(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query, key, value)


def _cpu_sdpa_backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_backward_flop_count(grad_out, query, key, value)


#: the CPU flash-attention ops that BERT's sdpa attention runs here, missing from torch's FLOP table
CPU_ATTENTION = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa,
                 torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward}


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one run of ``fn`` (matmul, convolution, attention; forward and backward)."""
    with flop_counter.FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION) as counter:
        fn()
    return counter.get_total_flops()


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``repeats`` runs of ``fn`` after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def matmul_peak(dtype: torch.dtype, threads: int, sizes=(2048, 4096), repeats: int = 3) -> float:
    """Best GFLOP/s of square ``torch.matmul`` at ``threads`` threads."""
    set_threads(threads)
    best = 0.0
    for n in sizes:
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        torch.matmul(a, b)
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.matmul(a, b)
            best = max(best, 2 * n**3 / (time.perf_counter() - t0) / 1e9)
    return best


def cpu_flags() -> list[str]:
    """The flags of FLAGS that lscpu (or /proc/cpuinfo) lists."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        text = Path("/proc/cpuinfo").read_text()
    words = set(text.split())
    return [f for f in FLAGS if f in words]


def stage_row(stage: str, unit: str, threads: int, dtype, flops: float, prep: float, model: float) -> dict:
    return {"stage": stage, "unit": unit, "threads": threads, "dtype": "bf16" if dtype == torch.bfloat16 else "fp32",
            "gflop": flops / 1e9, "prep": prep, "model": model}


# ------------------------------------------------------------------------------------------------ stages
def teacher_train(data: dict, cfg, precision: str, batches: int, repeats: int) -> dict:
    """Train steps of the teacher on balanced batches of train pairs (prep: encode + collate)."""
    set_threads(cfg.threads)
    pairs = candidate_pairs(data, splits=("train",))
    contexts, responses = pairs["context"].to_list(), pairs["response"].to_list()
    labels = (pairs["rel"].to_numpy() > 0).astype(np.int64)
    idx = list(balanced_batches(labels, batches, cfg.batch_size, np.random.default_rng(SEED)))
    texts = [([contexts[i] for i in b], [responses[i] for i in b]) for b in idx]
    ys = [torch.tensor(labels[b], dtype=torch.float32) for b in idx]
    spec = RankerSpec(ranker="cross_encoder", model=cfg.model, layers=cfg.layers, max_length=cfg.max_length,
                      pooling=cfg.pooling)
    ranker = CrossEncoderRanker.build(spec, SEED).train()
    optim, sched = make_optimizer(ranker.parameters(), FitConfig(steps=cfg.steps, lr=cfg.lr, eps=cfg.eps,
                                                                        warmup=cfg.warmup, fused=True))
    losses = [lambda logits, y=y: binary_ce(logits, y).mean() for y in ys]
    flops, t_prep, t_model = time_train_steps(ranker, texts, losses, optim, sched, precision, repeats)
    dtype = autocast_dtype(CPU, precision, transformer=True)
    return stage_row("teacher train step", f"step ({cfg.batch_size} pairs)", cfg.threads, dtype, flops / batches,
                     t_prep / batches, t_model / batches)


def time_train_steps(ranker, texts: list, losses: list, optim, sched, precision: str, repeats: int
                     ) -> tuple[int, float, float]:
    """(FLOPs, prep seconds, model seconds) of one run of training steps, one per (contexts, responses) of
    ``texts`` with the loss function of its logits in ``losses``: prep = encode + collate; model = forward, loss,
    backward, optimiser and schedule step on the collated batches."""
    def prep():
        return [ranker.collate(ranker.encode(c, r)) for c, r in texts]

    def steps(collated):
        for batch, loss_of in zip(collated, losses):
            loss = loss_of(ranker.logits(batch, CPU, precision))
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
            sched.step()

    collated = prep()
    flops = count_flops(lambda: steps(prep()))
    return flops, median_seconds(prep, repeats), median_seconds(lambda: steps(collated), repeats)


def model_only_scoring(ranker, contexts, responses, batch_size: int, precision: str) -> Callable[[], None]:
    """The forward passes of ``score_pairs`` over its length-sorted batches, collated up front."""
    items = ranker.encode(contexts, responses)
    collated = [ranker.collate([items[i] for i in b])
                for b in length_batches([ranker.length(x) for x in items], batch_size)]

    @torch.inference_mode()
    def run():
        ranker.eval()
        with ranker.scoring_cache():
            for batch in collated:
                ranker.logits(batch, CPU, precision)

    return run


def teacher_score(data: dict, model_dir: Path, cfg, precision: str, batches: int, repeats: int) -> dict:
    """Scoring batches of test candidates with the trained teacher (prep: score_pairs minus the forward passes)."""
    set_threads(cfg.threads)
    pairs = candidate_pairs(data, splits=("test",))
    pairs = pairs.sample(min(pairs.height, batches * cfg.score_batch_size), seed=SEED)
    contexts, responses = pairs["context"].to_list(), pairs["response"].to_list()
    ranker = load_ranker(model_dir, device=CPU, max_length=cfg.max_length)

    def api():
        score_pairs(ranker, contexts, responses, batch_size=cfg.score_batch_size, precision=precision,
                    progress=False)

    model = model_only_scoring(ranker, contexts, responses, cfg.score_batch_size, precision)
    flops = count_flops(api)
    t_api, t_model = median_seconds(api, repeats), median_seconds(model, repeats)
    n = -(-len(contexts) // cfg.score_batch_size)
    dtype = autocast_dtype(CPU, precision, transformer=True)
    return stage_row("teacher scoring", f"batch ({cfg.score_batch_size} pairs)", cfg.threads, dtype, flops / n,
                     (t_api - t_model) / n, t_model / n)


def dense_encoding(texts: list[str], side: str, what: str, cfg: dict, precision: str, repeats: int) -> dict:
    """``encode_rows`` of real texts with the dense encoder (prep: tokenise + pad, from encode_rows minus model)."""
    set_threads(cfg["threads"])
    path = resolve_model_dir(cfg["model"])
    tokenizer, model = load_tokenizer(path), load_encoder(path, layers=cfg["layers"], device=CPU)
    size, length = cfg["batch_size"], cfg["max_length"]

    def api():
        dense.encode_rows(texts, model, tokenizer, max_length=length, batch_size=size, precision=precision,
                          progress=False, truncation_side=side)

    table = dense.token_table(tokenizer, texts, length, side)  # the encode stage's own preparation
    padded = [dense.pad_rows(table, b, tokenizer.pad_token_id, CPU)
              for b in length_batches(table.lengths, size, longest_first=True)]

    def forward():
        with torch.inference_mode(), autocast(CPU, precision, transformer=True):
            for batch in padded:
                dense.embed_batch(model, batch)

    flops = count_flops(api)
    t_api, t_model = median_seconds(api, repeats), median_seconds(forward, repeats)
    n = len(padded)
    dtype = autocast_dtype(CPU, precision, transformer=True)
    return stage_row(f"dense encoding, {what}", f"batch ({size} texts)", cfg["threads"], dtype, flops / n,
                     (t_api - t_model) / n, t_model / n)


def convknrm_train(data: dict, spec: TrainSpec, batches: int, repeats: int) -> tuple[dict, object]:
    """Train steps of the baseline ConvKNRM: train positives and their negatives (prep: encode + collate)."""
    set_threads(spec.runtime.threads)
    rng = np.random.default_rng(SEED)
    positives = candidate_pairs(data, splits=("train",)).filter(pl.col("rel") > 0)
    negs = NegativeSampler(spec.arm.negatives, queries=data["queries"], docs=data["docs"],
                           qrels=data["qrels"], candidates=data["candidates"], seed=SEED)
    doc_texts = data["docs"]["text"].to_list()
    texts, shapes = [], []
    for step in range(batches):
        batch = positives[rng.choice(positives.height, spec.objective.batch_size, replace=False)]
        pos = np.array([negs.code_of[d] for d in batch["docid"].to_list()], dtype=np.int64)
        group = np.concatenate([pos[:, None], negs.sample(batch["qid"].to_list(), step)], axis=1)
        texts.append(([c for c in batch["context"].to_list() for _ in range(group.shape[1])],
                      [doc_texts[c] for c in group.reshape(-1)]))
        shapes.append(group.shape)
    ranker = build_ranker(spec.ranker, SEED).to(CPU).train()
    optim, sched = make_optimizer(ranker.parameters(), FitConfig.of(spec.fit))
    objective, precision = spec.objective, spec.runtime.precision
    losses = [lambda logits, shape=shape: weighted_mean(element_losses(objective.loss, logits.view(shape),
                                                                       objective.margin), None) for shape in shapes]
    flops, t_prep, t_model = time_train_steps(ranker, texts, losses, optim, sched, precision, repeats)
    dtype = autocast_dtype(CPU, precision, transformer=ranker.transformer)
    row = stage_row("ConvKNRM train step", f"step ({shapes[0][0]}x{shapes[0][1]} pairs)", spec.runtime.threads, dtype,
                    flops / batches, t_prep / batches, t_model / batches)
    return row, ranker


def convknrm_dev(data: dict, spec: TrainSpec, ranker, dev_queries: int, config_seed: int, repeats: int) -> dict:
    """One dev evaluation as training runs it (prep: ranker_metrics minus the forward passes)."""
    set_threads(spec.runtime.threads)
    dev = dev_pairs(data, dev_queries, config_seed, 1)
    evaluation, precision = spec.evaluation, spec.runtime.precision
    metric = evaluation.eval_metric

    def api():
        ranker_metrics(ranker, dev, data["qrels"], [metric], batch_size=evaluation.score_batch_size, device=CPU,
                       precision=precision)

    model = model_only_scoring(ranker, dev["context"].to_list(), dev["response"].to_list(),
                               evaluation.score_batch_size, precision)
    flops = count_flops(api)
    t_api, t_model = median_seconds(api, repeats), median_seconds(model, repeats)
    ranker.train()
    dtype = autocast_dtype(CPU, precision, transformer=ranker.transformer)
    return stage_row("ConvKNRM dev evaluation", f"eval ({dev['qid'].n_unique()} q, {dev.height} pairs)",
                     spec.runtime.threads, dtype, flops, t_api - t_model, t_model)


# ------------------------------------------------------------------------------------------------ report
def verdict(total_share: float, prep: float, total: float) -> str:
    if total_share >= 0.5:
        return "compute"
    return "prep" if prep >= 0.3 * total else "ops"


def print_table(rows: list[dict], peaks: dict) -> None:
    head = (f"{'stage':<30}{'unit':<27}{'thr':>3} {'dtype':<5}{'GFLOP':>8}{'prep ms':>9}{'model ms':>10}"
            f"{'total ms':>10}{'GF/s tot':>9}{'GF/s mod':>9}{'peak':>7}{'%pk tot':>8}{'%pk mod':>8}  bound")
    print(head)
    print("-" * len(head))
    for r in rows:
        total = r["prep"] + r["model"]
        peak = peaks[(r["dtype"], r["threads"])]
        rate_tot, rate_mod = r["gflop"] / total, r["gflop"] / r["model"]
        print(f"{r['stage']:<30}{r['unit']:<27}{r['threads']:>3} {r['dtype']:<5}{r['gflop']:>8.2f}"
              f"{r['prep'] * 1e3:>9.1f}{r['model'] * 1e3:>10.1f}{total * 1e3:>10.1f}{rate_tot:>9.1f}{rate_mod:>9.1f}"
              f"{peak:>7.0f}{100 * rate_tot / peak:>7.1f}%{100 * rate_mod / peak:>7.1f}%  "
              f"{verdict(rate_tot / peak, r['prep'], total)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="a default run's working directory (results/chitchat/...)")
    ap.add_argument("--config", default=str(REPO / "config.yaml"))
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per stage after one warm-up (median)")
    ap.add_argument("--batches", type=int, default=4, help="batches (steps) per run of the batch stages")
    ap.add_argument("--dev-queries", type=int, default=500, help="dev queries of the ConvKNRM dev evaluation")
    ap.add_argument("--precision", choices=["auto", "fp32"], default="auto",
                    help="auto: each section's configured precision; fp32: forced everywhere")
    args = ap.parse_args()
    config = load_config(args.config)
    layout = Layout.of(config)
    data = read_ingest({n: Path(args.root, layout.data(n)) for n in ("queries", "docs", "qrels", "candidates")})
    forced = {"precision": "fp32"} if args.precision == "fp32" else {}
    teacher = teacher_config({**config["teacher"], **forced}, config["pipeline_seed"])
    specs = experiment_specs(config)
    # the length the run's encoding jobs cut texts at (dense.max_length null: G's fine-tuning length)
    length = dense_max_length(config, finetune_dense_model(config, specs))
    dense_cfg = {**config["dense"], "max_length": length, **forced}
    spec = specs["baseline"].with_runtime(device="cpu", **forced)

    print(f"torch {torch.__version__}; cpu capability {torch.backends.cpu.get_cpu_capability()}; "
          f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY', '-')} "
          f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', '-')}; {os.cpu_count()} cores; "
          f"lscpu flags: {' '.join(cpu_flags()) or '-'}; native bf16 (AVX512-BF16/AMX): {cpu_has_native_bf16()}")
    print(f"threads: teacher {teacher.threads}, dense {dense_cfg['threads']}, train {spec.runtime.threads}; "
          f"precision: teacher {teacher.precision}, dense {dense_cfg['precision']}, train {spec.runtime.precision} "
          f"(--precision {args.precision}); 1-min load {os.getloadavg()[0]:.2f}; repeats {args.repeats}")

    rows = [teacher_train(data, teacher, teacher.precision, args.batches, args.repeats),
            teacher_score(data, Path(args.root, layout.teacher()["model"]), teacher, teacher.precision, args.batches,
                          args.repeats)]
    queries = data["queries"].sample(args.batches * dense_cfg["batch_size"], seed=SEED)["text"].to_list()
    docs = data["docs"].sample(args.batches * dense_cfg["batch_size"], seed=SEED)["text"].to_list()
    rows.append(dense_encoding(queries, dense_cfg["query_truncation"], "contexts", dense_cfg,
                               dense_cfg["precision"], args.repeats))
    rows.append(dense_encoding(docs, "right", "responses", dense_cfg, dense_cfg["precision"], args.repeats))
    row, ranker = convknrm_train(data, spec, args.batches, args.repeats)
    rows += [row, convknrm_dev(data, spec, ranker, args.dev_queries, config["pipeline_seed"], args.repeats)]

    needed = {(r["dtype"], r["threads"]) for r in rows} | {("fp32", r["threads"]) for r in rows}
    peaks = {(name, t): matmul_peak(torch.float32 if name == "fp32" else torch.bfloat16, t) for name, t in needed}
    print("matmul peak GFLOP/s (best of torch.matmul 2048^2 and 4096^2, 3 repeats): "
          + ", ".join(f"{name} x{t} thread(s) {v:.0f}" for (name, t), v in sorted(peaks.items())))
    print(f"1-min load after: {os.getloadavg()[0]:.2f}")
    print_table(rows, peaks)
    step, dev = rows[-2], rows[-1]
    per_step = step["prep"] + step["model"] + (dev["prep"] + dev["model"]) / spec.fit.eval_every
    print(f"ConvKNRM per training step with a dev evaluation every {spec.fit.eval_every} steps: "
          f"{per_step * 1e3:.0f} ms (dev_queries {spec.evaluation.dev_queries or 'all'} in the config; measured here "
          f"with {args.dev_queries})")


if __name__ == "__main__":
    main()

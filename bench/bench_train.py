"""Benchmark: training steps/s of the pipeline's loop (``curricula.experiments.train.train_ranker``) against a bare
torch loop.

Same data (real chitchat instances), same model (``build_ranker`` with the same spec and seed: ``--ranker``
cross_encoder, convknrm, cnn_qa or lstm_qa), same fused AdamW + linear warm-up schedule, and the same batches:
the bare loop's token-id batches are built up front with the pipeline's own ``CurriculumSampler`` and
``NegativeSampler`` (same seed, so step t draws the same positives and negatives) and the ranker's ``encode`` and
``collate``. The bare loop calls the torch module directly. What each timing covers:

* pipeline loop: the steps inside ``train_ranker``, timed through its ``on_step`` callback from the end of step
  ``--skip`` to the end of step ``steps - 1``: sampling positives and negatives, tokenisation, collate, forward,
  loss, backward, optimiser and scheduler step. Not included: setup (samplers, dev pairs, model load), the one dev
  evaluation at the last step (``eval_every = steps``), saving the model. The end-to-end wall time is printed too.
* bare loop: the same steps over the pre-built batches: forward, BCE-with-logits loss, backward, optimiser and
  scheduler step only.
* overhead: building one step's batch the pipeline's way (sampling, then tokenisation + collate), timed while the
  bare loop's batches are built; the pipeline pays it on every step, the bare loop never.
* one dev evaluation (``curricula.evaluation.rerank.ranker_metrics`` on the same ``--dev-queries`` dev queries), timed
  on its own and excluded from both loops.

With ``--repeat`` the two loops run in interleaved rounds (alternating which goes first) and the best round of
each counts. The mean training loss of both loops is printed as a check that they trained on the same batches.
Prints; never asserts.

    .venv/bin/python bench/bench_train.py [--ranker cross_encoder] [--steps 60] [--layers 2] [--threads 2] \
        [--train 400] [--dev-queries 20] [--skip 5] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from curricula.curriculum import ordering as cur  # noqa: E402
from curricula.curriculum.negatives import NegativeSampler  # noqa: E402
from curricula.data import chitchat  # noqa: E402
from curricula.data.ingest import candidate_pairs  # noqa: E402
from curricula.difficulty import difficulty_table  # noqa: E402
from curricula.evaluation.rerank import ranker_metrics  # noqa: E402
from curricula.experiments.spec import TrainSpec, parse_train_spec  # noqa: E402
from curricula.experiments.specs import merge_experiment, resolve_ranker  # noqa: E402
from curricula.experiments.train import dev_pairs, train_ranker  # noqa: E402
from curricula.models import build_ranker  # noqa: E402
from curricula.models.runtime import set_threads  # noqa: E402

CONFIG_SEED = 42


def make_spec(args: argparse.Namespace) -> TrainSpec:
    train = dict(ranker=args.ranker, architecture={}, model="minilm", layers=args.layers, max_length=64,
                 steps=args.steps, batch_size=8, lr=None,
                 eps=1e-8, weight_decay=0.0, warmup=0.1, optimizer="adamw", loss="pointwise_ce", margin=1.0,
                 negatives={"mode": "random", "m": 1, "depth": 100, "pacing": None}, eval_every=args.steps,
                 eval_metric="AP", dev_queries=args.dev_queries, checkpoint_every=args.steps + 1,
                 score_batch_size=64, device="cpu", precision="fp32", threads=args.threads)
    axes = {"scoring": "random", "pacing": {"name": "root_2"}}
    return parse_train_spec(resolve_ranker(merge_experiment(train, axes)))


def build_batches(data: dict[str, pl.DataFrame], spec: TrainSpec, folder: Path, seed: int, ranker
                  ) -> tuple[list[dict[str, torch.Tensor]], float, float]:
    """Every step's collated batch, drawn as ``train_ranker`` draws them; also sampling and tokenising s/step."""
    steps = spec.fit.steps
    arm = spec.arm
    sampler = cur.CurriculumSampler(cur.Curriculum(folder), arm.pacing, spec.objective.batch_size, seed)
    negs = NegativeSampler(arm.negatives, queries=data["queries"], docs=data["docs"], qrels=data["qrels"],
                           candidates=data["candidates"], seed=seed)
    context_of = dict(zip(data["queries"]["qid"].to_list(), data["queries"]["text"].to_list()))
    doc_texts = data["docs"]["text"].to_list()
    batches, t_sample, t_tok = [], 0.0, 0.0
    for step in range(steps):
        t0 = time.perf_counter()
        batch = sampler.batch(step)
        qids = batch["qid"].to_list()
        pos = np.array([negs.code_of[d] for d in batch["docid"].to_list()], dtype=np.int64)
        group = np.concatenate([pos[:, None], negs.sample(qids, step)], axis=1)
        t1 = time.perf_counter()
        contexts = [context_of[q] for q in qids for _ in range(group.shape[1])]
        responses = [doc_texts[c] for c in group.reshape(-1)]
        batches.append(ranker.collate(ranker.encode(contexts, responses)))
        t_sample, t_tok = t_sample + t1 - t0, t_tok + time.perf_counter() - t1
    return batches, t_sample / steps, t_tok / steps


def bare_loop(spec: TrainSpec, seed: int, batches: list[dict[str, torch.Tensor]], group: int
              ) -> tuple[list[float], list[float], torch.nn.Module]:
    """A hand-written loop over pre-built batches; returns the time after k steps (k = 0..steps), the losses and
    the model."""
    from transformers import get_linear_schedule_with_warmup

    fit = spec.fit
    model = build_ranker(spec.ranker, seed).module
    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=fit.lr, eps=fit.eps,
                              weight_decay=fit.weight_decay, fused=True)
    sched = get_linear_schedule_with_warmup(optim, int(round(fit.warmup * fit.steps)), fit.steps)
    torch.manual_seed(seed)
    model.train()
    labels = torch.zeros((len(next(iter(batches[0].values()))) // group, group))
    labels[:, 0] = 1.0
    stamps, losses = [time.perf_counter()], []
    for batch in batches:
        if spec.ranker.ranker == "cross_encoder":
            logits = model(**batch).logits.view(-1, group)
        else:
            logits = model(batch["q"], batch["q_mask"], batch["d"], batch["d_mask"]).view(-1, group)
        loss = F.binary_cross_entropy_with_logits(logits, labels)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        optim.step()
        sched.step()
        losses.append(float(loss.detach()))
        stamps.append(time.perf_counter())
    return stamps, losses, model


def pipeline_loop(data: dict[str, pl.DataFrame], spec: TrainSpec, args: argparse.Namespace, folder: Path,
                  out: Path) -> tuple[float, float, pl.DataFrame]:
    """One ``train_ranker`` run: seconds of its steps ``skip + 1 .. steps - 1``, end-to-end seconds, dev curve."""
    stamps: dict[int, float] = {}
    t0 = time.perf_counter()
    curve = train_ranker(data, spec, args.seed, curriculum_dir=folder, model_out=out / "model",
                         checkpoint_dir=out / "ckpt", config_seed=CONFIG_SEED, progress=False,
                         on_step=lambda done: stamps.__setitem__(done, time.perf_counter()))
    wall = time.perf_counter() - t0
    return stamps[args.steps - 1] - stamps[args.skip], wall, curve


@dataclass
class Rounds:
    """What the interleaved rounds measured: each loop's best seconds over the timed steps, the pipeline's best
    end-to-end seconds, the last pipeline run's dev curve, the last bare run's losses and final model, and the 1-min
    load average before and after the rounds."""

    best: dict[str, float]
    wall: float
    curve: pl.DataFrame
    losses: list[float]
    model: torch.nn.Module
    load_before: float
    load_after: float


def parse_args() -> argparse.Namespace:
    """The command line: ranker, steps, layers, threads, data sizes, warm-up steps, seed, rounds; checks their
    ranges (exit code 2 with a usage message otherwise)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranker", default="cross_encoder", choices=["cross_encoder", "convknrm", "cnn_qa", "lstm_qa"])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--layers", type=int, default=2, help="keep the first N of MiniLM's 6 layers")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--train", type=int, default=400, help="chitchat train instances")
    ap.add_argument("--dev-queries", type=int, default=20, help="dev queries of the one dev evaluation")
    ap.add_argument("--skip", type=int, default=5, help="first steps left out of both loop timings (warm-up)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the best of each is kept")
    args = ap.parse_args()
    if not 1 <= args.skip < args.steps - 1 or args.repeat < 1:
        ap.error("need 1 <= --skip < steps - 1 and --repeat >= 1")
    return args


def load_chitchat(train: int, seed: int) -> dict[str, pl.DataFrame]:
    """The ingest tables of ``train`` chitchat train instances (50 dev, 10 test)."""
    d = chitchat.load({}, max_instances={"train": train, "dev": 50, "test": 10}, seed=seed, max_context_turns=10)
    return {name: df for name, (df, _) in d.tables().items()}


def write_random_curriculum(data: dict[str, pl.DataFrame], folder: Path, seed: int) -> None:
    """Writes the ``random`` curriculum of the train instances to ``folder``."""
    pairs = candidate_pairs(data)
    table = difficulty_table(pairs, data["queries"], data["docs"], ["random"], seed=seed)
    cur.write_curriculum(cur.curriculum_order(cur.training_instances(table, "random"), seed), folder, 100)


def print_setup(args: argparse.Namespace, data: dict[str, pl.DataFrame], spec: TrainSpec, folder: Path,
                batches: list[dict[str, torch.Tensor]], group: int, timed: int, threads: int) -> None:
    """Prints the data and batch sizes, the ranker, the steps timed and the torch threads and version."""
    widths = [next(iter(b.values())).shape[1] for b in batches]
    print(f"chitchat: {len(cur.Curriculum(folder))} train instances, {data['docs'].height} docs; batch "
          f"{spec.objective.batch_size} x (1 + {group - 1}) pairs, max_length {spec.ranker.max_length} (padded "
          f"width mean {np.mean(widths):.1f}); ranker {spec.ranker.ranker}, layers {spec.ranker.layers}; pacing "
          f"root_2; "
          f"{args.steps} steps, timed "
          f"{args.skip + 1}..{args.steps - 1} ({timed}); torch threads {threads}; torch {torch.__version__}")


def interleaved_rounds(data: dict[str, pl.DataFrame], spec: TrainSpec, args: argparse.Namespace, folder: Path,
                       root: Path, batches: list[dict[str, torch.Tensor]], group: int) -> Rounds:
    """``--repeat`` rounds of both loops, alternating which goes first; keeps each loop's best seconds over the
    timed steps and the pipeline's best end-to-end seconds."""
    best = {"pipeline": float("inf"), "bare": float("inf")}
    wall = float("inf")
    load_before = os.getloadavg()[0]
    for r in range(args.repeat):  # interleaved rounds, alternating which goes first; the best of each counts
        for name in ("pipeline", "bare") if r % 2 == 0 else ("bare", "pipeline"):
            if name == "pipeline":
                seconds, end_to_end, curve = pipeline_loop(data, spec, args, folder, root / f"run{r}")
                wall = min(wall, end_to_end)
            else:
                stamps, losses, model = bare_loop(spec, args.seed, batches, group)
                seconds = stamps[args.steps - 1] - stamps[args.skip]
            best[name] = min(best[name], seconds)
    load_after = os.getloadavg()[0]
    return Rounds(best, wall, curve, losses, model, load_before, load_after)


def dev_evaluation(featuriser, model: torch.nn.Module, data: dict[str, pl.DataFrame], spec: TrainSpec
                   ) -> tuple[pl.DataFrame, float, float]:
    """One dev evaluation (``ranker_metrics``) of the bare loop's final model: the dev pairs, the metric value and
    its seconds."""
    dev = dev_pairs(data, spec.evaluation.dev_queries, CONFIG_SEED, 1)
    t0 = time.perf_counter()
    featuriser.module = model  # the bare loop's final model behind the ranker interface
    metric = spec.evaluation.eval_metric
    value = ranker_metrics(featuriser, dev, data["qrels"], [metric], batch_size=spec.evaluation.score_batch_size,
                           device=torch.device("cpu"), precision=spec.runtime.precision)[metric]
    eval_s = time.perf_counter() - t0
    return dev, value, eval_s


def print_results(args: argparse.Namespace, rounds: Rounds, timed: int, sample_s: float, tok_s: float,
                  dev: pl.DataFrame, value: float, eval_s: float) -> None:
    """Prints the load average, steps/s and ms/step of both loops and their ratio, the per-step overhead measured
    apart (ms), the dev evaluation (s), the pipeline's end-to-end seconds and both loops' mean train loss."""
    pipe_sps, bare_sps = timed / rounds.best["pipeline"], timed / rounds.best["bare"]
    print(f"1-min load average before/after: {rounds.load_before:.2f}/{rounds.load_after:.2f} on {os.cpu_count()} "
          f"cores (other processes make wall times noisy); best of {args.repeat} interleaved round(s)")
    print(f"{'variant':<58}{'steps/s':>9}{'ms/step':>9}")
    print(f"{'pipeline train_ranker loop (sample+tokenise+train)':<58}{pipe_sps:>9.2f}{1e3 / pipe_sps:>9.1f}")
    print(f"{'bare torch loop over pre-built batches (train only)':<58}{bare_sps:>9.2f}{1e3 / bare_sps:>9.1f}")
    print(f"ratio pipeline / bare: {pipe_sps / bare_sps:.2f}x the throughput "
          f"({bare_sps / pipe_sps:.2f}x the time per step)")
    print(f"pipeline per-step overhead measured apart: sampling {sample_s * 1e3:.2f} ms + tokenise/collate "
          f"{tok_s * 1e3:.2f} ms = {(sample_s + tok_s) * 1e3:.2f} ms; loop time difference "
          f"{1e3 / pipe_sps - 1e3 / bare_sps:.2f} ms/step")
    print(f"one dev evaluation ({dev.height} pairs of {dev['qid'].n_unique()} queries, excluded above): "
          f"{eval_s:.2f} s (AP {value:.4f} with the bare loop's final model)")
    print(f"pipeline end to end (setup, model load, {args.steps} steps, dev evaluation, save): {rounds.wall:.2f} s")
    pipe_loss, bare_loss = rounds.curve["train_loss"][-1], float(np.mean(rounds.losses))
    print(f"mean train loss over all steps: pipeline {pipe_loss:.6f}, bare {bare_loss:.6f}, |difference| "
          f"{abs(pipe_loss - bare_loss):.1e} (0 or rounding when both trained on the same batches)")


def main() -> None:
    """Builds the data, curriculum and the bare loop's batches, times both loops in interleaved rounds, then one dev
    evaluation; prints the results."""
    args = parse_args()
    threads = set_threads(args.threads)
    data = load_chitchat(args.train, args.seed)
    spec = make_spec(args)
    featuriser = build_ranker(spec.ranker, args.seed)  # its encode/collate build the bare loop's batches
    group = 1 + spec.arm.negatives.m
    timed = args.steps - 1 - args.skip  # steps skip+1 .. steps-1 (1-based); the last one also evaluates dev

    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        root = Path(tmp)
        folder = root / "random"
        write_random_curriculum(data, folder, args.seed)
        batches, sample_s, tok_s = build_batches(data, spec, folder, args.seed, featuriser)
        print_setup(args, data, spec, folder, batches, group, timed, threads)
        rounds = interleaved_rounds(data, spec, args, folder, root, batches, group)
        dev, value, eval_s = dev_evaluation(featuriser, rounds.model, data, spec)
    print_results(args, rounds, timed, sample_s, tok_s, dev, value, eval_s)


if __name__ == "__main__":
    main()

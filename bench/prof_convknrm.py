"""Profile one ConvKNRM training step of the default config, component by component (torch threads: --threads).

Reads the ingest tables and the ``random`` curriculum of a scratch workflow run (``--root``, built with
``snakemake ... -- results/chitchat/curricula/random``), builds the baseline spec from config.yaml as the Snakefile
does, then pins what the measurement needs whatever config.yaml says now (600-step schedule, no early stopping,
trainable embeddings unless ``--freeze``). Times, per step, averaged over ``--steps`` steps after ``--skip`` warm-up
steps:

* sample: curriculum + negative sampling (train.py's step_loss before the ranker is called);
* encode: ``ranker.encode`` (tokenisation, truncation);  collate: padding to tensors;
* forward (+ loss), backward, optimiser step (fused Adam, as fit() uses), zero_grad;
* one dev evaluation (``score_pair_frame`` + ir-measures) on ``--dev-queries`` dev queries x 10 candidates, after
  the timed steps.

    .venv/bin/python bench/prof_convknrm.py --root /tmp/prof [--freeze] [--steps 60] [--code /copy/of/old/code] \
        [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

if __name__ == "__main__" and "--code" in sys.argv:  # import curricula from another copy of the code (A/B)
    sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1])

import numpy as np  # noqa: E402
import torch  # noqa: E402

from curricula.curriculum.negatives import NegativeSampler  # noqa: E402
from curricula.curriculum.ordering import Curriculum, CurriculumSampler  # noqa: E402
from curricula.data.ingest import read_ingest  # noqa: E402
from curricula.evaluation.metrics import mean_metrics  # noqa: E402
from curricula.experiments.spec import TrainSpec, parse_train_spec, spec_params  # noqa: E402
from curricula.experiments.specs import experiment_specs  # noqa: E402
from curricula.experiments.train import dev_pairs  # noqa: E402
from curricula.models import build_ranker, score_pair_frame  # noqa: E402
from curricula.models.runtime import set_threads  # noqa: E402
from curricula.plumbing.config import load_config  # noqa: E402
from curricula.training.core import FitConfig, make_optimizer  # noqa: E402
from curricula.training.losses import element_losses, weighted_mean  # noqa: E402

if TYPE_CHECKING:
    import polars as pl

    from curricula.models.base import Ranker


def baseline_spec(freeze: bool, steps: int | None = None, dev_queries: int | None = 100) -> tuple[TrainSpec, dict]:
    config = load_config(REPO / "config.yaml")
    spec = experiment_specs(config)["baseline"]
    # pinned, whatever config.yaml says now: 600 steps, 100 dev queries, trainable embeddings unless ``freeze``
    # (parsed again, so the curriculum is resolved against the pinned length)
    pinned = {"device": "cpu", "steps": steps or 600, "max_steps": steps or 600, "patience": 0,
              "dev_queries": dev_queries, "architecture": {**spec.ranker.arch(), "freeze_embeddings": freeze}}
    return parse_train_spec({**spec_params(spec), **pinned}), config


def load_data(root: Path) -> dict:
    base = root / "results" / "chitchat"
    return read_ingest({n: base / "data" / f"{n}.parquet" for n in ("queries", "docs", "qrels", "candidates")})


STEP_PARTS = ("sample", "encode", "collate", "forward", "backward", "optim", "zero_grad")


@dataclass
class Training:
    """One ConvKNRM training set-up of the baseline spec: its batch samplers and texts, the ranker, its optimiser."""

    spec: TrainSpec
    sampler: CurriculumSampler
    negs: NegativeSampler
    context_of: dict[str, str]
    doc_texts: list[str]
    ranker: Ranker
    optim: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    device: torch.device


def parse_args() -> argparse.Namespace:
    """The command line: the scratch run, frozen embeddings or not, step and evaluation counts, seed, code, threads."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/prof")
    ap.add_argument("--freeze", action="store_true")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--evals", type=int, default=3)
    ap.add_argument("--dev-queries", type=int, default=100, help="dev queries scored per evaluation (0 = all)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--code", default=str(REPO), help="import curricula from this folder (A/B runs)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (the default run's jobs use 1; 2 measures one job on both cores)")
    return ap.parse_args()


def set_up(args: argparse.Namespace) -> tuple[Training, dict, pl.DataFrame]:
    """The training set-up (ranker in train mode), the run's ingest tables and the dev pairs, built as fit() does."""
    spec, config = baseline_spec(args.freeze, dev_queries=args.dev_queries or None)
    set_threads(args.threads)
    data = load_data(Path(args.root))
    device = torch.device("cpu")
    arm = spec.arm
    sampler = CurriculumSampler(Curriculum(Path(args.root) / "results/chitchat/curricula/random"), arm.pacing,
                                spec.objective.batch_size, args.seed)
    negs = NegativeSampler(arm.negatives, queries=data["queries"], docs=data["docs"], qrels=data["qrels"],
                           candidates=data["candidates"], seed=args.seed)
    context_of = dict(zip(data["queries"]["qid"].to_list(), data["queries"]["text"].to_list()))
    doc_texts = data["docs"]["text"].to_list()
    dev = dev_pairs(data, spec.evaluation.dev_queries, config["pipeline_seed"], 1)
    ranker = build_ranker(spec.ranker, args.seed).to(device)
    optim, sched = make_optimizer(ranker.module.parameters(), FitConfig.of(spec.fit))
    ranker.train()
    return Training(spec, sampler, negs, context_of, doc_texts, ranker, optim, sched, device), data, dev


def train_step(tr: Training, step: int) -> tuple[float, ...]:
    """One training step; the ``time.perf_counter()`` stamps (s) before sampling, encode, collate, forward (+ loss),
    zero_grad, backward and the optimiser step, and after it."""
    t0 = time.perf_counter()
    batch = tr.sampler.batch(step)
    qids = batch["qid"].to_list()
    pos = np.array([tr.negs.code_of[d] for d in batch["docid"].to_list()], dtype=np.int64)
    group = np.concatenate([pos[:, None], tr.negs.sample(qids, step)], axis=1)
    contexts = [tr.context_of[q] for q in qids for _ in range(group.shape[1])]
    responses = [tr.doc_texts[c] for c in group.reshape(-1)]
    t1 = time.perf_counter()
    items = tr.ranker.encode(contexts, responses)
    t2 = time.perf_counter()
    coll = tr.ranker.collate(items)
    t3 = time.perf_counter()
    logits = tr.ranker.logits(coll, tr.device, tr.spec.runtime.precision)
    objective = tr.spec.objective
    loss = weighted_mean(element_losses(objective.loss, logits.view(group.shape), objective.margin), None)
    t4 = time.perf_counter()
    tr.optim.zero_grad(set_to_none=True)
    t5 = time.perf_counter()
    loss.backward()
    t6 = time.perf_counter()
    tr.optim.step()
    tr.sched.step()
    t7 = time.perf_counter()
    return t0, t1, t2, t3, t4, t5, t6, t7


def step_timings(tr: Training, skip: int, steps: int) -> dict[str, float]:
    """Seconds spent in each part of a step (``STEP_PARTS``), summed over ``steps`` steps after ``skip`` warm-up
    steps."""
    t = {k: 0.0 for k in STEP_PARTS}
    for step in range(skip + steps):
        if step == skip:
            t = {k: 0.0 for k in t}
        t0, t1, t2, t3, t4, t5, t6, t7 = train_step(tr, step)
        for k, a, b in (("sample", t0, t1), ("encode", t1, t2), ("collate", t2, t3), ("forward", t3, t4),
                        ("zero_grad", t4, t5), ("backward", t5, t6), ("optim", t6, t7)):
            t[k] += b - a
    return t


def print_step_table(t: dict[str, float], steps: int, freeze: bool) -> None:
    """Prints each part's mean milliseconds per step, and their total."""
    per = {k: 1000 * v / steps for k, v in t.items()}
    print(f"freeze_embeddings={freeze} threads={torch.get_num_threads()} per step (ms), mean of {steps}:")
    for k, v in per.items():
        print(f"  {k:10s} {v:8.2f}")
    print(f"  {'TOTAL':10s} {sum(per.values()):8.2f}")


def eval_timings(tr: Training, data: dict, dev: pl.DataFrame, evals: int) -> dict[str, float]:
    """Seconds of ``evals`` dev evaluations, summed: encoding alone, ``score_pair_frame`` (encoding included) and
    the metric; puts the ranker back in train mode."""
    spec = tr.spec
    ev = {"score_pair_frame": 0.0, "metric": 0.0, "encode": 0.0}
    for _ in range(evals):
        t0 = time.perf_counter()
        tr.ranker.encode(dev["context"].to_list(), dev["response"].to_list())
        t1 = time.perf_counter()
        run = score_pair_frame(tr.ranker, dev, batch_size=spec.evaluation.score_batch_size, device=tr.device,
                               precision=spec.runtime.precision, progress=False)
        t2 = time.perf_counter()
        mean_metrics(run, data["qrels"].filter(data["qrels"]["qid"].is_in(dev["qid"].unique().implode())),
                     [spec.evaluation.eval_metric], 1)
        t3 = time.perf_counter()
        ev["encode"] += t1 - t0
        ev["score_pair_frame"] += t2 - t1
        ev["metric"] += t3 - t2
    tr.ranker.train()
    return ev


def print_eval_table(ev: dict[str, float], dev: pl.DataFrame, score_batch_size: int, evals: int) -> None:
    """Prints each part's mean seconds per dev evaluation."""
    print(f"dev evaluation ({dev.height} pairs, score_batch_size {score_batch_size}), s per "
          f"evaluation:")
    for k, v in ev.items():
        print(f"  {k:18s} {v / evals:8.3f}" + ("   (encode alone, included in score_pair_frame)"
                                               if k == "encode" else ""))


def main() -> None:
    """Times ``--steps`` training steps part by part after ``--skip`` warm-up steps, then ``--evals`` dev
    evaluations; prints both tables."""
    args = parse_args()
    tr, data, dev = set_up(args)
    print_step_table(step_timings(tr, args.skip, args.steps), args.steps, args.freeze)
    ev = eval_timings(tr, data, dev, args.evals)
    print_eval_table(ev, dev, tr.spec.evaluation.score_batch_size, args.evals)


if __name__ == "__main__":
    main()

"""Cross-encoder training: this project's loop against sentence-transformers' own, same model, same batches.

Both loops fine-tune the same cut of the packaged MiniLM (``--layers``, ``--pooling``; by default the 4-layer
mean-pooled model of ``configs/cross_encoder.yaml``) from the same seed on the same balanced batches of real
chitchat train pairs. The batches are the project's :func:`curricula.models.teacher.balanced_batches`, handed to
sentence-transformers' ``CrossEncoderTrainer`` in order through a sequential batch sampler. Same batch size, max
length, learning rate, linear warm-up (10%) and decay, AdamW without weight decay (fused in both: the Trainer's
default ``adamw_torch_fused``), binary cross-entropy on the logit. Per ``--precision`` (``auto`` is bf16 on a CPU
with bf16 instructions for both, the Trainer's ``bf16=True``) it prints each loop's wall time for building the
model and running ``--steps`` steps, steps/s, the mean loss of the first and last 20 steps, the dev AP both
models reach on the same ``--dev-queries`` dev queries (trec_eval AP through ir-measures), and the throughput
ratio project / peer. Each loop first runs ``--warmup`` untimed steps, so neither pays the process's one-time
costs (imports, oneDNN kernel selection) inside its timing. Differences left in on purpose, as each library does
them: the project cuts a long pair by keeping the context's latest word pieces, sentence-transformers cuts the
longer side's end; the peer clips gradients at norm 1 (its default), the project does not.

    .venv/bin/python bench/bench_cross_encoder.py --root <a finished run> [--steps 300] [--layers 4]
        [--pooling mean] [--precision fp32 auto] [--threads 2]

Needs ``accelerate`` beside sentence-transformers (the Trainer imports it; ``pip install accelerate==1.15.0``);
it is not a pipeline dependency.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

    from curricula.models.teacher import TeacherConfig


class SequentialBatches:
    """A batch sampler yielding consecutive index blocks: the peer sees the dataset's rows in the given order."""

    def __init__(self, dataset, batch_size: int, drop_last: bool = False, **_):
        self.n, self.batch_size = len(dataset), batch_size

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)

    def __iter__(self):
        for start in range(0, self.n, self.batch_size):
            yield list(range(start, min(start + self.batch_size, self.n)))

    def set_epoch(self, epoch: int) -> None:  # the Trainer calls it on samplers that have it
        pass


def peer_model(layers: int | None, pooling: str, max_length: int, seed: int):
    """sentence-transformers' CrossEncoder on the packaged MiniLM: its default [CLS] sequence classifier, or
    Transformer -> Pooling(mean) -> Dense(d, 1) -> scores for mean pooling."""
    import torch
    from sentence_transformers import CrossEncoder
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from curricula.models.hf import resolve_model_dir

    path = str(resolve_model_dir("minilm"))
    config = {} if layers is None else {"num_hidden_layers": layers}
    torch.manual_seed(seed)
    if pooling == "cls":
        return CrossEncoder(path, num_labels=1, max_length=max_length, local_files_only=True, device="cpu",
                            config_kwargs=config)
    encoder = Transformer(path, transformer_task="feature-extraction", config_kwargs=config,
                          model_kwargs={"local_files_only": True}, processor_kwargs={"model_max_length": max_length})
    dim = encoder.get_embedding_dimension()
    head = Dense(dim, 1, activation_function=None, module_output_name="scores")
    return CrossEncoder(modules=[encoder, Pooling(dim, "mean"), head], device="cpu")


def train_peer(model, contexts, responses, labels, order, args, bf16: bool) -> list[float]:
    """One epoch over the rows of ``order`` in order, ``args.batch_size`` per step; returns the logged losses."""
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    data = Dataset.from_dict({"context": [contexts[i] for i in order], "response": [responses[i] for i in order],
                              "label": [float(labels[i] > 0) for i in order]})
    targs = CrossEncoderTrainingArguments(
        output_dir=str(Path(args.scratch) / "peer"), per_device_train_batch_size=args.batch_size,
        max_steps=args.steps, learning_rate=args.lr, warmup_ratio=0.1, lr_scheduler_type="linear", weight_decay=0.0,
        bf16=bf16, use_cpu=True, seed=args.seed, report_to="none", save_strategy="no", logging_steps=1,
        disable_tqdm=True, dataloader_num_workers=0, batch_sampler=SequentialBatches)
    trainer = CrossEncoderTrainer(model=model, args=targs, train_dataset=data, loss=BinaryCrossEntropyLoss(model))
    trainer.train()
    return [row["loss"] for row in trainer.state.log_history if "loss" in row]


Row = tuple[str, str, bool, float, list[float], float]  # loop, precision, bf16, seconds, losses, dev AP


@dataclass
class Inputs:
    """What both loops train and are scored on: the run's ingest tables, the train texts and labels, the dev pairs
    and the row order of the balanced batches (``steps * batch_size`` rows)."""

    data: dict[str, pl.DataFrame]
    contexts: list[str]
    responses: list[str]
    labels: np.ndarray
    dev: pl.DataFrame
    order: np.ndarray


def parse_args() -> argparse.Namespace:
    """The command line: the run to read, the model cut, the training settings, the precisions and warm-up steps."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, help="a finished run's folder (results/chitchat/data in it)")
    ap.add_argument("--dataset", default="chitchat")
    ap.add_argument("--layers", type=int, default=4, help="0 = all layers (default: the preset's 4)")
    ap.add_argument("--pooling", choices=["cls", "mean"], default="mean")
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", nargs="+", default=["fp32", "auto"])
    ap.add_argument("--dev-queries", type=int, default=500)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps of each loop before the timed runs")
    ap.add_argument("--scratch", default="/tmp/bench_cross_encoder")
    return ap.parse_args()


def read_inputs(args: argparse.Namespace) -> Inputs:
    """The run's train pairs, ``--dev-queries`` dev queries and the balanced batches of ``--steps`` steps."""
    import numpy as np

    from curricula.data.ingest import INGEST_TABLES, candidate_pairs, read_ingest
    from curricula.experiments.train import dev_pairs
    from curricula.models.teacher import balanced_batches, training_texts
    from curricula.plumbing.layout import Layout

    layout = Layout(dataset=args.dataset)
    data = read_ingest({n: Path(args.root, layout.data(n)) for n in INGEST_TABLES})
    contexts, responses, labels = training_texts(candidate_pairs(data, splits=("train",)))
    dev = dev_pairs(data, args.dev_queries, args.seed, 1)
    order = np.concatenate(list(balanced_batches(labels, args.steps, args.batch_size,
                                                 np.random.default_rng(args.seed))))
    return Inputs(data, contexts, responses, labels, dev, order)


def print_setup(args: argparse.Namespace, inputs: Inputs, layers: int | None) -> None:
    """Prints the data sizes, the model cut, the training settings and whether the CPU has bf16 instructions."""
    import torch

    from curricula.models.hf import autocast_dtype

    print(f"{len(inputs.contexts)} train pairs, {inputs.dev['qid'].n_unique()} dev queries; MiniLM {layers or 'all'} "
          f"layers, {args.pooling} pooling, length {args.max_length}, batch {args.batch_size}, lr {args.lr}, "
          f"{args.steps} steps, {args.threads} threads; CPU bf16 instructions: "
          f"{autocast_dtype(torch.device('cpu'), 'auto', transformer=True) == torch.bfloat16}")


def warm_up(args: argparse.Namespace, inputs: Inputs, base: TeacherConfig, layers: int | None) -> None:
    """Runs ``--warmup`` untimed steps of the project's loop, then of the peer's (fp32), so neither timed run pays
    the process's one-time costs."""
    from curricula.models.runtime import start_job
    from curricula.models.teacher import train_cross_encoder

    warm = argparse.Namespace(**{**vars(args), "steps": args.warmup})
    train_cross_encoder(inputs.contexts, inputs.responses, inputs.labels, replace(base, steps=args.warmup),
                        start_job(base.runtime, True, "warm-up"), progress=False)
    train_peer(peer_model(layers, args.pooling, args.max_length, args.seed), inputs.contexts, inputs.responses,
               inputs.labels, inputs.order[: args.warmup * args.batch_size], warm, False)


def project_row(inputs: Inputs, base: TeacherConfig, precision: str, bf16: bool) -> Row:
    """The project's loop at ``precision``: wall seconds of building the model and training (timed), its losses
    and the dev AP it reaches (not timed)."""
    import torch

    from curricula.evaluation.rerank import ranker_metrics
    from curricula.models.runtime import start_job
    from curricula.models.teacher import train_cross_encoder

    cfg = replace(base, precision=precision)
    t0 = time.perf_counter()
    ranker, losses = train_cross_encoder(inputs.contexts, inputs.responses, inputs.labels, cfg,
                                         start_job(cfg.runtime, True, "training"), progress=False)
    seconds = time.perf_counter() - t0
    ap_dev = ranker_metrics(ranker, inputs.dev, inputs.data["qrels"], ["AP"], batch_size=128,
                            device=torch.device("cpu"), precision=precision)["AP"]
    return ("project", precision, bf16, seconds, losses, ap_dev)


def peer_row(args: argparse.Namespace, inputs: Inputs, layers: int | None, precision: str, bf16: bool) -> Row:
    """sentence-transformers' loop on the same batches: wall seconds of building the model and training (timed),
    its logged losses and the dev AP it reaches (not timed)."""
    import numpy as np
    import polars as pl
    import torch

    from curricula.evaluation.metrics import mean_metrics

    dev = inputs.dev
    t0 = time.perf_counter()
    peer = peer_model(layers, args.pooling, args.max_length, args.seed)
    peer_losses = train_peer(peer, inputs.contexts, inputs.responses, inputs.labels, inputs.order, args, bf16)
    seconds = time.perf_counter() - t0
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        scores = peer.predict(list(zip(dev["context"].to_list(), dev["response"].to_list())), batch_size=128,
                              activation_fn=torch.nn.Identity(), show_progress_bar=False)
    run = dev.select("qid", "docid").with_columns(score=pl.Series(np.asarray(scores, dtype=np.float64)))
    qrels = inputs.data["qrels"].filter(pl.col("qid").is_in(dev["qid"].unique().implode()))
    return ("sentence-transformers", precision, bf16, seconds, peer_losses, mean_metrics(run, qrels, ["AP"])["AP"])


def print_table(rows: list[Row], steps: int) -> None:
    """Prints a Markdown row per loop and precision (seconds, steps/s, mean loss of the first and last 20 steps,
    dev AP), then the throughput ratio project / peer per precision."""
    import numpy as np

    print("\n| loop | precision | seconds | steps/s | loss first 20 | loss last 20 | dev AP |")
    print("|---|---|---|---|---|---|---|")
    for loop, precision, bf16, seconds, losses, ap_dev in rows:
        print(f"| {loop} | {precision} ({'bf16' if bf16 else 'fp32'}) | {seconds:.1f} | {steps / seconds:.2f} | "
              f"{np.mean(losses[:20]):.4f} | {np.mean(losses[-20:]):.4f} | {ap_dev:.4f} |")
    for i in range(0, len(rows), 2):
        ours, peer = rows[i], rows[i + 1]
        print(f"{ours[1]}: project / sentence-transformers throughput = {peer[3] / ours[3]:.2f}x")


def main() -> None:
    """Both loops per ``--precision``, the project's first, after the untimed warm-up; prints the table."""
    args = parse_args()

    import torch

    from curricula.models.hf import autocast_dtype
    from curricula.models.runtime import set_threads
    from curricula.models.teacher import TeacherConfig

    inputs = read_inputs(args)
    layers = args.layers or None
    set_threads(args.threads)
    print_setup(args, inputs, layers)
    base = TeacherConfig(layers=layers, pooling=args.pooling, max_length=args.max_length, steps=args.steps,
                         batch_size=args.batch_size, lr=args.lr, warmup=0.1, seed=args.seed, device="cpu",
                         threads=args.threads)
    if args.warmup:
        warm_up(args, inputs, base, layers)
    rows: list[Row] = []
    for precision in args.precision:
        bf16 = autocast_dtype(torch.device("cpu"), precision, transformer=True) == torch.bfloat16
        rows.append(project_row(inputs, base, precision, bf16))
        rows.append(peer_row(args, inputs, layers, precision, bf16))
    print_table(rows, args.steps)


if __name__ == "__main__":
    main()

"""Fine-tune the packaged MiniLM with sentence-transformers' ``CrossEncoderTrainer`` on a curriculum of a finished run:
the run's training instances in the order and pace of its curriculum, its negatives, its loss and (for MacAvaney's
arms) its loss weights; then its test AP on the run's test candidates beside the run's own ranker's and BM25's.

    make run                                        # the default run: results/chitchat
    .venv/bin/pip install accelerate==1.15.0        # the trainer needs it (or: pip install -e '.[trainer]')
    .venv/bin/python docs/examples/ecosystem_sentence_transformers.py [--root results/chitchat]
        [--experiment penha_bert_pred_root2] [--seed 1] [--steps N] [--layers 4] [--lr 2e-4] [--out DIR]

The model starts as the pipeline's cross-encoder (``--layers`` of the packaged MiniLM, mean-pooled, the run's
``max_length``), saved as the pipeline saves one, so the trainer cuts pairs as the pipeline does; the trained folder
loads back in the pipeline (``curricula.models.load_ranker``) and in PyTerrier
(``curricula.ecosystem.pyterrier.RankerTransformer``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def start_model(run, layers: int, out: Path):
    """sentence-transformers' CrossEncoder on the pipeline's new cross-encoder: ``layers`` of the packaged MiniLM,
    mean-pooled, the run's pair budget, seeded with the run's seed."""
    from sentence_transformers import CrossEncoder

    from curricula.models import build_ranker
    from curricula.training.spec import RankerSpec

    spec = RankerSpec(ranker="cross_encoder", model="minilm", layers=layers, pooling="mean",
                      max_length=run.spec.ranker.max_length)
    build_ranker(spec, run.seed).save(out)
    return CrossEncoder(str(out), device="cpu", local_files_only=True)


def same_batches(trainer, run, dataset) -> bool:
    """Whether the trainer's batches of one epoch are the pipeline's own curriculum batches, in order."""
    from curricula.curriculum.ordering import CurriculumSampler

    sampler = CurriculumSampler(run.curriculum(), run.arm.pacing, run.spec.objective.batch_size, run.seed)
    ours = [list(zip(b["query"], b["positive"])) for b in trainer.get_train_dataloader()]
    theirs = [[(dataset[i]["query"], dataset[i]["positive"]) for i in sampler.positions(s).tolist()]
              for s in range(len(ours))]
    return ours == theirs


def test_ap(root: str, folder: Path, max_length: int) -> float:
    """The trained folder's test AP on the run's test candidates, as the evaluate stage computes it."""
    import polars as pl

    from curricula.data.ingest import candidate_pairs
    from curricula.ecosystem.frames import read_data
    from curricula.evaluation.rerank import evaluate_run, mean_table, ranked
    from curricula.models import load_ranker, score_pair_frame

    data = read_data(root)
    pairs = candidate_pairs(data, splits=("test",))
    scores = score_pair_frame(load_ranker(folder, device="cpu", max_length=max_length), pairs, batch_size=128,
                              precision="fp32", progress=False)
    qrels = data["qrels"].filter(pl.col("qid").is_in(pairs["qid"].unique().implode()))
    return mean_table(evaluate_run(ranked(scores), qrels, ["AP"]))["AP"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="results/chitchat", help="a finished run's dataset folder")
    ap.add_argument("--experiment", default="penha_bert_pred_root2")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, help="optimiser steps (default: the run's curriculum length)")
    ap.add_argument("--layers", type=int, default=4, help="layers of the packaged MiniLM (the teacher's 4)")
    ap.add_argument("--lr", type=float, default=2e-4, help="the mean-pooled MiniLM cut's rate (docs/rankers.md)")
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "st_curriculum"),
                    help="the folder of the start and trained models (default: st_curriculum in the temp folder)")
    args = ap.parse_args()

    import polars as pl
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments

    from curricula.ecosystem.curriculum_data import instance_dataset, run_curriculum
    from curricula.ecosystem.sentence_transformers import CurriculumLoss, run_batch_sampler
    from curricula.plumbing.layout import Layout

    run = run_curriculum(args.root, args.experiment, args.seed)
    dataset = instance_dataset(run)
    out = Path(args.out)
    model = start_model(run, args.layers, out / "start")
    loss = CurriculumLoss(model, run.spec.objective.loss, run.arm.weighting, run.spec.objective.margin)
    steps = args.steps or run.arm.length
    targs = CrossEncoderTrainingArguments(
        output_dir=str(out / "trainer"), per_device_train_batch_size=run.spec.objective.batch_size, max_steps=steps,
        learning_rate=args.lr, warmup_steps=0.1, seed=run.seed, batch_sampler=run_batch_sampler(run),
        use_cpu=True, report_to="none", save_strategy="no", logging_steps=max(1, steps // 5), disable_tqdm=True,
        dataloader_num_workers=0)
    trainer = CrossEncoderTrainer(model=model, args=targs, train_dataset=dataset, loss=loss,
                                  callbacks=[loss.step_callback()])
    print(f"{args.experiment} seed {args.seed} of {args.root}: {len(dataset)} instances ordered by "
          f"{run.arm.scoring}, pacing {run.arm.pacing.name} ({run.arm.pacing.mode}), negatives "
          f"{run.arm.negatives.mode} x {run.arm.negatives.m}, loss {loss.loss}, weighting "
          f"{run.arm.weighting and run.arm.weighting.scoring}; {steps} steps of {run.spec.objective.batch_size}")
    print(f"the trainer draws the pipeline's own curriculum batches, in order: {same_batches(trainer, run, dataset)}")
    trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    print("training loss every", targs.logging_steps, "steps:", " ".join(f"{x:.4f}" for x in losses))
    model.save(str(out / "model"))
    print(f"the trained model: {out / 'model'} (curricula.models.load_ranker reads it with max_length="
          f"{run.spec.ranker.max_length})")
    layout = Layout.at(args.root)
    own = pl.read_parquet(layout.evaluate(args.experiment, args.seed)["metrics"]).filter(pl.col("measure") == "AP")
    bm25 = pl.read_parquet(layout.reference("bm25")["metrics"]).filter(pl.col("measure") == "AP")
    print(f"test AP: MiniLM fine-tuned here {test_ap(args.root, out / 'model', run.spec.ranker.max_length):.4f}, "
          f"the run's own {run.spec.ranker.ranker} {own['value'].mean():.4f}, BM25 {bm25['value'].mean():.4f}")


if __name__ == "__main__":
    main()

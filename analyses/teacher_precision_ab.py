"""Does precision ``auto`` (bf16 on a CPU with bf16 instructions) change the teacher? An A/B on a finished run.

Trains the teacher again in fp32 with the run's ``teacher`` config (same seed, same train pairs), scores every
train and test candidate with it in fp32, and compares with the run's own ``teacher/scores.parquet`` (trained and
scored with ``precision: auto``): test AP / P@1 of each, the Spearman correlation of their train-pair logits, and
of Penha & Hauff's BERT_pred difficulty per training query (the order of the ``bert_pred`` curriculum), plus both
teachers' wall times. The run directory must hold results/<dataset>/data and teacher/scores.parquet.

    .venv/bin/python analyses/teacher_precision_ab.py --root /tmp/run18 [--config config.yaml]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scipy.stats import spearmanr  # noqa: E402

from curricula.data.ingest import INGEST_TABLES, candidate_pairs, read_ingest  # noqa: E402
from curricula.difficulty.penha import bert_pred  # noqa: E402
from curricula.evaluation.metrics import split_metrics  # noqa: E402
from curricula.models.runtime import start_job  # noqa: E402
from curricula.models.teacher import score_with_model, teacher_config, train_teacher  # noqa: E402
from curricula.plumbing.config import load_config  # noqa: E402
from curricula.plumbing.contracts import TEACHER_SCORES, read_table  # noqa: E402
from curricula.plumbing.layout import Layout  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--config", default=str(REPO / "config.yaml"))
    args = ap.parse_args()
    config = load_config(args.config)
    layout = Layout.of(config)
    data = read_ingest({n: Path(args.root, layout.data(n)) for n in INGEST_TABLES})
    auto = read_table(Path(args.root, layout.teacher()["scores"]), TEACHER_SCORES)
    cfg = teacher_config({**config["teacher"], "precision": "fp32"}, config["pipeline_seed"])
    if cfg.folds > 1:
        sys.exit("teacher.folds > 1 cross-fits the train scores; this A/B compares one teacher's, set folds to 1")
    rmin = config["dataset"]["relevant_min"]
    train = candidate_pairs(data, splits=("train",), relevant_min=rmin)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        runtime = start_job(cfg.runtime, True, "teacher")
        stats = train_teacher(train, cfg, Path(tmp) / "model", runtime, progress=False)
        t1 = time.time()
        scored = candidate_pairs(data, splits=("train", "test"), relevant_min=rmin)
        fp32 = score_with_model(Path(tmp) / "model", scored, cfg, runtime, progress=False)
        t2 = time.time()
    print(f"fp32 teacher: trained {t1 - t0:.0f} s (final loss {stats['final_loss']:.4f}), scored {scored.height} "
          f"pairs in {t2 - t1:.0f} s")
    measures = ["AP", "P@1"]
    for name, scores in (("fp32", fp32), ("auto", auto)):
        m = split_metrics(scores.select("qid", "docid", "score"), data["queries"], data["qrels"], "test", measures,
                          rmin)
        print(f"  {name} teacher on test: " + ", ".join(f"{k} {v:.4f}" for k, v in m.items()))
    joined = fp32.join(auto, on=["qid", "docid"], suffix="_auto")
    train_rows = joined.join(train.select("qid", "docid"), on=["qid", "docid"])
    rho = spearmanr(train_rows['score'], train_rows['score_auto']).statistic
    print(f"  Spearman of train-pair logits, fp32 vs auto: {rho:.4f}"
          f" ({train_rows.height} pairs)")
    pairs = train.select("qid", "docid", "rel")
    a = bert_pred(pairs, fp32).rename({"bert_pred_raw": "fp32"})
    b = bert_pred(pairs, auto).rename({"bert_pred_raw": "auto"})
    d = a.join(b, on="qid")
    print(f"  Spearman of BERT_pred difficulty per training query (the bert_pred curriculum's order): "
          f"{spearmanr(d['fp32'], d['auto']).statistic:.4f} ({d.height} queries)")


if __name__ == "__main__":
    main()

"""How much another teacher changes Penha's BERT_pred order (issue 32: is a cheaper teacher "close"?).

Trains a teacher on a finished run's ingest tables (``--root``: ``results/<dataset>``) with the config's ``teacher``
section, a seed (``--seed``) and optional overrides (``--layers``, ``--pooling``, ``--lr``), scores the candidates as
the pipeline does (:mod:`curricula.stages.teacher`: ``teacher_train``, ``teacher_score_shard``), computes BERT_pred
(Penha Table 2) on the training queries and prints its Spearman correlation with the run's own
``difficulty/functions/bert_pred.parquet`` and with any other BERT_pred tables given (``--compare``). A second seed
of the run's own teacher gives the reference: how much the order moves when only the teacher's seed does.

    .venv/bin/python analyses/teacher_agreement.py --root <run>/results/chitchat --seed 43 --out /tmp/teacher43 \\
        [--layers 4 --pooling mean --lr 2e-4] [--compare other/difficulty/functions/bert_pred.parquet ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl
from scipy.stats import spearmanr

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from curricula.data.ingest import INGEST_TABLES, candidate_pairs, read_ingest  # noqa: E402
from curricula.difficulty.penha import bert_pred  # noqa: E402
from curricula.plumbing.config import load_config  # noqa: E402
from curricula.plumbing.layout import Layout  # noqa: E402
from curricula.stages.teacher import teacher_score_shard, teacher_train  # noqa: E402


def per_query(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path).group_by("qid").agg(pl.col("bert_pred_raw").first())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, required=True, help="a finished run's results/<dataset> folder")
    ap.add_argument("--config", type=Path, default=REPO / "config.yaml")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--pooling", choices=["cls", "mean"])
    ap.add_argument("--lr", type=float)
    ap.add_argument("--threads", type=int, help="torch threads (default: the config's teacher.threads)")
    ap.add_argument("--out", type=Path, required=True, help="folder for the teacher and its scores (reused)")
    ap.add_argument("--compare", type=Path, nargs="*", default=[], help="other bert_pred.parquet tables")
    args = ap.parse_args()

    cfg = load_config(args.config)
    overrides = {k: v for k, v in {"layers": args.layers, "pooling": args.pooling, "lr": args.lr,
                                   "threads": args.threads}.items() if v is not None}
    teacher = dict(cfg["teacher"], **overrides)
    layout = Layout.at(args.root)
    data = {name: Path(layout.data(name)) for name in INGEST_TABLES}
    relevant_min = cfg["dataset"]["relevant_min"]
    args.out.mkdir(parents=True, exist_ok=True)
    if not (args.out / "model").exists():
        teacher_train(data, {"model": args.out / "model"}, teacher=teacher, seed=args.seed, relevant_min=relevant_min,
                      threads=teacher["threads"])
    if not (args.out / "scores.parquet").exists():
        teacher_score_shard({**data, "model": args.out / "model"}, {"scores": args.out / "scores.parquet"},
                            teacher=teacher, seed=args.seed, relevant_min=relevant_min, threads=teacher["threads"])
    pairs = candidate_pairs(read_ingest(data), splits=("train",), relevant_min=relevant_min)
    new = bert_pred(pairs, pl.read_parquet(args.out / "scores.parquet")).rename({"bert_pred_raw": "new"})
    tables = {"the run's teacher": Path(layout.difficulty_function("bert_pred"))}
    tables.update({str(p): p for p in args.compare})
    print(f"teacher: seed {args.seed}, overrides {overrides or 'none'}; {new.height} training queries")
    for name, path in tables.items():
        joined = new.join(per_query(path), on="qid")
        rho = spearmanr(joined["new"], joined["bert_pred_raw"]).correlation
        print(f"Spearman of BERT_pred with {name} ({path}): {rho:.3f} over {joined.height} queries")


if __name__ == "__main__":
    main()

"""Dev curve of the default baseline (config.yaml: ConvKNRM, pairwise_ce, batch 16 x (1 + 1)) trained for
``--steps`` steps with a dev evaluation every ``--eval-every`` steps on ``--dev-queries`` dev queries, through
``curricula.experiments.train.train_ranker``; embeddings trainable unless ``--freeze`` (both pinned whatever config.yaml
says).

Reads the ingest tables and the ``random`` curriculum of a scratch workflow run (``--root``; build it with
``snakemake -s Snakefile --directory ROOT --cores 2 --configfile config.yaml -- results/chitchat/curricula/random``)
and writes (step, dev AP, train_loss, seconds since start) to ``--out``. No checkpoints (they do not change the
weights). ``--code DIR`` imports ``curricula`` from DIR instead (to compare two versions of the code).

    .venv/bin/python analyses/curve_convknrm.py --root /tmp/prof --steps 1500 [--freeze] [--perturb 1e-7] \
        --out /tmp/prof/curves_x.csv
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/tmp/prof")
    ap.add_argument("--code", default=str(REPO))
    ap.add_argument("--freeze", action="store_true")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--dev-queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--perturb", type=float, default=0.0,
                    help="scale the initial embeddings by (1 + this), e.g. 1e-7: a round-off-sized nudge, to see how "
                         "far two runs that differ only by float round-off drift apart")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    sys.path.insert(0, args.code)
    import polars as pl
    import torch

    from curricula.data.ingest import read_ingest
    from curricula.experiments.spec import parse_train_spec, spec_params
    from curricula.experiments.specs import experiment_specs
    from curricula.plumbing.config import load_config

    config = load_config(REPO / "config.yaml")
    spec = experiment_specs(config)["baseline"]
    # pinned, whatever config.yaml says now: the full curve (no early stopping), the dev subset, the embeddings
    # (parsed again, so the curriculum is resolved against the pinned length)
    pinned = {"steps": args.steps, "max_steps": args.steps, "patience": 0, "eval_every": args.eval_every,
              "dev_queries": args.dev_queries, "threads": args.threads, "device": "cpu", "checkpoint_every": 0,
              "architecture": {**spec.ranker.arch(), "freeze_embeddings": args.freeze}}
    spec = parse_train_spec({**spec_params(spec), **pinned})
    base = Path(args.root) / "results" / "chitchat"
    data = read_ingest({n: base / "data" / f"{n}.parquet" for n in ("queries", "docs", "qrels", "candidates")})
    import curricula.experiments.train
    from curricula.experiments.train import train_ranker

    if args.perturb:
        build = curricula.experiments.train.build_ranker

        def nudged(ranker_spec, seed):
            ranker = build(ranker_spec, seed)
            with torch.no_grad():
                ranker.module.embedding.weight.mul_(1 + args.perturb)
            return ranker

        curricula.experiments.train.build_ranker = nudged

    stamps: dict[int, float] = {}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        curve = train_ranker(data, spec, args.seed, curriculum_dir=base / "curricula" / "random",
                             model_out=Path(tmp) / "model", checkpoint_dir=Path(tmp) / "ckpt",
                             config_seed=config["pipeline_seed"], progress=False,
                             on_step=lambda done: stamps.__setitem__(done, time.time() - t0))
    curve = curve.with_columns(seconds=pl.Series([round(stamps.get(s, float("nan")), 1)
                                                  for s in curve["step"].to_list()]))
    curve.select("step", "metric", "value", "train_loss", "seconds").write_csv(args.out)
    print(curve.select("step", "value", "train_loss", "seconds"))
    print(f"{time.time() - t0:.1f} s wall, code {args.code}, freeze_embeddings={args.freeze}, perturb={args.perturb}")


if __name__ == "__main__":
    main()

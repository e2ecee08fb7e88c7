"""Does the active-learning ranker learn on a dataset? Dev curve of ``active.train``'s ranker fitted on a fraction of a
study dataset's train queries (the seeded draw round 0 of the loop labels, ``curricula.active.loop``), through
``curricula.active.loop.fit_ranker``; ``--train`` is a JSON overlay of ``active.train`` knobs (ranker,
architecture, loss, steps...). Reads the ingest tables of a finished study run (``--root``, e.g. the study's working
directory). Prints every dev evaluation (the fitting log) and the best value with the wall time.

    .venv/bin/python analyses/curve_active_ranker.py --root /tmp/study --dataset chitchat --fraction 1.0 \
        --train '{"architecture": {"embedding_dropout": 0.0}, "steps": 2500, "max_steps": 2500, "patience": 0,
                  "eval_every": 500}'

Measured with it (2 cores, one thread; chitchat's 3,000 train / 500 dev contexts of 10 candidates, where a random
order gives dev MRR about 0.29; --train as given, over configs/study.yaml's active.train):
- lstm_qa (the study's: dropout 0.5 on the head, none on the embeddings), all queries, 2,500 steps
  ('{"steps": 2500, "max_steps": 2500, "patience": 0, "eval_every": 500}'): best dev MRR 0.307, in 158 s;
- convknrm with dropout 0.5 on embeddings and features, all queries, 750 steps ('{"ranker": "convknrm",
  "architecture": {"dropout": 0.5, "embedding_dropout": null}, "loss": "pairwise_ce", ...}'): 0.295;
  with the feature dropout only ("embedding_dropout" left at the study's 0.0): 0.367;
- convknrm without dropout on 30% of the queries, 1,000 steps: 0.377.
On WikiQA at 30% of the labels (600 steps), lstm_qa reaches 0.640 without embedding dropout and 0.631 with it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="working directory of a study run (its results/<dataset>/data)")
    ap.add_argument("--study", default=str(REPO / "configs/study.yaml"))
    ap.add_argument("--dataset", default="chitchat")
    ap.add_argument("--fraction", type=float, default=1.0, help="share of the train queries labeled")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train", default="{}", help="JSON overlay of active.train")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    import yaml

    from curricula.active.loop import QueryPool, fit_ranker, initial_labeled, labeled_pairs
    from curricula.data.ingest import INGEST_TABLES, candidate_pairs, read_ingest
    from curricula.experiments.specs import active_spec, merge_experiment
    from curricula.models import ranker_class
    from curricula.models.runtime import start_job
    from curricula.plumbing.config import load_config, validate_config
    from curricula.plumbing.layout import Layout
    from curricula.study.grid import study_configs

    os.chdir(REPO)  # preset paths in the study file are relative to the repository
    configs = study_configs(load_config(REPO / "config.yaml"), yaml.safe_load(Path(args.study).read_text()), {})
    config = validate_config(configs[args.dataset])
    config["active"]["train"] = merge_experiment(config["active"].get("train") or {}, json.loads(args.train))
    spec = active_spec(config)
    spec = spec.with_runtime(device="cpu", threads=spec.runtime.threads or 1)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    runtime = start_job(spec.runtime, ranker_class(spec.ranker.ranker).transformer, "active ranker")
    relevant_min = config["dataset"]["relevant_min"]
    data = read_ingest({n: Path(args.root, Layout(dataset=args.dataset).data(n))
                        for n in INGEST_TABLES})
    pool = QueryPool(candidate_pairs(data, ("train",), relevant_min))
    labeled = initial_labeled(len(pool), args.fraction, args.seed)
    dev = candidate_pairs(data, ("dev",), relevant_min)
    print(f"{args.dataset}: {int(labeled.sum())} of {len(pool)} train queries, {spec.ranker.ranker} "
          f"{spec.ranker.arch()}, loss {spec.objective.loss}", flush=True)
    start = time.perf_counter()
    _, best = fit_ranker(spec, args.seed, labeled_pairs(pool, labeled), dev, data["qrels"], runtime, relevant_min)
    print(f"best dev {spec.evaluation.eval_metric} {best:.4f} in {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()

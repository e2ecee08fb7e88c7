"""Study ledgers built from metrics frames, for the tests of the rounds, the findings and the ledger itself."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from curricula.study.entries import build_entry
from curricula.study.ledger import Entry, Ledger, entry_path
from curricula.study.ledger_runs import ledger_arm

COMPUTE = {"device": "cpu", "dtype": "fp32", "gpu": None, "capability": None, "torch": "2.13.0+cpu", "cuda": None,
           "cpu": "x86_64 avx2"}


def make_entry(dataset: str, arm: str, seed: int, values: pl.DataFrame, upstream: dict | None = None,
               kept_step: int = 100, cpu_seconds: float = 60.0, compute: dict | None = None) -> Entry:
    """An entry of ``values`` (experiment, qid, measure, value) with made-up provenance."""
    active = arm.startswith("active:")
    training = ({"kept_step": None, "best_dev": None, "stopped": None} if active else
                {"kept_step": kept_step, "best_dev": 0.5, "stopped": "early_stopping"})
    return build_entry(dataset=dataset, arm=arm, seed=seed, kind="active" if active else "train",
                       values=values.select("experiment", "qid", "measure", "value"), spec_digest=f"spec-{arm}",
                       upstream=upstream if upstream is not None else {"data/queries.parquet": "q0"},
                       compute=compute or COMPUTE, cost={"cpu_seconds": cpu_seconds, "peak_rss_mb": 900.0},
                       training=training, commit="c0ffee")


def ledger_from_frames(root: str | Path, frames: dict[str, pl.DataFrame], upstream: dict | None = None
                       ) -> dict[tuple[str, str, int], str]:
    """Write one entry per (dataset, ledger arm, seed) of ``frames`` ({dataset: long metrics frame}) into the ledger
    at ``root``; {(dataset, claim arm, seed): its entry's path} of every experiment name and seed in the frames."""
    store = Ledger(root)
    runs = {}
    for dataset, frame in frames.items():
        frame = frame.with_columns(arm=pl.col("experiment").map_elements(ledger_arm, return_dtype=pl.String))
        for (arm, seed), part in frame.group_by("arm", "seed", maintain_order=True):
            entry = make_entry(dataset, arm, int(seed), part, upstream)
            store.add(entry)
            for experiment in part["experiment"].unique(maintain_order=True):
                key = (dataset, experiment.partition("@")[0] if arm.startswith("active:") else experiment, int(seed))
                runs[key] = str(entry_path(root, entry.record))
    return runs


__all__ = ["COMPUTE", "ledger_from_frames", "make_entry"]

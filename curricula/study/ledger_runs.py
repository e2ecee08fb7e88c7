"""What a study's judgements read of its ledger: the runs a round or the findings page rests on, named by their rules'
inputs, the entries the ledger pairs them with (:func:`curricula.study.resume.select_entries`), their per-query values
as the metrics frames the verdicts are computed from, and what they cost.

A judging rule's inputs are named ``run|<dataset>|<claim arm>|<seed>`` (a ``run``
:class:`~curricula.plumbing.keys.ClaimKey`): the claim's arm (an experiment, ``<experiment>+bm25``, or
``active:<method>`` for an active-learning loop's rounds) and one seed. Each points at the run's results-side entry
(trained here) or at the ledger's file of the entry it is held by; either way the values are read from the ledger, so
that the round records and the findings page are a function of the ledger alone (:mod:`curricula.study.recompute`
gives the same bytes without any model or metric file).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from curricula.plumbing.keys import RUN, ClaimKey, input_key, without_bm25
from curricula.study.grid import ACTIVE_PREFIX
from curricula.study.ledger import Entry, Ledger, entry_path, read_entry
from curricula.study.resume import RunKey, select_entries

#: A claim's run: (dataset, claim arm, seed).
ClaimRun = tuple[str, str, int]
#: Columns of :func:`ledger_costs`.
LEDGER_COSTS = {"dataset": pl.String, "runs": pl.Int64, "core_hours": pl.Float64, "peak_rss_mb": pl.Float64,
                "machines": pl.Int64, "compute_classes": pl.Int64, "upstream_variants": pl.Int64,
                "commits": pl.Int64}
#: Seconds in a core-hour.
CORE_HOUR = 3600.0


def claim_runs(inputs: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> dict[ClaimRun, str]:
    """{(dataset, claim arm, seed): path} of a rule's ``run|...`` inputs (a dict or a Snakemake Namedlist, or their
    (name, path) pairs)."""
    items = inputs.items() if hasattr(inputs, "items") else inputs
    out: dict[ClaimRun, str] = {}
    for name, path in items:
        key = input_key(name)
        if isinstance(key, ClaimKey) and key.kind == RUN:
            out[(key.dataset, key.arm, key.seed)] = str(path)
    return out


def ledger_arm(arm: str) -> str:
    """The ledger's arm of a claim arm: the trained experiment (``x+bm25`` is ``x``'s entry), ``active:<method>``
    for an active-learning result (``active:dasl@3`` is ``active:dasl``'s entry)."""
    if arm.startswith(ACTIVE_PREFIX):
        return arm.partition("@")[0]
    return without_bm25(arm)


def trained_run(run: ClaimRun) -> RunKey:
    """The ledger's run a claim run reads: (dataset, :func:`ledger_arm`, seed)."""
    return run[0], ledger_arm(run[1]), int(run[2])


def gather(ledger: str | Path, runs: Mapping[ClaimRun, str]) -> dict[ClaimRun, Entry]:
    """Each claim run's entry: the results-side entries among ``runs``' paths are added to the ledger first (a
    ledger that lost them gets them back), then every run's entry is chosen from the ledger
    (:func:`curricula.study.resume.select_entries`) and read."""
    store = Ledger(ledger)
    root = store.root.resolve()
    for path in dict.fromkeys(runs.values()):
        if not Path(path).resolve().is_relative_to(root):
            store.add(read_entry(path))
    trained = {run: trained_run(run) for run in runs}
    chosen = select_entries(store.records(), trained.values())
    cache: dict[str, Entry] = {}
    out = {}
    for run, key in trained.items():
        record = chosen[key]
        if record["run_id"] not in cache:
            cache[record["run_id"]] = read_entry(entry_path(store.root, record), in_ledger=True)
        out[run] = cache[record["run_id"]]
    return out


def claim_frames(entries: Mapping[ClaimRun, Entry]) -> dict[str, pl.DataFrame]:
    """Each dataset's long metrics frame (experiment, seed, qid, measure, value: float64 from the ledger's float32),
    datasets in first-seen order: for each claim run the entry's rows of its arm (an active-learning arm's every
    round), in run order."""
    parts: dict[str, list[pl.DataFrame]] = {}
    for (dataset, arm, seed), entry in entries.items():
        experiment = pl.col("experiment")
        rows = entry.values.filter(experiment.str.starts_with(arm + "@") if arm.startswith(ACTIVE_PREFIX)
                                   else experiment == arm)
        if rows.is_empty():
            raise ValueError(f"{dataset}/{arm}/seed={seed}: its ledger entry {entry.record['run_id']} holds no "
                             f"values of {arm}")
        parts.setdefault(dataset, []).append(rows.with_columns(seed=pl.lit(str(seed))).select(
            "experiment", "seed", "qid", "measure", pl.col("value").cast(pl.Float64)))
    return {dataset: pl.concat(frames) for dataset, frames in parts.items()}


def used_records(entries: Mapping[ClaimRun, Entry]) -> list[dict[str, Any]]:
    """The records of the distinct entries ``entries`` rest on, in first-seen order."""
    return list({e.record["run_id"]: e.record for e in entries.values()}.values())


def upstream_variants(records: Iterable[Mapping[str, Any]]) -> int:
    """The most digests any one upstream table has among ``records`` (1: every run read the same bytes of every
    table it shares with another)."""
    seen: dict[str, set[str]] = {}
    for record in records:
        for table, value in record["upstream"].items():
            seen.setdefault(table, set()).add(value)
    return max((len(v) for v in seen.values()), default=0)


def ledger_costs(records: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """One row per dataset (first-seen order) of the runs ``records`` hold: their number, their CPU time in
    core-hours (training, selection and evaluation, or the active-learning loop), the largest peak memory, and how
    many machines (host digests), compute classes, upstream variants (:func:`upstream_variants`) and commits they
    came from."""
    by_dataset: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_dataset.setdefault(record["dataset"], []).append(record)
    rows = [{"dataset": dataset, "runs": len(rs), "core_hours": sum(r["cpu_seconds"] for r in rs) / CORE_HOUR,
             "peak_rss_mb": max(r["peak_rss_mb"] for r in rs), "machines": len({r["host"] for r in rs}),
             "compute_classes": len({_compute_class(r["compute"]) for r in rs}),
             "upstream_variants": upstream_variants(rs), "commits": len({r["commit"] for r in rs})}
            for dataset, rs in by_dataset.items()]
    return pl.DataFrame(rows, schema=LEDGER_COSTS)


def _compute_class(compute: Mapping[str, Any]) -> str:
    return f"{compute.get('cpu')}|{compute.get('gpu')}|{compute.get('dtype')}|{compute.get('torch')}"


__all__ = ["ClaimRun", "LEDGER_COSTS", "RUN", "claim_frames", "claim_runs", "gather", "ledger_arm", "ledger_costs",
           "trained_run", "upstream_variants", "used_records"]

"""A study's ledger in its run plan: what rule ``study_ledger_entry`` reads for one finished run, and where each claim
run a judging rule needs comes from, trained here or held by the ledger (curricula/study/resume.py's rules).

A run the ledger holds and this machine did not train is read from the ledger's file: no job of it, nor of the
stages before it, is planned. A run trained here is read from its results-side entry, so its rule's inputs stay the
same once the ledger holds it (a re-run plans nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from curricula.pipeline.plan import DatasetPlan
from curricula.pipeline.targets import additive_input, evaluate_outputs, ingest_outputs, train_inputs
from curricula.plumbing.keys import RUN, ClaimKey, UpstreamKey
from curricula.plumbing.layout import Layout
from curricula.study.grid import ACTIVE_PREFIX
from curricula.study.ledger import digest, entry_path
from curricula.study.ledger_runs import ClaimRun, trained_run
from curricula.study.resume import plan_runs


def arm_runs(plan: DatasetPlan, arm: str) -> list[str]:
    """The training runs of a trained arm: the experiment, or each value's run of a tuned one."""
    return list(plan.runs_of[arm])


def spec_digest(plan: DatasetPlan, arm: str) -> str:
    """A digest of what a ledger arm's values depend on in the config: each training run's spec without runtime
    knobs, the scoring knobs and BM25 interpolation; an active-learning loop's spec and settings."""
    if arm.startswith(ACTIVE_PREFIX):
        return digest({"active": plan.active_params(), "settings": plan.active_settings()})
    return digest({"runs": {run: plan.train_params(run) for run in arm_runs(plan, arm)},
                   "evaluate": {k: v for k, v in plan.evaluate_knobs(arm).items() if k != "device"},
                   "additivity": plan.additivity_params()})


def upstream_tables(plan: DatasetPlan, arm: str) -> dict[str, str]:
    """{``upstream|<path under the dataset's folder>``: path} of every table a ledger arm's runs read (training
    inputs and BM25's candidate scores for the interpolation; an active-learning loop's ingest tables)."""
    if arm.startswith(ACTIVE_PREFIX):
        tables = list(ingest_outputs(plan).values())
    else:
        tables = [path for run in arm_runs(plan, arm) for path in train_inputs(plan, run).values()]
        tables += additive_input(plan).values()
    root = Path(plan.layout.root)
    return {UpstreamKey(str(Path(p).relative_to(root))).encode(): p for p in dict.fromkeys(tables)}


def entry_inputs(plan: DatasetPlan, arm: str, seed: int | str) -> dict[str, str]:
    """Rule ``study_ledger_entry``'s inputs for one run: its test metrics (and their BM25 interpolation's), dev curve
    and recorded config, or an active-learning loop's test values; and every upstream table it read."""
    if arm.startswith(ACTIVE_PREFIX):
        return {"active": plan.layout.active(arm.removeprefix(ACTIVE_PREFIX), seed)["test_metrics"],
                **upstream_tables(plan, arm)}
    evaluated = evaluate_outputs(plan, arm, seed)
    trained = plan.layout.train(arm, seed)
    config = {} if arm in plan.tuned else {"config": trained["config"]}
    return {"metrics": evaluated["metrics"],
            **({"additive_metrics": evaluated["additive_metrics"]} if "additive_metrics" in evaluated else {}),
            "curve": trained["dev_curve"], **config, **upstream_tables(plan, arm)}


def entry_params(plan: DatasetPlan, arm: str) -> dict[str, Any]:
    """Rule ``study_ledger_entry``'s params for a ledger arm of a dataset."""
    return {"spec_digest": spec_digest(plan, arm), "root": plan.layout.root, "benchmarks": plan.layout.benchmarks}


def run_inputs(layout: Layout, records: Iterable[Mapping[str, Any]], runs: Iterable[ClaimRun]) -> dict[str, str]:
    """{``run|<dataset>|<claim arm>|<seed>``: path} of the claim ``runs`` a judging rule needs: the results-side entry
    (``layout.study_entry``) of a run this machine trains or trained, else the ledger's file of the entry it is held
    by (:func:`curricula.study.resume.plan_runs` over the ledger's ``records``)."""
    runs = list(runs)
    trained = {run: trained_run(run) for run in runs}
    local = {key for key in trained.values() if Path(layout.study_entry(*key)).is_file()}
    to_train, held = plan_runs(records, trained.values(), local)
    train = set(to_train) | local
    out = {}
    for run, key in trained.items():
        path = layout.study_entry(*key) if key in train else str(entry_path(layout.study_ledger, held[key]))
        out[ClaimKey(RUN, *run).encode()] = path
    return out


__all__ = ["arm_runs", "entry_inputs", "entry_params", "run_inputs", "spec_digest", "upstream_tables"]

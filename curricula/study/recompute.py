"""A study's round records and findings page recomputed from its ledger alone (``python -m curricula.cli ledger
findings``): no model, metric or benchmark file is read, and the files are byte-identical to what the study run
wrote from the same ledger, because the run's judging rules call the same functions on the same entries
(:func:`curricula.study.ledger_runs.gather` picks them from the ledger in both).

The rounds are recomputed in order as far as the ledger holds every run a round needs; the findings page only once
the last round the study needs is recomputed (or at once, without rounds). :func:`recompute` says how far it got.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curricula.plumbing.layout import Layout, round_file
from curricula.study.ledger import Ledger, LedgerError, entry_path
from curricula.study.ledger_runs import ClaimRun, trained_run
from curricula.study.resume import by_key, select_entries
from curricula.study.rounds import first_round_arms, read_round, round_from_ledger


@dataclass
class Recomputed:
    """What :func:`recompute` wrote: the round records (in order), the findings page's files (empty when the
    ledger does not reach the last round yet), and why it stopped early (None when it did not)."""

    rounds: list[Path] = field(default_factory=list)
    findings: dict[str, Path] = field(default_factory=dict)
    stopped: str | None = None


def ledger_paths(records: Iterable[Mapping[str, Any]], root: str | Path, runs: Iterable[ClaimRun]
                 ) -> dict[ClaimRun, str]:
    """{claim run: the ledger file of the entry it rests on} (:func:`curricula.study.resume.select_entries`)."""
    runs = list(runs)
    chosen = select_entries(records, [trained_run(run) for run in runs])
    return {run: str(entry_path(root, chosen[trained_run(run)])) for run in runs}


def missing_runs(records: Iterable[Mapping[str, Any]], runs: Iterable[ClaimRun]) -> list[ClaimRun]:
    """The claim runs the ledger holds no entry for."""
    held = by_key(records)
    return [run for run in runs if trained_run(run) not in held]


def run_name(run: ClaimRun) -> str:
    """``<dataset>/<arm>/seed=<s>``: a claim run as its entry's folder names it."""
    return f"{run[0]}/{run[1]}/seed={run[2]}"


def recompute(plan: Any, out: str | Path) -> Recomputed:
    """Recompute the round records (``<out>/rounds/round=<k>.json``) and the findings page (``<out>/findings.md``
    and its table, Parquet, figure and costs) of the study ``plan`` (a
    :class:`curricula.pipeline.study.StudyPlan`) from its ledger alone."""
    out = Path(out)
    ledger = Ledger(plan.layout.study_ledger)
    records = ledger.records()
    done = Recomputed()
    final = None
    if plan.looks is not None:
        arms = {arm: plan.looks[0] for arm in first_round_arms(plan.claims, list(plan.datasets))}
        for round_ in range(1, len(plan.looks) + 1):
            runs = plan.arms_runs(arms)
            if lacking := missing_runs(records, runs):
                done.stopped = (f"round {round_} needs {len(lacking)} run(s) the ledger lacks, e.g. "
                                f"{run_name(lacking[0])}")
                return done
            path = out / "rounds" / round_file(round_)
            round_from_ledger(ledger_paths(records, ledger.root, runs), done.rounds[-1] if done.rounds else None,
                              path, ledger=ledger.root, **plan.round_settings(round_))
            done.rounds.append(path)
            following = read_round(path)["next"]
            if not following:
                final = path
                break
            arms = {arm: plan.looks[round_] for arm in following}
    runs = plan.report_runs(None if final is None else str(final))
    if lacking := missing_runs(records, runs):
        done.stopped = (f"the findings need {len(lacking)} run(s) the ledger lacks, e.g. "
                        f"{run_name(lacking[0])}")
        return done
    from curricula.study.findings import findings_from_ledger

    files = {name: out / Path(path).name for name, path in Layout().study_report().items()}
    findings_from_ledger(ledger_paths(records, ledger.root, runs), plan.claims, files, ledger=ledger.root,
                         **plan.report_settings(), rounds=final, previous=plan.settings["previous"])
    done.findings = files
    return done


def check_complete(done: Recomputed) -> None:
    """Raise :class:`~curricula.study.ledger.LedgerError` when a recomputation stopped early."""
    if done.stopped:
        raise LedgerError(f"recomputed {len(done.rounds)} round(s); {done.stopped}")


__all__ = ["Recomputed", "check_complete", "ledger_paths", "missing_runs", "recompute", "run_name"]

"""The entry points of rules/study.smk: a finished run's ledger entry, a round of seeds (checkpoint
``study_round``) and the findings page. The judging rules name their claim runs' entries ``run|<dataset>|<arm>|<seed>``
(:func:`curricula.study.ledger_runs.claim_runs`) and read their values from the study's ledger, as
``python -m curricula.cli ledger findings`` does (:mod:`curricula.study.recompute`). The judging functions import
the statistics themselves, so that the entry job of every run starts without scipy.stats (1.2 against 0.3
CPU-seconds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from curricula.stages import Files
from curricula.study.entries import run_entry
from curricula.study.ledger import Entry, Ledger, write_entry


def study_ledger_entry(inputs: Files, out_path: str | Path, *, dataset: str, arm: str, seed: int | str,
                       spec_digest: str, root: str | Path, benchmarks: str | Path, ledger: str | Path,
                       manifest: Mapping[str, Any] | None = None) -> Entry:
    """Rule ``study_ledger_entry``: one finished run's entry (:func:`curricula.study.entries.run_entry`), appended to
    the study's ``ledger`` (refused when it holds the run's id with other values) and written to ``out_path``, the
    run's results-side copy. ``manifest`` is the study settings the ledger's runs are judged under (written with its
    first entry, and a ledger made under others refused; :func:`curricula.study.ledger.manifest`)."""
    entry = run_entry(inputs, dataset=dataset, arm=arm, seed=int(seed), spec_digest=spec_digest, root=root,
                      benchmarks=benchmarks)
    store = Ledger(ledger)
    if manifest is not None:
        store.write_manifest(manifest)
    store.add(entry)
    write_entry(out_path, entry)
    return entry


def study_round(inputs: Files, out_path: str | Path, *, ledger: str | Path, **settings: Any) -> dict[str, Any]:
    """Checkpoint ``study_round``: this round's record (:func:`curricula.study.rounds.round_from_ledger`; ``settings``
    are its keyword arguments) from the claim runs' entries and the last round's record (input ``previous``, none in
    round 1), into ``out_path``."""
    from curricula.study.ledger_runs import claim_runs
    from curricula.study.rounds import round_from_ledger

    previous = inputs["previous"] if "previous" in inputs.keys() else None
    return round_from_ledger(claim_runs(inputs), previous, out_path, ledger=ledger, **settings)


def report_study(inputs: Files, outputs: Files, *, ledger: str | Path, claims: Sequence[Mapping[str, str]],
                 **settings: Any) -> pl.DataFrame:
    """Rule ``report_study``: the findings page and its table, Parquet, figure and costs (the outputs of those names;
    :func:`curricula.study.findings.findings_from_ledger`, ``settings`` its keyword arguments) of the ``claims`` from
    the claim runs' entries, the rounds' last record (input ``rounds``) and the last study's findings
    (``previous``)."""
    from curricula.study.findings import findings_from_ledger
    from curricula.study.ledger_runs import claim_runs

    names = set(inputs.keys())  # a Snakemake Namedlist's `in` looks at its values
    return findings_from_ledger(claim_runs(inputs), claims, outputs, ledger=ledger, **settings,
                                rounds=inputs["rounds"] if "rounds" in names else None,
                                previous=inputs["previous"] if "previous" in names else None)

"""Merging study ledgers from several machines (``python -m curricula.cli ledger merge``).

Every source is read and checked before anything is written: a truncated or corrupted entry stops the merge naming
its file, a ledger made under another study config (:data:`curricula.study.ledger.MANIFEST_KEYS`) stops it naming
the differing keys, and a run id held with different values stops it naming the run and the fields. Then each entry
the destination lacks is copied in, atomically; entries it holds with the same values are left as they are. A merge
is idempotent and its order does not matter: two halves merged give the whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curricula.study.ledger import (
    MANIFEST,
    Entry,
    Ledger,
    LedgerError,
    conflict_message,
    differing_fields,
    entry_path,
    manifest_differences,
    read_entry,
    write_entry,
)


@dataclass(frozen=True)
class MergeReport:
    """What a merge did: entries copied in, entries already held with the same values, and the sources' count."""

    added: int
    held: int
    sources: int


def common_manifest(ledgers: Sequence[Ledger]) -> dict[str, Any] | None:
    """The study settings all ``ledgers`` share (those without a ``study.json`` take any); refuses two that differ,
    naming both and the keys."""
    found: tuple[Ledger, dict[str, Any]] | None = None
    for ledger in ledgers:
        settings = ledger.read_manifest()
        if settings is None:
            continue
        if found is not None and (diff := manifest_differences(found[1], settings)):
            raise LedgerError(f"{ledger.root} was made under another study config than {found[0].root}: "
                              f"{', '.join(diff)} differ ({MANIFEST}); merge ledgers of one study")
        found = found or (ledger, settings)
    return None if found is None else found[1]


def merge_ledgers(sources: Sequence[str | Path], into: str | Path) -> MergeReport:
    """Merge the ledgers at ``sources`` into the one at ``into`` (created when absent): checked whole first (see the
    module), then written."""
    target = Ledger(into)
    ledgers = [Ledger(s) for s in sources]
    for ledger in ledgers:
        if not ledger.root.is_dir():
            raise LedgerError(f"{ledger.root}: no such ledger folder")
    settings = common_manifest([target, *ledgers])
    incoming: dict[str, tuple[Entry, Path]] = {}
    for ledger in ledgers:
        for path in ledger.paths():
            entry = read_entry(path, in_ledger=True)
            run = entry.record["run_id"]
            if run in incoming and (diff := differing_fields(incoming[run][0], entry)):
                raise LedgerError(conflict_message(entry.record, diff, incoming[run][1]) + f" (and in {path})")
            incoming.setdefault(run, (entry, path))
    added, held = [], 0
    for entry, source in incoming.values():
        path = entry_path(target.root, entry.record)
        if path.is_file():
            if diff := differing_fields(read_entry(path, in_ledger=True), entry):
                raise LedgerError(conflict_message(entry.record, diff, path) + f" (and in {source})")
            held += 1
        else:
            added.append(entry)
    if settings is not None:
        target.write_manifest(settings)
    for entry in added:
        write_entry(entry_path(target.root, entry.record), entry)
    return MergeReport(added=len(added), held=held, sources=len(ledgers))


__all__ = ["MergeReport", "common_manifest", "merge_ledgers"]

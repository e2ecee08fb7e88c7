"""Which of a study's runs its ledger already holds, and which entries its verdicts rest on, so that a study resumes on
any machine and pairs a seed's arms honestly.

A seed's arms are compared only when they trained on the same upstream tables: two entries *agree* when every table
both read (named by its path under the dataset's results folder, e.g. ``curriculum/bert_pred``) has the same digest
in both (:func:`table_conflict`). A baseline that never read the teacher's scores agrees with a curriculum arm
whatever teacher that arm had; two arms that read the same curriculum must have read the same bytes.

:func:`choose_seed` picks, for one (dataset, seed), one entry per arm such that all agree: the first such choice in
run-id order (arms sorted), so the choice is a pure function of the ledger and a recomputation from the ledger alone
picks what the study run picked. :func:`plan_runs` decides at start-up which runs a machine trains:
- a seed whose wanted arms the ledger holds in full, agreeing, trains nothing;
- a seed with entries trained on this machine (their results-side copies exist here) that the ledger cannot complete
  agreeing with them is retrained whole here: every arm without a local entry trains;
- any other seed trains only the arms the ledger lacks, keeping the held ones that agree; if the new runs then
  disagree with the held ones, the round's judgement stops (:func:`select_entries`) and the next start retrains the
  seed whole here (the case before).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from curricula.study.ledger import LedgerError

#: A run a study asks for: (dataset, arm, seed).
RunKey = tuple[str, str, int]


def table_conflict(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The first table (sorted) that two entries' records both read with different digests, as (table, a's digest,
    b's digest); None when they agree."""
    shared = sorted(set(a["upstream"]) & set(b["upstream"]))
    for table in shared:
        if a["upstream"][table] != b["upstream"][table]:
            return table, a["upstream"][table], b["upstream"][table]
    return None


def choose_seed(candidates: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Mapping[str, Any]] | None:
    """One record per arm of ``candidates`` ({arm: its entries' records}, one (dataset, seed)) such that every two
    agree (:func:`table_conflict`): the first such choice with arms in sorted order and each arm's records in run-id
    order (a depth-first search); None when no choice agrees or an arm has no record."""
    arms = sorted(candidates)
    options = [sorted(candidates[arm], key=lambda r: r["run_id"]) for arm in arms]

    def search(i: int, chosen: list[Mapping[str, Any]]) -> list[Mapping[str, Any]] | None:
        if i == len(arms):
            return chosen
        for record in options[i]:
            if all(table_conflict(record, other) is None for other in chosen):
                found = search(i + 1, [*chosen, record])
                if found is not None:
                    return found
        return None

    found = search(0, [])
    return None if found is None else dict(zip(arms, found))


def by_key(records: Iterable[Mapping[str, Any]]) -> dict[RunKey, list[Mapping[str, Any]]]:
    """The ledger's records grouped by run key (dataset, arm, seed)."""
    out: dict[RunKey, list[Mapping[str, Any]]] = {}
    for record in records:
        out.setdefault((record["dataset"], record["arm"], int(record["seed"])), []).append(record)
    return out


def seeds_of(wanted: Iterable[RunKey]) -> dict[tuple[str, int], list[str]]:
    """{(dataset, seed): its wanted arms}, in first-seen order."""
    out: dict[tuple[str, int], list[str]] = {}
    for dataset, arm, seed in wanted:
        out.setdefault((dataset, int(seed)), []).append(arm)
    return out


def plan_runs(records: Iterable[Mapping[str, Any]], wanted: Iterable[RunKey], local: Collection[RunKey] = ()
              ) -> tuple[list[RunKey], dict[RunKey, Mapping[str, Any]]]:
    """Which ``wanted`` runs this machine trains (see the module's rules; in ``wanted``'s order) and the ledger's
    record each other wanted run is held by, that is not trained here; ``local`` are the runs trained here (their
    results-side entries exist)."""
    wanted = list(dict.fromkeys((d, a, int(s)) for d, a, s in wanted))
    held_by = by_key(records)
    train: set[RunKey] = set()
    held: dict[RunKey, Mapping[str, Any]] = {}
    for (dataset, seed), arms in seeds_of(wanted).items():
        keys = [(dataset, arm, seed) for arm in arms]
        chosen = choose_seed({k[1]: held_by.get(k, []) for k in keys})
        if chosen is not None:
            held.update({(dataset, arm, seed): record for arm, record in chosen.items()})
            continue
        if any(k in local for k in keys):  # split from the ledger's: retrain the seed whole here
            train.update(k for k in keys if k not in local)
            continue
        kept: list[Mapping[str, Any]] = []
        for key in keys:
            fits = [r for r in sorted(held_by.get(key, []), key=lambda r: r["run_id"])
                    if all(table_conflict(r, c) is None for c in kept)]
            if fits:
                kept.append(fits[0])
                held[key] = fits[0]
            else:
                train.add(key)
    return [k for k in wanted if k in train], {k: held[k] for k in wanted if k in held}


def select_entries(records: Iterable[Mapping[str, Any]], wanted: Iterable[RunKey]) -> dict[RunKey, Mapping[str, Any]]:
    """The record each ``wanted`` run's verdicts rest on: per (dataset, seed), :func:`choose_seed` over the ledger.
    Raises :class:`~curricula.study.ledger.LedgerError` naming the run when the ledger lacks one, and the seed, table
    and digests when its arms cannot be paired (trained on different upstream tables)."""
    held = by_key(records)
    out: dict[RunKey, Mapping[str, Any]] = {}
    for (dataset, seed), arms in seeds_of((d, a, int(s)) for d, a, s in wanted).items():
        missing = [arm for arm in arms if not held.get((dataset, arm, seed))]
        if missing:
            raise LedgerError(f"the ledger holds no run of {dataset}/{missing[0]}/seed={seed}; run the study to "
                              f"train it")
        chosen = choose_seed({arm: held[(dataset, arm, seed)] for arm in arms})
        if chosen is None:
            raise LedgerError(split_message(dataset, seed, {arm: held[(dataset, arm, seed)] for arm in arms}))
        out.update({(dataset, arm, seed): record for arm, record in chosen.items()})
    return out


def split_message(dataset: str, seed: int, candidates: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Why a seed's arms cannot be paired: the first two arms' entries that read one table with different digests."""
    arms = sorted(candidates)
    for i, a in enumerate(arms):
        for b in arms[i + 1:]:
            for ra in candidates[a]:
                for rb in candidates[b]:
                    if conflict := table_conflict(ra, rb):
                        table, da, db = conflict
                        return (f"{dataset} seed {seed}: its arms trained on different upstream tables ({table} "
                                f"{da} for {a}, {db} for {b}), so they cannot be paired; run the study again on "
                                f"one machine: it retrains the seed's arms there")
    return f"{dataset} seed {seed}: no choice of its arms' entries agrees on their upstream tables"


__all__ = ["RunKey", "by_key", "choose_seed", "plan_runs", "seeds_of", "select_entries", "split_message",
           "table_conflict"]

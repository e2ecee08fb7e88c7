"""A study's replication (config ``study.replication``): the (claim, dataset) cells a study's rounds decided, re-run
on a fresh draw of the data and fresh ranker seeds, with the same claims, protocol and sequential rules, judged as
a family of its own.

Draw ``d`` of dataset ``K`` is the replica ``K_rep<d>`` (:func:`curricula.plumbing.layout.replica_key`): ``K``'s
config with

- ``pipeline_seed`` + 1000 d (:data:`REPLICA_OFFSET`): the seed of the split, so the train, dev and test queries are
  a new carve of the same pool with the same fractions, and with it every sampled negative, the teacher's and G's
  fine-tuning and every tie;
- every ranker seed + 1000 d (``seeds`` and, for an active-learning loop, ``active.seeds``), so no ranker starts
  from the same initialisation and order as in the original draw.

Everything else (grid, budget, patience, dev queries, the claims' arms and factors) is the original's. The replica's
results are under ``results/K_rep<d>/``; as a selection of its own (``study/only=K_rep<d>``) it has its own round
records, findings page and ledger folder, so its verdicts are a family judged apart from the original's and the two
are compared side by side (:func:`replication_status`), never pooled.

Every split the pipeline draws by its seed is drawn again: all of a re-split dataset's (DailyDialog++, SemEval),
chitchat's conversations, and a split carved out of a loader's train file (WikiQA's test: its training questions
are then a new sample of the official train file's, its dev file stays). A dataset whose loader brings every split
as its own and that is not re-split would keep its queries under a new seed
(:func:`curricula.data.ingest.seed_draws_splits`); a replication of it is refused, naming the fix (re-split it in
the dataset's overrides), rather than calling a re-run on the same queries a fresh draw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from curricula.data.ingest import seed_draws_splits
from curricula.plumbing.layout import replica_key
from curricula.statistics.verdicts import BELOW_MARGIN, EQUIVALENT, NOT_REPRODUCED, REPRODUCED
from curricula.study.grid import claim_datasets
from curricula.study.verdicts import CellVerdict

#: how far a replica's pipeline seed and ranker seeds move per draw (draw d adds d * REPLICA_OFFSET)
REPLICA_OFFSET = 1000
#: the sequential verdicts that decide a cell (the others: ``inconclusive`` at the last look, ``continue`` before it)
DECIDED_VERDICTS = (REPRODUCED, NOT_REPRODUCED, EQUIVALENT)
#: how a replica's verdict stands to its original's (:func:`replication_status`)
REPLICATED, CONTRADICTED, UNDECIDED, PENDING = "replicated", "contradicted", "undecided", "pending"


def replica_seeds(seeds: Sequence[int], draw: int) -> list[int]:
    """A replica's ranker seeds: each of ``seeds`` moved by ``draw`` * :data:`REPLICA_OFFSET` ([1, 2] and draw 1 ->
    [1001, 1002])."""
    return [int(seed) + REPLICA_OFFSET * draw for seed in seeds]


def replica_config(key: str, config: Mapping[str, Any], draw: int) -> dict[str, Any]:
    """Dataset ``key``'s config (as :func:`curricula.study.grid.study_configs` built it) for replication ``draw``:
    its name, pipeline seed and ranker seeds moved (module docstring). A dataset whose fixed splits a new seed would
    not re-draw is refused (ValueError naming the key and the fix)."""
    dataset = config["dataset"]
    if not seed_draws_splits(dataset):
        raise ValueError(f"study.replication.cells.{key}: {key}'s loader brings every split as its own and it is "
                         f"not re-split, so a new seed would not change its train and test queries; re-split it "
                         f"(dataset: {{split: {{resplit: true, fractions: ...}}}} in study.datasets.{key}) or leave "
                         f"it out of the replication")
    out = {**config, "dataset": {**dataset, "name": replica_key(key, draw)},
           "pipeline_seed": int(config["pipeline_seed"]) + REPLICA_OFFSET * draw,
           "seeds": replica_seeds(config["seeds"], draw)}
    active = config.get("active")
    if isinstance(active, Mapping) and active.get("seeds") is not None:
        out["active"] = {**active, "seeds": replica_seeds(active["seeds"], draw)}
    return out


def check_cells(cells: Mapping[str, Sequence[str]], claims: Sequence[Mapping[str, Any]],
                datasets: Sequence[str]) -> None:
    """Refuse a replication cell that is not a cell of the study: a dataset not among ``datasets`` (study.datasets),
    a claim id not among ``claims``, or a claim not tested on that dataset (ValueError naming the key)."""
    by_id = {claim["id"]: claim for claim in claims}
    for key, ids in cells.items():
        where = f"study.replication.cells.{key}"
        if key not in datasets:
            raise ValueError(f"{where}: {key} is not among study.datasets ({', '.join(datasets)})")
        unknown = [cid for cid in ids if cid not in by_id]
        if unknown:
            raise ValueError(f"{where}: {', '.join(unknown)} not among study.claims ({', '.join(by_id)})")
        untested = [cid for cid in ids if not claim_datasets(by_id[cid], [key])]
        if untested:
            raise ValueError(f"{where}: {', '.join(untested)} is not tested on {key} (its study.claims.<id>.datasets)")


def replicated_claims(claims: Sequence[Mapping[str, Any]], cells: Mapping[str, Sequence[str]],
                      datasets: Sequence[str], draw: int) -> list[dict[str, Any]]:
    """The claims of a replication: each claim some cell of ``datasets`` (the selected datasets) lists, tested on
    those datasets' replicas alone (its ``datasets``), in listed order; the claims no cell lists are left out."""
    out = []
    for claim in claims:
        on = [replica_key(key, draw) for key in datasets if claim["id"] in (cells.get(key) or ())]
        if on:
            out.append({**claim, "datasets": on})
    return out


def replicate(configs: Mapping[str, dict[str, Any]], claims: Sequence[Mapping[str, Any]],
              replication: Mapping[str, Any], datasets: Sequence[str]
              ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """({replica key: its config}, the replication's claims) of config ``study.replication`` (``draw``, ``cells``:
    {dataset: [claim id, ...]}) over the selected dataset ``configs`` (:func:`curricula.study.grid.study_configs`);
    ``datasets`` is every key of study.datasets. Raises ValueError naming the key when a cell is not the study's or
    the selection holds none of the cells' datasets."""
    cells = {key: list(ids) for key, ids in (replication.get("cells") or {}).items()}
    check_cells(cells, claims, datasets)
    draw = int(replication["draw"])
    kept = [key for key in configs if key in cells]
    if not kept:
        raise ValueError(f"study.replication.cells: none of its datasets ({', '.join(cells) or 'none'}) is among the "
                         f"selected ones ({', '.join(configs)}); run it with study.only listing one of them")
    replicas = {replica_key(key, draw): replica_config(key, configs[key], draw) for key in kept}
    return replicas, replicated_claims(claims, cells, kept, draw)


def decided_word(verdict: str) -> str | None:
    """The decided verdict a cell's sequential ``verdict`` stands for (``reproduced, below the margin`` stands for
    ``reproduced``), or None for one that decides nothing (``inconclusive``, ``continue``)."""
    word = verdict.removesuffix(BELOW_MARGIN)
    return word if word in DECIDED_VERDICTS else None


def replication_status(original: str, replica: str | None) -> str:
    """How a decided cell's replica stands to it, from the two sequential verdicts: :data:`REPLICATED` when the
    replica decided the same verdict, :data:`CONTRADICTED` when it decided another (an effect found again as
    equivalent, or the other way round, or in the other direction), :data:`UNDECIDED` when its rounds ended
    inconclusive, :data:`PENDING` while they have not ended (``replica`` None: no round yet, or ``continue``).
    A verdict "below the margin" counts as its decided verdict; an ``original`` that is not decided is no cell to
    replicate (ValueError)."""
    before = decided_word(original)
    if before is None:
        raise ValueError(f"the cell's verdict {original!r} is not a decided one, so there is nothing to replicate")
    if replica is None or replica == "continue":
        return PENDING
    after = decided_word(replica)
    if after is None:
        return UNDECIDED
    return REPLICATED if after == before else CONTRADICTED


@dataclass(frozen=True)
class ReplicationRow:
    """One replicated cell: the original study's verdict on the dataset, its replica's (None before its first
    round) and how the two stand (:func:`replication_status`)."""

    original: CellVerdict
    replica: CellVerdict | None
    status: str


def side_by_side(original: Sequence[CellVerdict], replica: Sequence[CellVerdict],
                 cells: Mapping[str, Sequence[str]], draw: int) -> list[ReplicationRow]:
    """A row per replication cell ({dataset: [claim id, ...]} of config ``study.replication.cells``, the datasets in
    listed order) pairing the ``original`` study's cell with its replica's cell of ``replica`` (on
    ``<dataset>_rep<draw>``). A listed cell the original did not decide, or does not hold, is refused
    (ValueError naming it): the replication's cells are the original's decided ones."""
    before = {(c.id, c.dataset): c for c in original}
    after = {(c.id, c.dataset): c for c in replica}
    rows = []
    for dataset, ids in cells.items():
        for claim in ids:
            cell = before.get((claim, dataset))
            if cell is None or decided_word(cell.verdict) is None:
                why = "no verdict" if cell is None else f"the verdict {cell.verdict!r}"
                raise ValueError(f"study.replication.cells.{dataset}: {claim} has {why} in the original study; "
                                 f"list only the cells its rounds decided")
            again = after.get((claim, replica_key(dataset, draw)))
            rows.append(ReplicationRow(cell, again, replication_status(cell.verdict,
                                                                       None if again is None else again.verdict)))
    return rows


__all__ = ["CONTRADICTED", "DECIDED_VERDICTS", "PENDING", "REPLICATED", "REPLICA_OFFSET", "UNDECIDED",
           "ReplicationRow", "check_cells", "decided_word", "replica_config", "replica_seeds", "replicate",
           "replicated_claims", "replication_status", "side_by_side"]

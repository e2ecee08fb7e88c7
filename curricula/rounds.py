"""A study's seeds in rounds (config ``study.sequential``; issue 45, item 4): which seeds each look trains, the
sequential verdict of every (claim, dataset) cell after a round, and which arms the undecided cells need the next
round's seeds for.

Round k (1-based) trains the first ``looks[k-1]`` seeds of the dataset's seed list, extended past its largest seed
by consecutive integers (:func:`look_seeds`): with ``seeds: [1, 2, 3, 4]`` and looks (5, 10) the rounds train seeds
1-5 and 1-10. After each round the checkpoint ``study_round`` (rules/study.smk) tests every cell still open on the
seeds so far by the group-sequential seed-aware rule of :func:`curricula.sequential.sequential_decision` (per-look
thresholds from Lan-DeMets alpha spending; Lan & DeMets 1983, *Biometrika* 70: 659-663), keeps the verdict of every
cell decided before, and lists the arms that need the next round's seeds (:func:`arms_to_extend`): both arms of
every cell still at ``continue``, so an arm shared by several claims (the baseline) trains more seeds when any of its
claims is open. Active-learning claims (``active:<method>@<round>``) stay fixed-seed (``active.seeds``): the
rounds leave them out and the findings judge them as without rounds.

The equivalence margin of a cell is ``study.equivalence_margin`` times the ``against`` arm's mean over the first
look's seeds (:func:`cell_margin`), fixed for the cell's later looks so that a later round never moves the bar an
earlier look was judged against.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl

from curricula.comparisons import _paired, seed_aware_result, with_seeds
from curricula.sequential import CONTINUE, SequentialDecision, SequentialDesign, sequential_decision
from curricula.stats import SeedAwareResult
from curricula.study import is_active_claim

#: a cell's key in a round's record: (claim id, dataset)
Cell = tuple[str, str]
#: an arm: (dataset, the metrics name a claim compares: an experiment or ``<experiment>+bm25``)
Arm = tuple[str, str]


def study_looks(looks: Sequence[int], max_seeds: int | None = None) -> tuple[int, ...]:
    """The looks a study runs: ``looks`` (strictly increasing seed counts, the first at least 2: the seed-aware test
    needs two seeds for its seed term) capped at ``max_seeds``. Looks above the cap are dropped and a cap between two
    looks becomes the last look ((5, 10, 15, 20) capped at 12: (5, 10, 12)); a cap above the last look changes
    nothing; a cap below the first look is refused.
    Raises ValueError naming the config key."""
    looks = tuple(int(s) for s in looks)
    if not looks or looks[0] < 2 or any(b <= a for a, b in zip(looks, looks[1:])):
        raise ValueError(f"study.sequential.looks must be strictly increasing seed counts, the first at least 2 (the "
                         f"seed-aware test needs two seeds), got {list(looks)}")
    if max_seeds is None:
        return looks
    if max_seeds < looks[0]:
        raise ValueError(f"study.max_seeds {max_seeds} is below the first look ({looks[0]} seeds); lower "
                         f"study.sequential.looks or raise the cap")
    kept = tuple(s for s in looks if s <= max_seeds)
    return kept if kept[-1] == max_seeds or max_seeds > looks[-1] else (*kept, max_seeds)


def look_seeds(seeds: Sequence[int], count: int) -> list[int]:
    """The first ``count`` seeds of ``seeds`` extended past its largest seed by consecutive integers: the seeds of a
    look of ``count`` seeds ([1, 2, 3, 4] and 6 -> [1, 2, 3, 4, 5, 6]; [7, 3] and 4 -> [7, 3, 8, 9])."""
    out = list(seeds)[:count]
    nxt = max(seeds) + 1
    while len(out) < count:
        out.append(nxt)
        nxt += 1
    return out


def sequential_claims(claims: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The claims the rounds decide: all but the active-learning ones, which stay fixed-seed."""
    return [claim for claim in claims if not is_active_claim(claim)]


def first_round_arms(claims: Sequence[Mapping[str, Any]], datasets: Sequence[str]) -> list[Arm]:
    """Every arm of every sequential claim on every dataset, in claim then dataset order: the first round's."""
    return list(dict.fromkeys((dataset, claim[arm]) for claim in sequential_claims(claims) for dataset in datasets
                              for arm in ("experiment", "against")))


def arms_to_extend(decisions: Mapping[Cell, SequentialDecision], claims: Sequence[Mapping[str, Any]]) -> list[Arm]:
    """The arms that need the next round's seeds: both arms of every cell whose decision is ``continue``, once each
    (an arm shared by several claims, e.g. the baseline, is listed when any of its cells is open). A cell decided at
    a look, or ``inconclusive`` after the last, needs none."""
    by_id = {claim["id"]: claim for claim in claims}
    return list(dict.fromkeys((dataset, by_id[claim_id][arm]) for (claim_id, dataset), decision in decisions.items()
                              if decision.verdict == CONTINUE for arm in ("experiment", "against")))


def cell_margin(frame: pl.DataFrame, against: str, experiment: str, measure: str, seeds: Sequence[int],
                margin: float) -> float:
    """The cell's absolute equivalence margin: ``margin`` (relative, ``study.equivalence_margin``) times the
    ``against`` arm's mean on the first look's ``seeds`` (as :func:`curricula.findings.claim_row` scales it).
    Raises ValueError when that mean is not positive (no relative margin exists)."""
    _, y = _paired(with_seeds(frame, seeds), experiment, measure, None, against)
    mean = float(y.mean())
    if not mean > 0:
        raise ValueError(f"{against} has mean {measure} {mean} on the first look's seeds; a margin relative to it "
                         f"needs a positive mean")
    return margin * mean


def look_results(frame: pl.DataFrame, experiment: str, against: str, measure: str,
                 seeds_by_look: Sequence[Sequence[int]], alpha: float = 0.05) -> list[SeedAwareResult]:
    """The seed-aware test (:func:`curricula.comparisons.seed_aware_result`) of ``experiment`` - ``against`` on the
    seeds of each look in ``seeds_by_look``, in order (the looks reached so far)."""
    out = []
    for seeds in seeds_by_look:
        result = seed_aware_result(with_seeds(frame, seeds), experiment, measure, against, alpha)
        assert result is not None  # seed_aware inference raises instead of returning None
        out.append(result)
    return out


def cell_decision(frame: pl.DataFrame, claim: Mapping[str, Any], measure: str, design: SequentialDesign,
                  seeds: Sequence[int], reached: int, margin: float) -> SequentialDecision:
    """The sequential verdict of one claim on one dataset after ``reached`` looks (1-based count): the seed-aware
    results on the first ``design.looks[k]`` of ``seeds`` for each look k reached, judged by
    :func:`curricula.sequential.sequential_decision` against the absolute margin of :func:`cell_margin`."""
    if not 1 <= reached <= len(design.looks):
        raise ValueError(f"looks reached must lie in 1..{len(design.looks)}, got {reached}")
    by_look = [look_seeds(seeds, count) for count in design.looks[:reached]]
    experiment, against = claim["experiment"], claim["against"]
    margin_abs = cell_margin(frame, against, experiment, measure, by_look[0], margin)
    results = look_results(frame, experiment, against, measure, by_look, design.alpha)
    return sequential_decision(results, design, claim["expect"], margin_abs)


def study_round(metrics: Mapping[str, pl.DataFrame], claims: Sequence[Mapping[str, Any]],
                previous: Mapping[Cell, SequentialDecision], design: SequentialDesign,
                seeds: Mapping[str, Sequence[int]], round_: int, measure: str,
                margin: float) -> dict[Cell, SequentialDecision]:
    """The decision of every sequential cell after round ``round_`` (1-based): a cell decided in an earlier round
    (in ``previous``, not ``continue``) keeps its decision; every other cell is judged on the looks 1..``round_``
    (:func:`cell_decision`) from ``metrics`` ({dataset: long metrics frame} holding both of its arms' seeds of this
    round). ``seeds`` maps a dataset to its seed list (:func:`look_seeds` extends it). Cells are keyed (claim id,
    dataset), in claim then dataset order."""
    out: dict[Cell, SequentialDecision] = {}
    for claim in sequential_claims(claims):
        for dataset in seeds:
            cell = (claim["id"], dataset)
            if cell in previous and previous[cell].verdict != CONTINUE:
                out[cell] = previous[cell]
                continue
            if round_ > 1 and cell not in previous:
                raise ValueError(f"study claim {claim['id']!r} on {dataset}: no decision from round {round_ - 1}")
            try:
                out[cell] = cell_decision(metrics[dataset], claim, measure, design, seeds[dataset], round_, margin)
            except (KeyError, ValueError) as err:
                raise ValueError(f"study claim {claim['id']!r} on {dataset}, round {round_}: {err}") from None
    return out


def trained_seeds(previous: Mapping[Arm, int], extended: Sequence[Arm], count: int) -> dict[Arm, int]:
    """{arm: seeds it has trained} after a round of ``count`` seeds that trained the arms ``extended``."""
    return {**previous, **{arm: count for arm in extended}}


def round_record(round_: int, design: SequentialDesign, decisions: Mapping[Cell, SequentialDecision],
                 trained: Mapping[Arm, int], claims: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the checkpoint ``study_round`` writes: the round, the looks, every cell's decision (the verdict, the
    0-based look and seed count it rests on, its p values and that look's thresholds), the seeds each arm has
    trained, and ``next``: the arms that need the next round's seeds (none after the last look)."""
    last = round_ >= len(design.looks)
    return {"round": round_, "looks": list(design.looks), "alpha": design.alpha, "kind": design.kind,
            "decisions": [{"claim": claim_id, "dataset": dataset, **asdict(decision)}
                          for (claim_id, dataset), decision in decisions.items()],
            "trained": [{"dataset": dataset, "arm": arm, "seeds": n} for (dataset, arm), n in trained.items()],
            "next": [] if last else [{"dataset": dataset, "arm": arm}
                                     for dataset, arm in arms_to_extend(decisions, claims)]}


def read_round(path: str | Path) -> dict[str, Any]:
    """A round's record as :func:`round_record` wrote it, with ``decisions`` as {(claim, dataset):
    SequentialDecision}, ``trained`` as {(dataset, arm): seeds} and ``next`` as a list of (dataset, arm)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    fields = SequentialDecision.__dataclass_fields__
    data["decisions"] = {(d["claim"], d["dataset"]): SequentialDecision(**{k: d[k] for k in fields})
                         for d in data["decisions"]}
    data["trained"] = {(t["dataset"], t["arm"]): int(t["seeds"]) for t in data["trained"]}
    data["next"] = [(n["dataset"], n["arm"]) for n in data["next"]]
    return data


def study_round_stage(metric_paths: Mapping[tuple[str, str, str], str | Path], previous_path: str | Path | None,
                      output: str | Path, *, claims: Sequence[Mapping[str, Any]], looks: Sequence[int], kind: str,
                      alpha: float, seeds: Mapping[str, Sequence[int]], round_: int, measure: str,
                      margin: float) -> dict[str, Any]:
    """Checkpoint ``study_round``: this round's metrics, keyed (dataset, arm, seed), and the previous round's record
    (none in round 1) to this round's record (:func:`round_record`), written atomically as JSON."""
    from curricula.comparisons import load_metrics
    from curricula.sequential import sequential_design
    from curricula.tables import write_text_atomically

    design = sequential_design(looks, alpha, kind)
    if not 1 <= round_ <= len(design.looks):
        raise ValueError(f"round {round_} outside the looks {list(design.looks)}")
    previous = read_round(previous_path) if previous_path else {"decisions": {}, "trained": {}}
    by_dataset: dict[str, dict[tuple[str, str], str | Path]] = {}
    for (dataset, arm, seed), path in metric_paths.items():
        by_dataset.setdefault(dataset, {})[(arm, seed)] = path
    metrics = {dataset: load_metrics(paths) for dataset, paths in by_dataset.items()}
    decisions = study_round(metrics, claims, previous["decisions"], design, seeds, round_, measure, margin)
    extended = list(dict.fromkeys((dataset, arm) for dataset, arm, _ in metric_paths))
    trained = trained_seeds(previous["trained"], extended, design.looks[round_ - 1])
    record = round_record(round_, design, decisions, trained, claims)
    write_text_atomically(output, json.dumps(record, indent=1, allow_nan=True) + "\n")
    return record


__all__ = ["Arm", "Cell", "arms_to_extend", "cell_decision", "cell_margin", "first_round_arms", "look_results",
           "look_seeds", "read_round", "round_record", "sequential_claims", "study_looks", "study_round",
           "study_round_stage", "trained_seeds"]

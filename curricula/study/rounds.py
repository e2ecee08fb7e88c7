"""A study's seeds in rounds (config ``study.sequential``; issue 45, item 4): which seeds each look trains, the
sequential verdict of every (claim, dataset) cell after a round, and which arms the undecided cells need the next
round's seeds for.

Round k (1-based) trains the first ``looks[k-1]`` seeds of the dataset's seed list, extended past its largest seed
by consecutive integers (:func:`curricula.study.looks.look_seeds`): with ``seeds: [1, 2, 3, 4]`` and looks (5, 10)
the rounds train seeds 1-5 and 1-10. After each round the checkpoint ``study_round`` (rules/study.smk) tests
every cell still open on the seeds so far by the group-sequential seed-aware rule of
:func:`curricula.statistics.sequential_verdicts.sequential_decision` (per-look
thresholds from Lan-DeMets alpha spending; Lan & DeMets 1983, *Biometrika* 70: 659-663), keeps the verdict of every
cell decided before, and lists the arms that need the next round's seeds (:func:`arms_to_extend`): both arms of
every cell still at ``continue``, so an arm shared by several claims (the baseline) trains more seeds when any of its
claims is open. Active-learning claims (``active:<method>@<round>``) stay fixed-seed (``active.seeds``): the
rounds leave them out and the findings judge them as without rounds.

With ``study.multiplicity: holm`` (the default) the cells are not judged one by one at alpha but as one family: the
sequential Holm procedure (:func:`curricula.statistics.sequential_verdicts.holm_design`; Maurer & Bretz 2013) over every
cell's difference
and equivalence hypotheses, at the share of alpha the sequential claims hold among all claims (:func:`family_alpha`).
Each round's record keeps every cell's tests at the looks it reached, so a later round's step-down can count the
hypotheses of cells decided before without their metrics.

The equivalence margin of a cell is ``study.equivalence_margin`` times the ``against`` arm's mean over the first
look's seeds (:func:`cell_margin`), fixed for the cell's later looks so that a later round never moves the bar an
earlier look was judged against.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import polars as pl

from curricula.evaluation.comparisons import _paired, seed_aware_result, with_seeds
from curricula.statistics.group_sequential import SequentialDesign, sequential_design
from curricula.statistics.seed_aware import SeedAwareResult
from curricula.statistics.sequential_verdicts import (
    CONTINUE,
    SEQUENTIAL_MULTIPLICITIES,
    LookTests,
    SequentialDecision,
    holm_design,
    look_tests,
    sequential_decision,
)
from curricula.study.grid import claim_datasets, is_active_claim
from curricula.study.looks import look_seeds

#: a cell's key in a round's record: (claim id, dataset)
Cell = tuple[str, str]
#: an arm: (dataset, the metrics name a claim compares: an experiment or ``<experiment>+bm25``)
Arm = tuple[str, str]


def sequential_claims(claims: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The claims the rounds decide: all but the active-learning ones, which stay fixed-seed."""
    return [claim for claim in claims if not is_active_claim(claim)]


def first_round_arms(claims: Sequence[Mapping[str, Any]], datasets: Sequence[str]) -> list[Arm]:
    """Every arm of every sequential claim on every dataset it is tested on
    (:func:`curricula.study.grid.claim_datasets`),
    in claim then dataset order: the first round's."""
    return list(dict.fromkeys((dataset, claim[arm]) for claim in sequential_claims(claims)
                              for dataset in claim_datasets(claim, datasets) for arm in ("experiment", "against")))


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
    ``against`` arm's mean on the first look's ``seeds`` (as :func:`curricula.study.findings.claim_row` scales it).
    Raises ValueError when that mean is not positive (no relative margin exists)."""
    _, y = _paired(with_seeds(frame, seeds), experiment, measure, None, against)
    mean = float(y.mean())
    if not mean > 0:
        raise ValueError(f"{against} has mean {measure} {mean} on the first look's seeds; a margin relative to it "
                         f"needs a positive mean")
    return margin * mean


def look_results(frame: pl.DataFrame, experiment: str, against: str, measure: str,
                 seeds_by_look: Sequence[Sequence[int]], alpha: float = 0.05) -> list[SeedAwareResult]:
    """The seed-aware test (:func:`curricula.evaluation.comparisons.seed_aware_result`) of ``experiment`` - ``against``
    on the
    seeds of each look in ``seeds_by_look``, in order (the looks reached so far)."""
    out = []
    for seeds in seeds_by_look:
        result = seed_aware_result(with_seeds(frame, seeds), experiment, measure, against, alpha)
        assert result is not None  # seed_aware inference raises instead of returning None
        out.append(result)
    return out


def cell_results(frame: pl.DataFrame, claim: Mapping[str, Any], measure: str, looks: Sequence[int],
                 seeds: Sequence[int], reached: int, margin: float, alpha: float = 0.05
                 ) -> tuple[list[SeedAwareResult], float]:
    """The seed-aware results of one claim on one dataset on the first ``looks[k]`` of ``seeds`` for each look k
    reached (``reached``, a 1-based count), and the cell's absolute margin (:func:`cell_margin`, on the first look's
    seeds)."""
    if not 1 <= reached <= len(looks):
        raise ValueError(f"looks reached must lie in 1..{len(looks)}, got {reached}")
    by_look = [look_seeds(seeds, count) for count in looks[:reached]]
    experiment, against = claim["experiment"], claim["against"]
    margin_abs = cell_margin(frame, against, experiment, measure, by_look[0], margin)
    return look_results(frame, experiment, against, measure, by_look, alpha), margin_abs


@dataclass(frozen=True)
class RoundOutcome:
    """The judgement of a round (:func:`study_round`): every sequential cell's decision and its tests at the looks it
    reached (:func:`curricula.statistics.sequential_verdicts.look_tests`; a decided cell keeps those of the round it
    stopped at), the
    design the open cells were judged by (under Holm, at the step-down's final level), and the family's size and
    rejected hypotheses (0 and 0 without an adjustment)."""

    decisions: dict[Cell, SequentialDecision]
    tests: dict[Cell, list[LookTests]]
    design: SequentialDesign
    hypotheses: int
    rejected: int


def study_round(metrics: Mapping[str, pl.DataFrame], claims: Sequence[Mapping[str, Any]],
                previous: Mapping[Cell, SequentialDecision], previous_tests: Mapping[Cell, Sequence[LookTests]],
                looks: Sequence[int], alpha: float, kind: str, seeds: Mapping[str, Sequence[int]], round_: int,
                measure: str, margin: float, multiplicity: str = "holm") -> RoundOutcome:
    """The decision of every sequential cell after round ``round_`` (1-based). A cell decided in an earlier round (in
    ``previous``, not ``continue``) keeps its decision and its tests (``previous_tests``); every other cell is tested
    on the looks 1..``round_`` (:func:`cell_results`) from ``metrics`` ({dataset: long metrics frame} holding both of
    its arms' seeds of this round). ``seeds`` maps a dataset to its seed list
    (:func:`curricula.study.looks.look_seeds` extends it).

    ``multiplicity="holm"`` judges the open cells at the level of the sequential Holm procedure over every cell's two
    hypotheses (:func:`curricula.statistics.sequential_verdicts.holm_design`, family-wise error ``alpha``); ``"none"``
    judges each cell
    at ``alpha`` alone (:func:`curricula.statistics.sequential_verdicts.sequential_decision`). Cells are keyed (claim
    id, dataset), in
    claim then dataset order."""
    if multiplicity not in SEQUENTIAL_MULTIPLICITIES:
        raise ValueError(f"study.multiplicity {multiplicity!r} with study.sequential: expected one of "
                         f"{', '.join(SEQUENTIAL_MULTIPLICITIES)} (no sequential Benjamini-Hochberg is built; Holm "
                         f"bounds the false discovery rate too)")
    tests: dict[Cell, list[LookTests]] = {}
    open_cells: dict[Cell, tuple[list[SeedAwareResult], float, str]] = {}
    for claim in sequential_claims(claims):
        for dataset in claim_datasets(claim, list(seeds)):
            cell = (claim["id"], dataset)
            if cell in previous and previous[cell].verdict != CONTINUE:
                if cell not in previous_tests:
                    raise ValueError(f"study claim {claim['id']!r} on {dataset}: decided in round {round_ - 1} but "
                                     f"its tests are not in that round's record")
                # each look's record is its three tests (LookTests); tuple() keeps that length, only the type
                # of tuple() forgets it
                tests[cell] = [cast(LookTests, tuple(t)) for t in previous_tests[cell]]
                continue
            if round_ > 1 and cell not in previous:
                raise ValueError(f"study claim {claim['id']!r} on {dataset}: no decision from round {round_ - 1}")
            try:
                results, margin_abs = cell_results(metrics[dataset], claim, measure, looks, seeds[dataset], round_,
                                                   margin, alpha)
            except (KeyError, ValueError) as err:
                raise ValueError(f"study claim {claim['id']!r} on {dataset}, round {round_}: {err}") from None
            tests[cell] = look_tests(results, margin_abs)
            open_cells[cell] = (results, margin_abs, claim["expect"])
    if multiplicity == "holm" and tests:
        holm = holm_design(list(tests.values()), looks, alpha, kind)
        design, hypotheses, rejected = holm.design, holm.hypotheses, holm.rejected
    else:
        design, hypotheses, rejected = sequential_design(looks, alpha, kind), 0, 0
    decisions = {cell: previous[cell] if cell not in open_cells else
                 sequential_decision(open_cells[cell][0], design, open_cells[cell][2], open_cells[cell][1])
                 for cell in tests}
    return RoundOutcome(decisions, tests, design, hypotheses, rejected)


def trained_seeds(previous: Mapping[Arm, int], extended: Sequence[Arm], count: int) -> dict[Arm, int]:
    """{arm: seeds it has trained} after a round of ``count`` seeds that trained the arms ``extended``."""
    return {**previous, **{arm: count for arm in extended}}


def round_record(round_: int, outcome: RoundOutcome, looks: Sequence[int], alpha: float, multiplicity: str,
                 trained: Mapping[Arm, int], claims: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the checkpoint ``study_round`` writes: the round, the looks, the family's alpha and adjustment, the level
    and thresholds the open cells were judged at, every cell's decision (the verdict, the 0-based look and seed count
    it rests on, its p values and that look's thresholds) with its tests at each look it reached, the seeds each arm
    has trained, and ``next``: the arms that need the next round's seeds (none after the last look)."""
    last = round_ >= len(looks)
    design = outcome.design
    return {"round": round_, "looks": list(looks), "alpha": alpha, "multiplicity": multiplicity,
            "level": design.alpha, "kind": design.kind, "difference": list(design.difference),
            "equivalence": list(design.equivalence), "hypotheses": outcome.hypotheses, "rejected": outcome.rejected,
            "decisions": [{"claim": claim_id, "dataset": dataset, **asdict(decision),
                           "tests": [list(t) for t in outcome.tests[(claim_id, dataset)]]}
                          for (claim_id, dataset), decision in outcome.decisions.items()],
            "trained": [{"dataset": dataset, "arm": arm, "seeds": n} for (dataset, arm), n in trained.items()],
            "next": [] if last else [{"dataset": dataset, "arm": arm}
                                     for dataset, arm in arms_to_extend(outcome.decisions, claims)]}


def read_round(path: str | Path) -> dict[str, Any]:
    """A round's record as :func:`round_record` wrote it, with ``decisions`` as {(claim, dataset):
    SequentialDecision}, ``tests`` as {(claim, dataset): [(effect, p, equivalence p) per look]}, ``trained`` as
    {(dataset, arm): seeds} and ``next`` as a list of (dataset, arm)."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    fields = SequentialDecision.__dataclass_fields__
    data["tests"] = {(d["claim"], d["dataset"]): [tuple(t) for t in d["tests"]] for d in data["decisions"]}
    data["decisions"] = {(d["claim"], d["dataset"]): SequentialDecision(**{k: d[k] for k in fields})
                         for d in data["decisions"]}
    data["trained"] = {(t["dataset"], t["arm"]): int(t["seeds"]) for t in data["trained"]}
    data["next"] = [(n["dataset"], n["arm"]) for n in data["next"]]
    return data


def study_round_outputs(metrics: Mapping[str, pl.DataFrame], extended: Sequence[Arm], previous_path: str | Path | None,
                        output: str | Path, *, claims: Sequence[Mapping[str, Any]], looks: Sequence[int], kind: str,
                        alpha: float, seeds: Mapping[str, Sequence[int]], round_: int, measure: str, margin: float,
                        multiplicity: str = "holm") -> dict[str, Any]:
    """This round's record (:func:`round_record`), written atomically as JSON, from ``metrics`` ({dataset: long
    metrics frame} of this round's seeds), the arms that trained them (``extended``) and the previous round's record
    (none in round 1).

    ``claims`` are all the study's claims. Under Holm the rounds' family (the sequential claims' cells) gets the share
    of ``alpha`` its hypotheses hold in the findings page's family (:func:`family_alpha`): the fixed-seed
    active-learning claims keep the rest, a weighted Bonferroni split between the two families."""
    from curricula.plumbing.atomic import write_text_atomically

    looks = tuple(int(s) for s in looks)
    if not 1 <= round_ <= len(looks):
        raise ValueError(f"round {round_} outside the looks {list(looks)}")
    previous = read_round(previous_path) if previous_path else {"decisions": {}, "tests": {}, "trained": {}}
    level = family_alpha(claims, alpha, list(seeds)) if multiplicity == "holm" else alpha
    outcome = study_round(metrics, claims, previous["decisions"], previous["tests"], looks, level, kind, seeds, round_,
                          measure, margin, multiplicity)
    trained = trained_seeds(previous["trained"], list(extended), looks[round_ - 1])
    record = round_record(round_, outcome, looks, level, multiplicity, trained, claims)
    write_text_atomically(output, json.dumps(record, indent=1, allow_nan=True) + "\n")
    return record


def round_from_ledger(runs: Mapping[tuple[str, str, int], str], previous_path: str | Path | None,
                      output: str | Path, *, ledger: str | Path, **settings: Any) -> dict[str, Any]:
    """Checkpoint ``study_round``: this round's claim runs ({(dataset, claim arm, seed): its entry's path},
    :func:`curricula.study.ledger_runs.claim_runs`), their values read from the study's ``ledger``
    (:func:`curricula.study.ledger_runs.gather`), to this round's record (:func:`study_round_outputs`; ``settings``
    are its keyword arguments)."""
    from curricula.study.ledger_runs import claim_frames, gather

    metrics = claim_frames(gather(ledger, runs))
    extended = list(dict.fromkeys((dataset, arm) for dataset, arm, _ in runs))
    return study_round_outputs(metrics, extended, previous_path, output, **settings)


def round_chain(records: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], str | None]:
    """The leading records (as :func:`read_round` returns them, in round order) that form one run of a study's
    rounds, and why the first record after them does not continue it (``None`` when all do).

    A round folder can hold records of another run: rounds 2-4 of an earlier run stay on disk while a run with other
    claims or retrained arms has finished only its first round, or decided every cell sooner. (A ``study.only``
    selection has a folder of its own, :func:`curricula.study.grid.study_name`.) A record continues the one
    before it when it is the next round of the same looks and cells, every cell decided before keeps its decision,
    and each cell's tests at the looks already reached are unchanged (the same seeds' metrics give the same numbers).
    """
    kept: list[Mapping[str, Any]] = []
    for record in records:
        if not kept:
            if record["round"] != 1:
                return kept, f"the first record is round {record['round']}, not round 1"
            kept.append(record)
            continue
        prev = kept[-1]
        label = f"round {record['round']}"
        if record["round"] != prev["round"] + 1:
            return kept, f"{label} follows round {prev['round']}: round {prev['round'] + 1} is missing"
        if list(record["looks"]) != list(prev["looks"]):
            return kept, f"{label} has looks {list(record['looks'])}, round {prev['round']} {list(prev['looks'])}"
        if set(record["decisions"]) != set(prev["decisions"]):
            other = sorted(set(record["decisions"]) ^ set(prev["decisions"]))
            return kept, f"{label} judges other cells than round {prev['round']} ({', '.join(map(str, other[:3]))})"
        for cell, decision in prev["decisions"].items():
            earlier = list(prev["tests"][cell])
            if list(record["tests"][cell])[:len(earlier)] != earlier:
                return kept, f"{label} has other tests for {cell} at the looks round {prev['round']} reached"
            if decision.verdict != CONTINUE and record["decisions"][cell] != decision:
                return kept, f"{label} changes {cell}'s decision of round {prev['round']}"
        kept.append(record)
    return kept, None


def rounds_markdown(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rounds of a study as markdown lines (``python -m curricula.cli rounds``): per round (records as
    :func:`read_round` returns them, in order) the family's level, hypotheses and rejections, and a table of every
    cell's verdict, the seeds it rests on, its effect and p at its last look and the p threshold it was judged by;
    then the arms each round sent on."""
    lines: list[str] = []
    for record in records:
        lines += [f"## Round {record['round']} of {len(record['looks'])} (looks {record['looks']})", "",
                  f"Family: {record.get('multiplicity', 'none')}, alpha {record['alpha']:.4g}, cells judged at level "
                  f"{record.get('level', record['alpha']):.4g}; {record.get('rejected', 0)} of "
                  f"{record.get('hypotheses', 0)} hypotheses rejected.", "",
                  "| claim | dataset | verdict | seeds | effect | p | p threshold | equivalence p | its threshold |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for (claim, dataset), decision in record["decisions"].items():
            effect = record["tests"][(claim, dataset)][decision.look][0]
            lines.append(f"| {claim} | {dataset} | {decision.verdict} | {decision.seeds} | {effect:+.4f} | "
                         f"{decision.p:.3g} | {decision.p_boundary:.3g} | {decision.p_equivalence:.3g} | "
                         f"{decision.equivalence_boundary:.3g} |")
        arms = ", ".join(f"{arm} ({dataset})" for dataset, arm in record["next"]) or "none"
        lines += ["", f"Arms that train the next round's seeds: {arms}.", ""]
    return lines


def family_alpha(claims: Sequence[Mapping[str, Any]], alpha: float, datasets: Sequence[str]) -> float:
    """The rounds' share of the study's ``alpha``: alpha times the sequential claims' share of all (claim, dataset)
    cells over ``datasets`` (each cell holds two hypotheses; a claim counts on the datasets it is tested on,
    :func:`curricula.study.grid.claim_datasets`), the rest left to the fixed-seed active-learning claims."""
    def cells(of: Sequence[Mapping[str, Any]]) -> int:
        return sum(len(claim_datasets(claim, datasets)) for claim in of)

    if not cells(claims):
        raise ValueError("a study needs at least one claim tested on one of its datasets")
    return alpha * cells(sequential_claims(claims)) / cells(claims)


__all__ = ["Arm", "arms_to_extend", "Cell", "cell_margin", "cell_results", "family_alpha", "first_round_arms",
           "look_results", "read_round", "round_chain", "round_from_ledger", "round_record", "RoundOutcome",
           "rounds_markdown", "sequential_claims", "study_round", "study_round_outputs", "trained_seeds"]

"""Seeds in rounds (curricula/study/rounds.py; config study.sequential): the looks under a cap, the seeds of a look, the
sequential verdict of each (claim, dataset) cell after a round, and which arms the undecided cells need more seeds
for, on seeded synthetic per-query metrics whose effects are known."""

from __future__ import annotations

import copy
import json

import numpy as np
import polars as pl
import pytest

from curricula.evaluation.comparisons import with_seeds
from curricula.plumbing.keys import without_bm25
from curricula.statistics.group_sequential import sequential_design
from curricula.statistics.sequential_verdicts import CONTINUE, SequentialDecision
from curricula.statistics.verdicts import INCONCLUSIVE, REPRODUCED
from curricula.study.findings import findings_table
from curricula.study.rounds import (
    arms_to_extend,
    family_alpha,
    first_round_arms,
    read_round,
    round_chain,
    round_from_ledger,
    rounds_markdown,
    sequential_claims,
    study_round,
)
from curricula.study.looks import look_seeds, study_looks
from tests.ledger_fixtures import ledger_from_frames

QUERIES = 40
LOOKS = (3, 6)
CLAIMS = [
    {"id": "big", "paper": "P", "claim": "a large gain", "experiment": "big", "against": "baseline",
     "expect": "better"},
    {"id": "null", "paper": "P", "claim": "no gain really", "experiment": "noisy", "against": "baseline",
     "expect": "better"},
    {"id": "al", "paper": "W", "claim": "an active-learning claim", "experiment": "active:dasl@1",
     "against": "active:random@1", "expect": "better"},
]


def _metrics(seeds: range | list[int], rng_seed: int = 0, arms: tuple[str, ...] = ("baseline", "big", "noisy")
             ) -> pl.DataFrame:
    """AP per (arm, seed, query): the baseline's query means plus seed and residual noise; ``big`` is 0.15 above it
    with little noise (decided at once), ``noisy`` has mean 0 against it and large seed noise (open)."""
    rng = np.random.default_rng(rng_seed)
    base = rng.uniform(0.3, 0.7, QUERIES)
    rows = []
    for seed in seeds:
        shared = base + rng.normal(0, 0.01, QUERIES)
        values = {"baseline": shared,
                  "big": shared + 0.15 + rng.normal(0, 0.01) + rng.normal(0, 0.01, QUERIES),
                  "noisy": shared + rng.normal(0, 0.08) + rng.normal(0, 0.1, QUERIES)}
        for arm in arms:
            rows += [{"experiment": arm, "seed": str(seed), "qid": f"q{q:02d}", "measure": "AP",
                      "value": float(values[arm][q])} for q in range(QUERIES)]
    return pl.DataFrame(rows)


def _metric_files(frame: pl.DataFrame, folder) -> dict[tuple[str, int, str], object]:
    """Each (arm, seed)'s entry in the ledger ``folder``/ledger, keyed as the checkpoint takes them: (dataset "d",
    arm, seed)."""
    return ledger_from_frames(folder / "ledger", {"d": frame})


def _round(metrics, previous, seeds, round_, multiplicity="none", previous_tests=None):
    """study_round with the tests' design: Pocock spending over LOOKS at alpha 0.05, margin 2%."""
    return study_round(metrics, CLAIMS, previous, previous_tests if previous_tests is not None else {}, LOOKS, 0.05,
                       "pocock", seeds, round_, "AP", 0.02, multiplicity)


def test_the_cap_drops_later_looks_and_a_cap_between_looks_becomes_the_last():
    assert study_looks([5, 10, 15, 20]) == (5, 10, 15, 20)
    assert study_looks([5, 10, 15, 20], 20) == (5, 10, 15, 20)
    assert study_looks([5, 10, 15, 20], 30) == (5, 10, 15, 20)
    assert study_looks([5, 10, 15, 20], 12) == (5, 10, 12)
    assert study_looks([5, 10, 15, 20], 10) == (5, 10)
    assert study_looks([5, 10, 15, 20], 5) == (5,)
    with pytest.raises(ValueError, match="study.max_seeds 4 is below the first look"):
        study_looks([5, 10], 4)
    for bad in ([], [1, 5], [5, 5], [10, 5]):
        with pytest.raises(ValueError, match="study.sequential.looks must be strictly increasing"):
            study_looks(bad)


def test_a_look_takes_the_first_seeds_of_the_list_extended_past_its_largest():
    assert look_seeds([1, 2, 3, 4], 3) == [1, 2, 3]
    assert look_seeds([1, 2, 3, 4], 6) == [1, 2, 3, 4, 5, 6]
    assert look_seeds([7, 3], 4) == [7, 3, 8, 9]
    assert look_seeds([1], 1) == [1]


def test_active_claims_stay_fixed_seed_and_round_one_trains_every_other_arm():
    assert [c["id"] for c in sequential_claims(CLAIMS)] == ["big", "null"]
    assert first_round_arms(CLAIMS, ["a", "b"]) == [("a", "big"), ("a", "baseline"), ("b", "big"), ("b", "baseline"),
                                                    ("a", "noisy"), ("b", "noisy")]
    assert without_bm25("baseline+bm25") == "baseline" and without_bm25("hcl") == "hcl"


def _decision(verdict: str, look: int = 0) -> SequentialDecision:
    return SequentialDecision(verdict, look, LOOKS[look], 0.5, 0.5, 0.01, 0.01)


def test_only_the_arms_of_undecided_cells_get_more_seeds_and_a_shared_arm_if_any_claim_is_open():
    claims = [{"id": "x", "experiment": "x", "against": "baseline"},
              {"id": "y", "experiment": "y", "against": "baseline"},
              {"id": "z", "experiment": "z", "against": "y"}]
    decisions = {("x", "a"): _decision(REPRODUCED), ("y", "a"): _decision(CONTINUE), ("z", "a"): _decision(CONTINUE),
                 ("x", "b"): _decision(REPRODUCED), ("y", "b"): _decision(INCONCLUSIVE, 1),
                 ("z", "b"): _decision("equivalent")}
    assert arms_to_extend(decisions, claims) == [("a", "y"), ("a", "baseline"), ("a", "z")]
    assert arms_to_extend({cell: _decision(REPRODUCED) for cell in decisions}, claims) == []


def test_a_cell_decided_at_the_first_look_gets_no_more_seeds():
    metrics = {"d": _metrics(range(1, 4))}
    decisions = _round(metrics, {}, {"d": [1, 2, 3]}, 1).decisions
    assert list(decisions) == [("big", "d"), ("null", "d")]  # the active claim is left out
    big, null = decisions[("big", "d")], decisions[("null", "d")]
    assert big.verdict == REPRODUCED and big.look == 0 and big.seeds == 3 and big.p < big.p_boundary
    assert null.verdict == CONTINUE and null.seeds == 3 and null.p >= null.p_boundary
    assert arms_to_extend(decisions, CLAIMS) == [("d", "noisy"), ("d", "baseline")]


def test_the_second_round_keeps_earlier_decisions_and_judges_the_open_cells_on_all_its_looks():
    full = _metrics(range(1, 7))
    first = _round({"d": with_seeds(full, [1, 2, 3])}, {}, {"d": [1]}, 1)
    extended = full.filter(pl.col("experiment").is_in(["noisy", "baseline"]))  # big trains no seeds 4-6
    second = _round({"d": extended}, first.decisions, {"d": [1]}, 2, previous_tests=first.tests)
    assert second.decisions[("big", "d")] == first.decisions[("big", "d")]
    assert second.tests[("big", "d")] == first.tests[("big", "d")] and len(second.tests[("null", "d")]) == 2
    null = second.decisions[("null", "d")]
    assert null.verdict != CONTINUE and null.seeds == 6 and null.look == 1  # the last look decides every cell
    with pytest.raises(ValueError, match="no decision from round 1"):
        _round({"d": extended}, {}, {"d": [1]}, 2)
    with pytest.raises(ValueError, match="its tests are not in that round's record"):
        _round({"d": extended}, first.decisions, {"d": [1]}, 2)


def test_holm_judges_the_open_cells_at_the_family_level_after_the_step_down():
    """Two cells, four hypotheses: the large effect's difference crosses at alpha / 2 (one true null at most per
    cell, two cells), and its equivalence, which may still be true, keeps that cell in the count; the open cell is
    judged at alpha / 2."""
    metrics = {"d": _metrics(range(1, 4))}
    holm = _round(metrics, {}, {"d": [1, 2, 3]}, 1, "holm")
    plain = _round(metrics, {}, {"d": [1, 2, 3]}, 1, "none")
    assert holm.hypotheses == 4 and holm.rejected == 1
    assert holm.design.alpha == pytest.approx(0.05 / 2) and plain.design.alpha == 0.05
    assert holm.decisions[("big", "d")].verdict == REPRODUCED and holm.decisions[("null", "d")].verdict == CONTINUE
    expected = sequential_design(LOOKS, 0.05 / 2, "pocock")
    null_boundary = holm.decisions[("null", "d")].p_boundary
    assert null_boundary == expected.difference[0] < plain.decisions[("null", "d")].p_boundary
    with pytest.raises(ValueError, match="no sequential Benjamini-Hochberg"):
        _round(metrics, {}, {"d": [1, 2, 3]}, 1, "bh")
    assert family_alpha(CLAIMS, 0.05, ["d"]) == pytest.approx(0.05 * 2 / 3)  # the active-learning claim: a third


def test_a_claim_tested_on_some_datasets_gets_arms_cells_and_alpha_there_only():
    # a dataset added a second time with another ranker ("d_ce"): the active-learning claim is tested on "d" alone,
    # the "null" claim on "d_ce" alone, so the rounds never train its arms on "d" and the cells count accordingly
    claims = [CLAIMS[0], {**CLAIMS[1], "datasets": ["d_ce"]}, {**CLAIMS[2], "datasets": ["d"]}]
    assert first_round_arms(claims, ["d", "d_ce"]) == [("d", "big"), ("d", "baseline"), ("d_ce", "big"),
                                                       ("d_ce", "baseline"), ("d_ce", "noisy")]
    # 3 sequential cells (big on both, null on d_ce) and 1 active-learning cell: the rounds hold 3 of 4 shares
    assert family_alpha(claims, 0.05, ["d", "d_ce"]) == pytest.approx(0.05 * 3 / 4)
    # under study.only the shares count the datasets that run
    assert family_alpha(claims, 0.05, ["d_ce"]) == pytest.approx(0.05)
    with pytest.raises(ValueError, match="at least one claim tested"):
        family_alpha([CLAIMS[2] | {"datasets": ["d"]}], 0.05, ["d_ce"])
    metrics = {"d": _metrics(range(1, 4), arms=("baseline", "big")), "d_ce": _metrics(range(1, 4), rng_seed=1)}
    outcome = study_round(metrics, claims, {}, {}, LOOKS, 0.05, "pocock", {"d": [1, 2, 3], "d_ce": [1, 2, 3]}, 1,
                          "AP", 0.02, "holm")
    assert list(outcome.decisions) == [("big", "d"), ("big", "d_ce"), ("null", "d_ce")]


def test_the_checkpoint_writes_a_record_and_a_capped_last_round_lists_no_arms(tmp_path):
    paths = _metric_files(_metrics(range(1, 4)), tmp_path)
    params = dict(claims=CLAIMS, kind="pocock", alpha=0.05, seeds={"d": [1, 2, 3]}, measure="AP", margin=0.02,
                  multiplicity="holm")
    out = tmp_path / "round=1.json"
    record = round_from_ledger(paths, None, out, looks=list(LOOKS), round_=1, ledger=tmp_path / "ledger", **params)
    assert json.loads(out.read_text())["next"] == [{"dataset": "d", "arm": "noisy"},
                                                   {"dataset": "d", "arm": "baseline"}]
    back = read_round(out)
    assert back["next"] == [("d", "noisy"), ("d", "baseline")] and record["round"] == 1
    assert back["trained"] == {("d", "big"): 3, ("d", "baseline"): 3, ("d", "noisy"): 3}
    assert back["decisions"][("big", "d")].verdict == REPRODUCED
    assert record["alpha"] == pytest.approx(0.05 * 2 / 3) and record["hypotheses"] == 4  # the rounds' share of alpha
    assert record["level"] == pytest.approx(record["alpha"] / 2)  # two cells, each may still hold a true null
    assert back["tests"][("big", "d")] == [tuple(t) for t in record["decisions"][0]["tests"]]
    table = rounds_markdown([back])
    assert table[0] == "## Round 1 of 2 (looks [3, 6])" and "cells judged at level 0.01667" in table[2]
    assert any(line.startswith("| big | d | reproduced | 3 | +0.1") for line in table)
    assert table[-2] == "Arms that train the next round's seeds: noisy (d), baseline (d)."
    capped = study_looks(LOOKS, 3)  # a cap at the first look: the first round is the last
    last = round_from_ledger(paths, None, tmp_path / "capped.json", looks=list(capped), round_=1,
                             ledger=tmp_path / "ledger", **params)
    assert last["next"] == [] and read_round(tmp_path / "capped.json")["decisions"][("null", "d")].verdict \
        == INCONCLUSIVE


def test_findings_judge_each_cell_on_the_seeds_of_its_look_and_show_its_sequential_verdict():
    frame = _metrics(range(1, 7))
    frame = frame.filter((pl.col("experiment") != "big") | pl.col("seed").is_in(["1", "2", "3"]))
    claims = sequential_claims(CLAIMS)
    sequential = {("big", "d"): (_decision(REPRODUCED), [1, 2, 3]), ("null", "d"): (_decision(INCONCLUSIVE, 1),
                                                                                   [1, 2, 3, 4, 5, 6])}
    table = findings_table({"d": frame}, claims, "AP", sequential=sequential)
    assert table["seeds"].to_list() == [3, 6]
    assert table["sequential_verdict"].to_list() == [REPRODUCED, INCONCLUSIVE]
    assert table["look_seeds"].to_list() == [3, 6] and table["p_boundary"].to_list() == [0.01, 0.01]
    plain = findings_table({"d": with_seeds(frame, [1, 2, 3])}, claims, "AP")
    assert plain["sequential_verdict"].to_list() == [None, None]
    with pytest.raises(ValueError, match="ran with different seeds"):  # without the look's seeds the arms mismatch
        findings_table({"d": frame}, claims, "AP")


def test_a_round_folder_shows_one_run_of_the_rounds_and_names_the_first_record_left_by_another(tmp_path):
    """round_chain on the checkpoint's own records: rounds 1-2 of one run continue each other; a round 2 left by a
    run with other cells, other metrics for the same seeds, a changed decision or other looks does not, and neither
    does a round 3 after a missing round 2."""
    paths = _metric_files(_metrics(range(1, 7)), tmp_path)
    params = dict(claims=CLAIMS, kind="pocock", alpha=0.05, seeds={"d": [1]}, measure="AP", margin=0.02,
                  multiplicity="holm", looks=list(LOOKS), ledger=tmp_path / "ledger")
    first_paths = {key: p for key, p in paths.items() if int(key[2]) <= 3}
    round_from_ledger(first_paths, None, tmp_path / "round=1.json", round_=1, **params)
    second_paths = {key: p for key, p in paths.items() if key[1] != "big"}  # big was decided: no seeds 4-6
    round_from_ledger(second_paths, tmp_path / "round=1.json", tmp_path / "round=2.json", round_=2, **params)
    first, second = read_round(tmp_path / "round=1.json"), read_round(tmp_path / "round=2.json")
    assert first["decisions"][("big", "d")].verdict == REPRODUCED  # so the decision check below has a decided cell
    assert round_chain([first, second]) == ([first, second], None)

    other_cells = copy.deepcopy(second)
    other_cells["decisions"] = {("big", "e") if cell == ("big", "d") else cell: d
                                for cell, d in second["decisions"].items()}
    kept, why = round_chain([first, other_cells])
    assert kept == [first] and "round 2 judges other cells than round 1" in why and "'e'" in why

    retrained = copy.deepcopy(second)  # the same seeds retrained after a knob changed: other numbers at look 1
    retrained["tests"][("null", "d")][0] = (0.5, 0.5, 0.5)
    kept, why = round_chain([first, retrained])
    assert kept == [first] and "other tests for ('null', 'd')" in why

    undone = copy.deepcopy(second)
    undone["decisions"][("big", "d")] = SequentialDecision(INCONCLUSIVE, 1, 6, 0.5, 0.5, 0.01, 0.01)
    assert "changes ('big', 'd')'s decision" in round_chain([first, undone])[1]

    relooked = {**second, "looks": [3, 9]}
    assert "has looks [3, 9], round 1 [3, 6]" in round_chain([first, relooked])[1]
    assert round_chain([first, {**second, "round": 3}]) == ([first], "round 3 follows round 1: round 2 is missing")
    assert round_chain([second]) == ([], "the first record is round 2, not round 1")

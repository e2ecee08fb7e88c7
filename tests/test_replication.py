"""A study's replication (curricula/study/replication.py): the decided cells re-run on a fresh draw of the split and
fresh ranker seeds, as a family of its own with its own folders, and the refusals of a replication that would not
be one."""

from __future__ import annotations

import pytest

from curricula.data import ingest
from curricula.data.base import RankingData, seeded_split
from curricula.data.ingest import seed_draws_splits
from curricula.pipeline.study import study_plan
from curricula.plumbing.config import SCHEMA, merge, read_yaml, validate_config
from curricula.plumbing.layout import Layout, replica_key, replication_selection
from curricula.study.replication import (
    CONTRADICTED,
    PENDING,
    REPLICA_OFFSET,
    REPLICATED,
    UNDECIDED,
    decided_word,
    replica_config,
    replica_seeds,
    replicated_claims,
    replication_status,
    side_by_side,
)
from curricula.study.verdicts import CellVerdict

DEFAULT = read_yaml(SCHEMA.parents[1] / "config.yaml")
SCHEMA_DOC = read_yaml(SCHEMA)
TINY = {"name": "tiny", "format": "chitchat", "options": {"max_instances": {"train": 40, "dev": 10, "test": 10}}}
CLAIMS = {
    "kde": {"paper": "M", "claim": "KDE weights help", "experiment": "macavaney_kde", "against": "baseline",
            "expect": "better", "factors": ["weighting"]},
    "anti": {"paper": "M", "claim": "the anti-curriculum is worse", "experiment": "macavaney_kde_anti",
             "against": "macavaney_kde", "expect": "worse", "factors": ["weighting.anti"]},
}
GRID = {"macavaney_kde": {"weighting": {"scoring": "kde", "m": 20}},
        "macavaney_kde_anti": {"weighting": {"scoring": "kde", "m": 20, "anti": True}}}


def overlay(tmp_path, cells, **study) -> dict:
    """A two-dataset tiny chitchat study (two carves of one cut) with the replication of ``cells``."""
    return {"seeds": [1, 2], "experiments": GRID,
            "study": {"datasets": {"tiny": {"dataset": TINY}, "other": {"dataset": TINY}}, "claims": CLAIMS,
                      "ledger": str(tmp_path / "ledger"), "replication": {"draw": 1, "cells": cells}, **study}}


def plan(over: dict):
    return study_plan(DEFAULT, over, validate_config(merge(DEFAULT, over)), SCHEMA_DOC)


def test_a_replica_is_the_dataset_with_its_split_seed_and_ranker_seeds_moved(tmp_path):
    study = plan(overlay(tmp_path, {"tiny": ["anti"]}))
    assert list(study.datasets) == ["tiny_rep1"]  # the other dataset lists no cell: no replica
    config = study.datasets["tiny_rep1"].config
    assert config["dataset"]["name"] == "tiny_rep1" and config["pipeline_seed"] == 42 + REPLICA_OFFSET
    assert config["seeds"] == [1001, 1002] and study.datasets["tiny_rep1"].layout.root == "results/tiny_rep1"
    # only the listed claim, tested on the replica alone; its arms are all that is trained
    assert [(c["id"], c["datasets"]) for c in study.claims] == [("anti", ["tiny_rep1"])]
    assert sorted({(d, a) for d, a, _ in study.claim_runs}) == [("tiny_rep1", "macavaney_kde"),
                                                               ("tiny_rep1", "macavaney_kde_anti")]
    assert {s for _, _, s in study.claim_runs} == {1001, 1002}
    # a family of its own: its round records, findings page and ledger apart from the original's
    assert study.layout.study_name == "study/only=tiny_rep1"
    assert study.layout.study_ledger == f"{tmp_path}/ledger/study/only=tiny_rep1"
    assert Layout.of(validate_config(merge(DEFAULT, overlay(tmp_path, {"tiny": ["anti"]})))) == study.layout
    assert study.manifest["claims"]["anti"]["datasets"] == ["tiny_rep1"]


def test_the_rounds_extend_the_replica_seeds_and_study_only_keeps_some_datasets(tmp_path):
    over = overlay(tmp_path, {"tiny": ["kde", "anti"], "other": ["kde"]}, only=["other"],
                   sequential={"enabled": True, "looks": [2, 3]})
    study = plan(over)
    assert list(study.datasets) == ["other_rep1"] and study.seeds == {"other_rep1": [1001, 1002, 1003]}
    assert [(c["id"], c["datasets"]) for c in study.claims] == [("kde", ["other_rep1"])]
    assert study.layout.study_name == "study/only=other_rep1"
    both = plan(overlay(tmp_path, {"tiny": ["kde", "anti"], "other": ["kde"]}))
    assert [(c["id"], c["datasets"]) for c in both.claims] == [("kde", ["tiny_rep1", "other_rep1"]),
                                                               ("anti", ["tiny_rep1"])]
    assert both.layout.study_name == "study/only=other_rep1+tiny_rep1"


def test_draws_move_the_seeds_apart_and_the_fresh_split_seed_carves_other_queries():
    assert replica_seeds([1, 2, 3], 2) == [2001, 2002, 2003] and replica_key("wikiqa", 2) == "wikiqa_rep2"
    config = {"dataset": {"name": "d", "format": "dailydialog_pp", "split": {"resplit": True}}, "pipeline_seed": 42,
              "seeds": [1], "active": {"seeds": [7]}}
    replica = replica_config("d", config, 1)
    assert replica["active"]["seeds"] == [1007] and config["seeds"] == [1]  # the original's config is left as it is
    qids = [f"q{i}" for i in range(1000)]
    fractions = {"train": 0.55, "dev": 0.1, "test": 0.35}
    original, fresh = seeded_split(qids, fractions, 42), seeded_split(qids, fractions, replica["pipeline_seed"])
    test = {q for q, s in original.items() if s == "test"}
    again = {q for q, s in fresh.items() if s == "test"}
    assert abs(len(again) - len(test)) <= 2  # the same fractions...
    assert len(test & again) < 0.5 * len(test)  # ...of other queries: about 35% overlap by chance


def test_a_replication_that_is_not_one_of_the_study_cells_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"study.replication.cells.nope: nope is not among study.datasets"):
        plan(overlay(tmp_path, {"nope": ["kde"]}))
    with pytest.raises(ValueError, match=r"study.replication.cells.tiny: penha not among study.claims \(kde, anti\)"):
        plan(overlay(tmp_path, {"tiny": ["penha"]}))
    over = overlay(tmp_path, {"tiny": ["kde"]})
    over["study"]["claims"] = {**CLAIMS, "kde": {**CLAIMS["kde"], "datasets": ["other"]}}
    with pytest.raises(ValueError, match=r"study.replication.cells.tiny: kde is not tested on tiny"):
        plan(over)
    with pytest.raises(ValueError, match=r"study.replication.cells: none of its datasets \(tiny\) is among the "
                                         r"selected ones \(other\)"):
        plan(overlay(tmp_path, {"tiny": ["kde"]}, only=["other"]))


def test_without_a_replication_the_selection_and_claims_are_the_study_own():
    assert replication_selection(["a", "b"], None, None) is None
    assert replication_selection(["a", "b"], ["b"], {"draw": 3, "cells": {"a": ["x"], "b": ["y"]}}) == ("b_rep3",)
    claims = [{"id": "x"}, {"id": "y"}]
    assert replicated_claims(claims, {"a": ["y"]}, ["a"], 2) == [{"id": "y", "datasets": ["a_rep2"]}]


def test_a_cell_is_replicated_only_where_both_draws_decide_the_same_verdict():
    assert replication_status("reproduced", "reproduced") == REPLICATED
    assert replication_status("equivalent", "equivalent") == REPLICATED
    assert replication_status("reproduced", "equivalent") == CONTRADICTED  # found again as no effect
    assert replication_status("equivalent", "not reproduced") == CONTRADICTED
    assert replication_status("reproduced", "not reproduced") == CONTRADICTED  # the other direction
    assert replication_status("reproduced", "inconclusive") == UNDECIDED
    assert replication_status("equivalent", None) == replication_status("equivalent", "continue") == PENDING
    assert replication_status("reproduced, below the margin", "reproduced") == REPLICATED
    assert decided_word("not reproduced, below the margin") == "not reproduced"
    assert decided_word("inconclusive") is None and decided_word("continue") is None
    with pytest.raises(ValueError, match="the cell's verdict 'inconclusive' is not a decided one"):
        replication_status("inconclusive", "reproduced")


def test_side_by_side_pairs_each_listed_cell_with_its_replica_and_refuses_an_undecided_one():
    def cell(claim, dataset, verdict):
        return CellVerdict(claim, claim, dataset, verdict, 10, "+1.0%", verdict)

    original = [cell("kde", "d", "reproduced"), cell("anti", "d", "equivalent"), cell("penha", "d", "inconclusive")]
    replica = [cell("kde", "d_rep1", "equivalent"), cell("anti", "d_rep1", "continue")]
    rows = side_by_side(original, replica, {"d": ["kde", "anti"]}, 1)
    assert [(r.original.id, r.replica.verdict if r.replica else None, r.status) for r in rows] == [
        ("kde", "equivalent", CONTRADICTED), ("anti", "continue", PENDING)]
    assert side_by_side(original, [], {"d": ["kde"]}, 2)[0].status == PENDING  # no round of draw 2 yet
    with pytest.raises(ValueError, match=r"study.replication.cells.d: penha has the verdict 'inconclusive' in the "
                                         r"original study; list only the cells its rounds decided"):
        side_by_side(original, replica, {"d": ["penha"]}, 1)
    with pytest.raises(ValueError, match="study.replication.cells.e: kde has no verdict in the original study"):
        side_by_side(original, replica, {"e": ["kde"]}, 1)


def loader_of(splits: list[str]):
    """A loader (no seed) bringing one query per split of ``splits``."""
    def load(files):
        qids = [f"q{i}" for i in range(len(splits))]
        return RankingData.from_columns({"qid": qids, "split": splits, "text": qids, "turns": [[q] for q in qids]},
                                        {"docid": ["d"], "text": ["a reply"]},
                                        {"qid": qids, "docid": ["d"] * len(qids), "rel": [1] * len(qids)})
    return load


def test_a_dataset_whose_loader_brings_every_split_is_not_a_fresh_draw_under_a_new_seed(monkeypatch):
    own = {"name": "own", "format": "fake", "files": {}}
    monkeypatch.setattr(ingest, "get_loader", lambda fmt: loader_of(["train", "dev", "test"]))
    assert not seed_draws_splits(own)  # the schema's fractions ask for train, dev and test: all the loader's own
    assert seed_draws_splits({**own, "split": {"resplit": True}})
    config = {"dataset": own, "pipeline_seed": 42, "seeds": [1]}
    with pytest.raises(ValueError, match=r"study.replication.cells.own: own's loader brings every split as its own and "
                                         r"it is not re-split, so a new seed would not change its train and test"):
        replica_config("own", config, 1)
    monkeypatch.setattr(ingest, "get_loader", lambda fmt: loader_of(["train", "dev"]))  # test carved out of train
    assert seed_draws_splits(own) and replica_config("own", config, 1)["pipeline_seed"] == 1042
    assert not seed_draws_splits({**own, "split": {"fractions": {"train": 0.9, "dev": 0.1}}})
    monkeypatch.setattr(ingest, "get_loader", lambda fmt: loader_of(["train", "train"]))  # no split information
    assert seed_draws_splits(own)


def test_the_study_datasets_are_all_drawn_by_the_seed(shared_data):
    """WikiQA's test questions are carved out of its train file by the seed, SemEval's and DailyDialog++'s are re-split
    by it, chitchat splits its conversations by it: each replica is a fresh carve."""
    from tests.conftest import shared_file

    shared_file(shared_data, "wikiqa", "WikiQA-train.tsv")
    for preset in ("wikiqa", "semeval_cqa", "dailydialog_pp"):
        dataset = read_yaml(SCHEMA.parents[1] / "configs" / f"{preset}.yaml")["dataset"]
        assert seed_draws_splits(dataset), preset
    assert seed_draws_splits(DEFAULT["dataset"])

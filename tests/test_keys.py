"""Rule input keys as types (curricula/plumbing/keys.py): every key kind round-trips, encodes to the bytes the
f-strings it replaced wrote (Snakemake input names, results paths and ledger entries depend on them), and a malformed
key is refused naming it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from curricula.plumbing.keys import (
    ACTIVE,
    BM25_SUFFIX,
    CURVE,
    DIFFICULTY,
    METRICS,
    MODEL,
    REFERENCE,
    RUN,
    SELECTION,
    SHAPES,
    ClaimKey,
    NameKey,
    SeedKey,
    UpstreamKey,
    decode_key,
    input_key,
    is_bm25,
    split_inputs,
    with_bm25,
    without_bm25,
)
from curricula.study.ledger_runs import claim_runs

ROOT = "results/chitchat"
TABLE = "results/chitchat/curriculum/kde/shard=0.parquet"
RUN_NAME, ARM, ACTIVE_ARM, DATASET = "hcl@lr=0.001", "baseline+bm25", "active:dasl@3", "dailydialog_pp"
#: one key of each kind and shape, with the string the f-string it replaced wrote for it (targets.py,
#: pipeline/study.py, pipeline/ledger.py and ledger_runs.run_key before the keys module)
OLD_FORMAT = [
    (NameKey(CURVE, RUN_NAME), f"curve|{RUN_NAME}"),  # tuned_inputs
    (NameKey(MODEL, RUN_NAME), f"model|{RUN_NAME}"),
    (NameKey(REFERENCE, "bm25_tuned"), "reference|bm25_tuned"),  # reference_metrics
    (NameKey(REFERENCE, with_bm25("teacher")), "reference|teacher+bm25"),
    (NameKey(DIFFICULTY, "sigma_bm25"), "difficulty|sigma_bm25"),  # difficulty_tests
    (SeedKey(CURVE, "baseline", 3), "curve|baseline|3"),  # runs_by_key
    (SeedKey(METRICS, "macavaney_recip", 2), "metrics|macavaney_recip|2"),
    (SeedKey(METRICS, with_bm25("hcl"), 1), "metrics|hcl+bm25|1"),
    (SeedKey(SELECTION, "hcl", "4"), "selection|hcl|4"),  # selections
    (SeedKey(CURVE, "dasl", 1), "curve|dasl|1"),  # active_curves
    (ClaimKey(RUN, DATASET, ACTIVE_ARM, 2), f"run|{DATASET}|{ACTIVE_ARM}|{2}"),  # run_inputs
    (ClaimKey(RUN, "wikiqa", ARM, -1), f"run|wikiqa|{ARM}|{-1}"),
    (ClaimKey(METRICS, "chitchat", "penha_bert_pred_root2", "5"), "metrics|chitchat|penha_bert_pred_root2|5"),
    (ClaimKey(ACTIVE, "semeval_cqa", "random", 1), "active|semeval_cqa|random|1"),  # claim_metrics
    (UpstreamKey(str(Path(TABLE).relative_to(ROOT))), f"upstream|{Path(TABLE).relative_to(ROOT)}"),
]


@pytest.mark.parametrize(("key", "old"), OLD_FORMAT, ids=[old for _, old in OLD_FORMAT])
def test_a_key_encodes_to_the_old_bytes_and_decodes_back(key, old):
    assert key.encode() == old
    assert decode_key(old) == key and type(key).decode(old) == key
    assert decode_key(old).encode() == old


def test_every_kind_and_shape_is_covered_by_an_example():
    assert {(key.kind, len(key.parts)) for key, _ in OLD_FORMAT} == set(SHAPES)


def test_seeds_are_kept_as_the_report_and_the_ledger_key_them():
    """A report key's seed is its text (the metrics frames' seed column), a claim key's an int (ClaimRun)."""
    assert SeedKey(METRICS, "baseline", 2) == SeedKey(METRICS, "baseline", "2") == decode_key("metrics|baseline|2")
    assert decode_key("metrics|baseline|2").parts == ("baseline", "2")
    key = decode_key("run|chitchat|baseline|7")
    assert key.seed == 7 and (key.dataset, key.arm) == ("chitchat", "baseline")


@pytest.mark.parametrize("bad", [
    "run|chitchat|baseline",  # a part missing
    "run|chitchat|baseline|1|2",  # one too many
    "run|chitchat|baseline|03",  # a seed that would not encode back to the same bytes
    "run|chitchat|baseline|one",
    "metrics|baseline|x",
    "run||baseline|1",  # an empty part
    "curve|",
    "upstream|data|queries.parquet",
    "weights|kde",  # no such kind
])
def test_a_malformed_key_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        decode_key(bad)
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        input_key(bad)


def test_a_key_of_another_shape_or_kind_is_refused_by_each_shape():
    with pytest.raises(ValueError, match=r"'metrics\|baseline\|1'.*<dataset>\|<arm>\|<seed>"):
        ClaimKey.decode("metrics|baseline|1")
    with pytest.raises(ValueError, match=r"'run\|a\|b'.*kind"):
        SeedKey.decode("run|a|b")


def test_a_key_that_would_not_decode_back_cannot_be_made():
    with pytest.raises(ValueError, match="holds"):
        NameKey(REFERENCE, "bm25|x")
    with pytest.raises(ValueError, match="kind 'run'"):
        SeedKey(RUN, "baseline", 1)
    with pytest.raises(ValueError, match="plain integer"):
        ClaimKey(RUN, "chitchat", "baseline", 1.5)
    with pytest.raises(ValueError, match="plain integer"):
        SeedKey(CURVE, "baseline", True)


def test_a_plain_input_name_is_no_key():
    assert input_key("queries") is None and input_key("previous") is None


def test_the_rules_scripts_split_their_inputs_by_the_keys():
    """split_inputs (report rules, select_tuned) and claim_runs (judging rules) read the keys the targets build."""
    inputs = {SeedKey(METRICS, "hcl", 1).encode(): "m1", SeedKey(CURVE, "hcl", 1).encode(): "c1",
              NameKey(REFERENCE, "teacher+bm25").encode(): "r", NameKey(MODEL, "hcl@m=5").encode(): "model",
              "queries": "q", ClaimKey(RUN, "wikiqa", "hcl+bm25", 2).encode(): "e2", "rounds": "r.json"}
    assert split_inputs(inputs, METRICS) == {("hcl", "1"): "m1"}
    assert split_inputs(inputs, REFERENCE) == {("teacher+bm25",): "r"}
    assert split_inputs(inputs, MODEL) == {("hcl@m=5",): "model"}
    assert claim_runs(inputs) == {("wikiqa", "hcl+bm25", 2): "e2"}
    with pytest.raises(ValueError, match=r"'run\|wikiqa\|hcl'"):
        claim_runs({"run|wikiqa|hcl": "e"})


def test_the_bm25_suffix_is_one_constant():
    assert with_bm25("hcl") == "hcl+bm25" and is_bm25("hcl+bm25") and not is_bm25("hcl")
    assert without_bm25("hcl+bm25") == "hcl" and without_bm25("hcl") == "hcl"
    assert BM25_SUFFIX == "+bm25"

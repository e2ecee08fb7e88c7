"""The embedded default: chitchat conversations as response ranking (from the installed package)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from curricula.data import chitchat
from curricula.plumbing.errors import InputFormatError

CAPS = {"train": 400, "dev": 60, "test": 60}


@pytest.fixture(scope="module")
def conversations():
    return chitchat.read_conversations(chitchat.default_path())


@pytest.fixture(scope="module")
def data():
    return chitchat.load({}, max_instances=CAPS, seed=7).validate("chitchat")


def test_package_counts(conversations):
    # Data README: 7,168 conversations, 3,150 with a single sender; 4,018 two-party ones with 135,587 turns.
    raw = json.loads(chitchat.default_path().read_text())
    assert len(raw) == 7168
    assert sum(len({m["sender"] for t in c["messages"] for m in t}) < 2 for c in raw.values()) == 3150
    # One of the 4,018 has an empty message as its only reply, so 4,017 remain; dropping empty turns and
    # merging the same-speaker turns around them leaves 135,565 turns, hence 131,548 ranking instances.
    assert len(conversations) == 4017
    assert sum(len(c.turns) for c in conversations) == 135565
    assert sum(len(chitchat.instance_positions(len(c.turns))) for c in conversations) == 131548


def test_turns_drop_empty_and_merge_same_speaker(tmp_path):
    msgs = [[{"text": "hi", "sender": "a"}], [{"text": " ", "sender": "b"}],
            [{"text": "there", "sender": "a"}, {"text": "", "sender": "a"}], [{"text": "yo", "sender": "b"}]]
    assert chitchat.conversation_turns("c", msgs, tmp_path) == ("hi there", "yo")
    assert chitchat.conversation_turns("c", msgs[:3], tmp_path) == ()  # only one speaker left


def test_instances_have_caps_one_positive_and_k_candidates(data):
    assert data.split_counts() == CAPS
    per_q = data.candidates.group_by("qid").len()
    assert per_q["len"].unique().to_list() == [10]
    assert data.qrels.height == data.queries.height and (data.qrels["rel"] == 1).all()
    assert data.qrels.join(data.candidates, on=["qid", "docid"], how="anti").height == 0


def test_positive_is_the_next_turn_and_context_precedes_it(data, conversations):
    convs = {c.cid: c for c in conversations}
    for qid, turns in data.queries.select("qid", "turns").head(50).iter_rows():
        cid, tau = qid.rsplit(":", 1)
        c = convs[cid]
        assert turns == list(c.turns[: int(tau) - 1])
        pos = data.qrels.filter(pl.col("qid") == qid)["docid"][0]
        assert pos == qid
        assert data.docs.filter(pl.col("docid") == pos)["text"][0] == c.turns[int(tau) - 1]


def test_no_conversation_crosses_splits(data):
    conv = data.queries.select(pl.col("qid").str.split(":").list.first().alias("cid"), "split")
    assert conv.group_by("cid").agg(pl.col("split").n_unique())["split"].max() == 1
    # negatives come from other conversations of the same split
    cands = data.candidates.join(data.queries.select("qid", "split"), on="qid").with_columns(
        qconv=pl.col("qid").str.split(":").list.first(), dconv=pl.col("docid").str.split(":").list.first())
    split_of_conv = dict(conv.unique().iter_rows())
    negs = cands.join(data.qrels, on=["qid", "docid"], how="anti")
    assert (negs["qconv"] != negs["dconv"]).all()
    assert all(split_of_conv.get(d, s) == s for d, s in negs.select("dconv", "split").iter_rows())


def test_negative_text_differs_from_positive(data):
    texts = dict(data.docs.iter_rows())
    pos_text = {q: texts[d] for q, d in data.qrels.select("qid", "docid").iter_rows()}
    negs = data.candidates.join(data.qrels, on=["qid", "docid"], how="anti")
    assert all(texts[d] != pos_text[q] for q, d in negs.iter_rows())


def test_same_seed_same_data_other_seed_other_data(data):
    again = chitchat.load({}, max_instances=CAPS, seed=7)
    assert again.queries.equals(data.queries) and again.candidates.equals(data.candidates)
    other = chitchat.load({}, max_instances=CAPS, seed=8)
    assert not other.queries["qid"].equals(data.queries["qid"])


def test_max_context_turns_keeps_recent_turns():
    d = chitchat.load({}, max_instances={"train": 200, "dev": 10, "test": 10}, max_context_turns=2, seed=1)
    assert d.queries["turns"].list.len().max() == 2
    assert d.queries["text"].to_list() == ["\n".join(t) for t in d.queries["turns"].to_list()]


def test_bad_json_names_the_line(tmp_path):
    p = tmp_path / "dataset.json"
    p.write_text('{\n "a": {"messages": []},\n "b": {"messages": [}\n}\n')
    with pytest.raises(InputFormatError, match=rf"^{p}:3: invalid JSON"):
        chitchat.load({"json": str(p)})


def test_bad_structure_and_empty_file(tmp_path):
    p = tmp_path / "dataset.json"
    p.write_text('{"a": {"messages": [[{"sender": "x"}]]}}')
    with pytest.raises(InputFormatError, match="conversation a: turn 0 has a message without text"):
        chitchat.load({"json": str(p)})
    p.write_text("")
    with pytest.raises(InputFormatError, match="file is empty"):
        chitchat.load({"json": str(p)})
    p.write_bytes(b'{"a":\n "\xff"}')
    with pytest.raises(InputFormatError, match=rf"^{p}:2: invalid UTF-8"):
        chitchat.load({"json": str(p)})

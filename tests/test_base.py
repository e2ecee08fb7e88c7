"""Shared loader machinery: line reading with positions, splits, query filtering, cross-table checks."""

from __future__ import annotations

import re

import polars as pl
import pytest

from curricula.data import dailydialog_pp, msdialog, wikiqa
from curricula.data.base import (
    RankingColumns,
    RankingData,
    fill_missing_splits,
    filter_queries,
    parse_label,
    read_lines,
    seeded_split,
)
from curricula.plumbing.errors import InputFormatError


def test_read_lines_strips_crlf_and_numbers_from_one(tmp_path):
    p = tmp_path / "f.tsv"
    p.write_bytes(b"a\tb\r\nc\td\r\ne")
    assert list(read_lines(p)) == [(1, "a\tb"), (2, "c\td"), (3, "e")]


def test_read_lines_invalid_utf8_names_line(tmp_path):
    p = tmp_path / "f.tsv"
    p.write_bytes("ok\nstill ok\n".encode() + b"bad \xff\xfe here\n")
    with pytest.raises(InputFormatError, match=rf"^{p}:3: invalid UTF-8 at byte 4"):
        list(read_lines(p))


def test_read_lines_empty_and_missing(tmp_path):
    p = tmp_path / "empty.tsv"
    p.write_bytes(b"")
    with pytest.raises(InputFormatError, match=rf"^{p}: file is empty"):
        list(read_lines(p))
    with pytest.raises(InputFormatError, match="file not found"):
        list(read_lines(tmp_path / "missing.tsv"))



@pytest.mark.parametrize("load", [dailydialog_pp.load, msdialog.load, wikiqa.load],
                         ids=["dailydialog_pp", "msdialog", "wikiqa"])
def test_loaders_report_read_errors_with_path_and_line(tmp_path, load):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff\tnot text\n")
    with pytest.raises(InputFormatError, match=f"^{re.escape(str(bad))}:1: invalid UTF-8 at byte 0"):
        load({"train": bad})
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(InputFormatError, match=f"^{re.escape(str(empty))}: file is empty"):
        load({"train": empty})
    with pytest.raises(InputFormatError, match=f"^{re.escape(str(tmp_path / 'missing'))}: file not found"):
        load({"train": tmp_path / "missing"})

def test_parse_label():
    assert parse_label(" 1 ", "f", 3) == 1
    with pytest.raises(InputFormatError, match=r"^f:7: label must be an integer, got 'x'"):
        parse_label("x", "f", 7)


def test_seeded_split_is_a_partition_with_the_fractions():
    ids = [f"q{i}" for i in range(1000)]
    split = seeded_split(ids, {"train": 0.8, "dev": 0.1, "test": 0.1}, seed=1)
    assert set(split) == set(ids)
    counts = {s: sum(v == s for v in split.values()) for s in ("train", "dev", "test")}
    assert counts == {"train": 800, "dev": 100, "test": 100}
    assert split == seeded_split(list(reversed(ids)), {"train": 0.8, "dev": 0.1, "test": 0.1}, seed=1)
    assert split != seeded_split(ids, {"train": 0.8, "dev": 0.1, "test": 0.1}, seed=2)


def make_data(splits: list[str]) -> RankingData:
    n = len(splits)
    queries = pl.DataFrame({"qid": [f"q{i}" for i in range(n)], "split": splits, "text": ["t"] * n,
                            "turns": [["t"]] * n, "domain": [None] * n}, schema_overrides={"domain": pl.String})
    docs = pl.DataFrame({"docid": ["d0", "d1"], "text": ["a", "b"]})
    qrels = pl.DataFrame({"qid": [f"q{i}" for i in range(n)], "docid": ["d0"] * n, "rel": [1] * n})
    cands = pl.DataFrame({"qid": [f"q{i}" for i in range(n) for _ in (0, 1)], "docid": ["d0", "d1"] * n})
    return RankingData.build(queries, docs, qrels, cands)


def test_fill_missing_splits_carves_test_from_train_only():
    data = make_data(["train"] * 90 + ["dev"] * 10)
    out, notes = fill_missing_splits(data, {"train": 0.8, "dev": 0.1, "test": 0.1}, seed=3)
    counts = out.split_counts()
    assert counts["dev"] == 10 and counts["test"] > 0 and counts["train"] + counts["test"] == 90
    dev_before = set(data.queries.filter(pl.col("split") == "dev")["qid"])
    assert set(out.queries.filter(pl.col("split") == "dev")["qid"]) == dev_before
    assert "carved split 'test'" in notes[0]


def test_fill_missing_splits_resplits_unsplit_data():
    out, notes = fill_missing_splits(make_data(["train"] * 100), {"train": 0.8, "dev": 0.1, "test": 0.1}, 0)
    assert out.split_counts() == {"train": 80, "dev": 10, "test": 10}
    assert "re-split 100 queries" in notes[0]


def test_fill_missing_splits_keeps_complete_splits():
    data = make_data(["train", "dev", "test"])
    out, notes = fill_missing_splits(data, {"train": 0.8, "dev": 0.1, "test": 0.1}, 0)
    assert out.queries.equals(data.queries) and notes == []


def test_filter_queries():
    data = make_data(["train"] * 3)
    data = RankingData(data.queries, data.docs, data.qrels.with_columns(
        rel=pl.Series([1, 0, 2], dtype=pl.Int32)), data.candidates.filter(pl.col("qid") != "q2"))
    kept, _ = filter_queries(data, "with_positive")
    assert kept.queries["qid"].to_list() == ["q0", "q2"]
    kept, _ = filter_queries(data, "with_positive_and_negative")
    assert kept.queries["qid"].to_list() == ["q0"]  # q2's only judged doc is relevant
    assert filter_queries(data, "all")[0] is data


def test_validate_rejects_unknown_references():
    data = make_data(["train", "dev"])
    bad = RankingData(data.queries, data.docs, pl.concat([data.qrels, pl.DataFrame(
        {"qid": ["qX"], "docid": ["d0"], "rel": [1]}, schema=data.qrels.schema)]), data.candidates)
    with pytest.raises(InputFormatError, match="qrels name unknown qid 'qX'"):
        bad.validate("src")
    bad = RankingData(data.queries, data.docs, data.qrels, pl.concat([data.candidates, pl.DataFrame(
        {"qid": ["q0"], "docid": ["dX"]})]))
    with pytest.raises(InputFormatError, match="candidates name unknown docid 'dX'"):
        bad.validate("src")


def test_filter_queries_honours_relevant_min():
    queries = pl.DataFrame({"qid": ["a", "b"], "split": ["train", "train"], "text": ["x", "y"],
                            "turns": [["x"], ["y"]], "domain": [None, None]}, schema_overrides={"domain": pl.String})
    docs = pl.DataFrame({"docid": ["d1", "d2"], "text": ["t", "u"]})
    qrels = pl.DataFrame({"qid": ["a", "a", "b"], "docid": ["d1", "d2", "d1"], "rel": [2, 0, 1]},
                         schema_overrides={"rel": pl.Int32})
    data = RankingData.build(queries, docs, qrels, qrels.select("qid", "docid"))
    assert filter_queries(data, "with_positive")[0].queries["qid"].to_list() == ["a", "b"]
    assert filter_queries(data, "with_positive", relevant_min=2)[0].queries["qid"].to_list() == ["a"]
    # with_positive_and_negative: a grade below relevant_min is a negative
    assert filter_queries(data, "with_positive_and_negative", relevant_min=2)[0].queries["qid"].to_list() == ["a"]


def test_ranking_columns_share_recurring_docs_and_reject_conflicts(tmp_path):
    p = tmp_path / "f.tsv"
    cols = RankingColumns(query_label="QuestionID", doc_label="SentenceID", text_label="sentence")
    cols.add_query("q1", "train", ["hi", "there"], at=(p, 2))
    cols.add_candidate("q1", "d1", "one", 1, at=(p, 2))
    cols.add_query("q2", "dev", ["why"], "topic", at=(p, 3))
    cols.add_candidate("q2", "d1", "one", 0, at=(p, 3))  # the same doc again: judged again, stored once
    data = cols.data().validate("t")
    assert data.queries.rows() == [("q1", "train", "hi\nthere", ["hi", "there"], None),
                                   ("q2", "dev", "why", ["why"], "topic")]
    assert data.docs.rows() == [("d1", "one")]
    assert data.qrels.rows() == [("q1", "d1", 1), ("q2", "d1", 0)] and data.candidates.height == 2
    with pytest.raises(InputFormatError, match=rf"^{p}:4: SentenceID d1 has sentence 'other' here but 'one' at {p}:2$"):
        cols.add_candidate("q2", "d1", "other", 0, at=(p, 4))
    with pytest.raises(InputFormatError, match=rf"^{p}:5: QuestionID q1 also appears in {p}:2$"):
        cols.add_query("q1", "test", ["again"], at=(p, 5))


def test_ranking_columns_without_positions_append_every_doc():
    cols = RankingColumns()
    cols.add_query("c1", "test", ["a", "b"])
    for i, rel in enumerate([1, 0], start=1):
        cols.add_candidate("c1", f"c1:{i}", "same text", rel)
    data = cols.data()
    assert data.docs["docid"].to_list() == ["c1:1", "c1:2"] and data.qrels["rel"].to_list() == [1, 0]

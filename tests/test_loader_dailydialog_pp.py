"""The DailyDialog++ loader on the real dev split and on broken copies of its first lines."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from curricula.data import dailydialog_pp
from curricula.data.dailydialog_pp import candidate_kind
from curricula.plumbing.errors import InputFormatError
from tests.conftest import shared_file


@pytest.fixture(scope="module")
def dev_path(shared_data: Path) -> Path:
    return shared_file(shared_data, "dailydialog_pp", "dev.json")


@pytest.fixture(scope="module")
def dev(dev_path):
    return dailydialog_pp.load({"dev": dev_path}).validate("dailydialog_pp")


def raw_lines(path: Path, n: int) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:n]


def write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "dev.json"
    p.write_text("\n".join(lines), encoding="utf-8")  # like the real file: no trailing newline
    return p


def at(path: Path, line: int | None) -> str:
    return "^" + re.escape(f"{path}:{line}: " if line is not None else f"{path}: ")


def test_counts(dev):
    # README: 1,028 contexts (ids 0-1027), 15 candidates each, 5,140 per kind.
    assert dev.split_counts() == {"train": 0, "dev": 1028, "test": 0}
    assert dev.queries["qid"].to_list() == sorted(f"dev-{i}" for i in range(1028))
    assert dev.candidates.group_by("qid").len()["len"].unique().to_list() == [15]
    assert dev.candidates.height == dev.qrels.height == dev.docs.height == 15420
    kinds = Counter(candidate_kind(d) for d in dev.candidates["docid"].to_list())
    assert kinds == Counter({"positive": 5140, "adversarial": 5140, "random": 5140})
    rel_of_kind = Counter((candidate_kind(d), r) for _, d, r in dev.qrels.iter_rows())
    assert rel_of_kind == Counter({("positive", 1): 5140, ("adversarial", 0): 5140, ("random", 0): 5140})


def test_context_length_distribution(dev):
    lengths = Counter(dev.queries["turns"].list.len().to_list())
    assert lengths.most_common() == [(3, 650), (5, 106), (4, 98), (2, 91), (6, 67), (1, 16)]
    assert dev.queries["text"].to_list() == ["\n".join(t) for t in dev.queries["turns"].to_list()]
    assert dev.queries["domain"].null_count() == 1028


def test_first_record_matches_raw_line(dev, dev_path):
    raw = json.loads(raw_lines(dev_path, 1)[0])
    assert raw["id"] == 0
    q = dev.queries.filter(pl.col("qid") == "dev-0").row(0, named=True)
    assert q["turns"] == raw["context"] and len(q["turns"]) == 3
    assert q["turns"][0] == "Am I too abrupt? Did I scare you? Or you don't want ..."
    docs = dict(dev.docs.iter_rows())
    for key, prefix in [("positive_responses", "pos"), ("adversarial_negative_responses", "adv"),
                        ("random_negative_responses", "rand")]:
        assert [docs[f"dev-0:{prefix}{i}"] for i in range(1, 6)] == raw[key]
    assert docs["dev-0:pos1"] == "So nice of you."


def test_same_text_as_positive_and_random_negative_is_kept(dev):
    # Record 155 has the same text as positive 1 and random negative 3: two candidates, rel 1 and rel 0.
    rows = dev.qrels.join(dev.docs, on="docid").filter(
        (pl.col("qid") == "dev-155") & (pl.col("text") == "Well! That really makes sense though."))
    assert sorted(rows.select("docid", "rel").rows()) == [("dev-155:pos1", 1), ("dev-155:rand3", 0)]


def test_loading_twice_gives_equal_frames(dev, dev_path):
    again = dailydialog_pp.load({"dev": dev_path})
    for name in ("queries", "docs", "qrels", "candidates"):
        assert getattr(again, name).equals(getattr(dev, name)), name


def test_candidate_kind():
    assert candidate_kind("dev-3:pos1") == "positive"
    assert candidate_kind("train-a:b:adv5") == "adversarial"
    assert candidate_kind("test-10:rand12") == "random"
    with pytest.raises(ValueError, match="not a DailyDialog\\+\\+ docid"):
        candidate_kind("dev-3:neg1")


def test_empty_responses_dropped_or_rejected(tmp_path, dev_path):
    lines = raw_lines(dev_path, 3)
    rec = json.loads(lines[1])
    rec["adversarial_negative_responses"][1] = "  "
    lines[1] = json.dumps(rec)
    p = write(tmp_path, lines)
    d = dailydialog_pp.load({"train": p})
    assert d.candidates.filter(pl.col("qid") == "train-1")["docid"].to_list() == sorted(
        [f"train-1:pos{i}" for i in range(1, 6)] + [f"train-1:adv{i}" for i in (1, 3, 4, 5)]
        + [f"train-1:rand{i}" for i in range(1, 6)])
    with pytest.raises(InputFormatError, match=at(p, 2) + "'adversarial_negative_responses' item 2 is empty"):
        dailydialog_pp.load({"train": p}, drop_empty_responses=False)


def test_bad_json_and_not_an_object(tmp_path, dev_path):
    lines = raw_lines(dev_path, 4)
    lines[2] = lines[2][:-1]  # drop the closing brace
    p = write(tmp_path, lines)
    with pytest.raises(InputFormatError, match=at(p, 3) + "invalid JSON: "):
        dailydialog_pp.load({"dev": p})
    lines = raw_lines(dev_path, 4)
    lines[1] = json.dumps([json.loads(lines[1])])
    p = write(tmp_path, lines)
    with pytest.raises(InputFormatError, match=at(p, 2) + "expected a JSON object, got list"):
        dailydialog_pp.load({"dev": p})
    lines = raw_lines(dev_path, 4)
    lines.insert(2, "")
    p = write(tmp_path, lines)
    with pytest.raises(InputFormatError, match=at(p, 3) + "empty line"):
        dailydialog_pp.load({"dev": p})


DROP = object()  # a change that deletes the key

#: one record of the first four lines changed -> the error reported at its line
BROKEN_RECORDS = {
    "no positive": (2, {"positive_responses": ["", " "]}, "no positive response"),
    "missing key": (3, {"random_negative_responses": DROP}, "missing key 'random_negative_responses'"),
    "context not a list": (1, {"context": "one string"}, "'context' must be a list of strings, got str"),
    "context item not a string": (1, {"context": ["fine", None]}, "'context' item 2 must be a string, got null"),
    "float id": (1, {"id": 1.5}, "'id' must be an integer or a non-empty string"),
    "blank id": (1, {"id": " "}, "'id' must be an integer or a non-empty string"),
    "duplicate id": (3, {"id": 1}, r"duplicate id 1 \(first on line 2\)"),
}


@pytest.mark.parametrize("index, changes, message", BROKEN_RECORDS.values(), ids=BROKEN_RECORDS)
def test_a_broken_record_is_reported_at_its_line(tmp_path, dev_path, index, changes, message):
    lines = raw_lines(dev_path, 4)
    rec = json.loads(lines[index])
    for key, value in changes.items():
        if value is DROP:
            del rec[key]
        else:
            rec[key] = value
    lines[index] = json.dumps(rec)
    p = write(tmp_path, lines)
    with pytest.raises(InputFormatError, match=at(p, index + 1) + message):
        dailydialog_pp.load({"dev": p})


def test_bad_role(dev_path):
    with pytest.raises(ValueError, match="unknown file role 'valid'"):
        dailydialog_pp.load({"valid": dev_path})

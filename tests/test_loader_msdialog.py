"""The tab-separated response-selection loader on the real Douban and E-commerce samples and on broken copies."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from curricula.data import msdialog
from curricula.plumbing.errors import InputFormatError
from tests.conftest import shared_file


@pytest.fixture(scope="module")
def douban_path(shared_data: Path) -> Path:
    return shared_file(shared_data, "douban", "train.sample")


@pytest.fixture(scope="module")
def ecd_paths(shared_data: Path) -> dict[str, Path]:
    return {"test": shared_file(shared_data, "ecommerce_ecd", "test"),
            "dev": shared_file(shared_data, "ecommerce_ecd", "valid")}


@pytest.fixture(scope="module")
def douban(douban_path):
    return msdialog.load({"train": douban_path}).validate("douban")


@pytest.fixture(scope="module")
def ecd(ecd_paths):
    return msdialog.load(ecd_paths).validate("ecd")


def raw_lines(path: Path, n: int | None = None) -> list[str]:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines = [line for line in lines if line]
    return lines[:n] if n else lines


def write(tmp_path: Path, lines: list[str], name: str = "broken") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def at(path: Path, line: int | None) -> str:
    return "^" + re.escape(f"{path}:{line}: " if line is not None else f"{path}: ")


def per_query(data) -> Counter:
    return Counter(data.candidates.group_by("qid").len()["len"].to_list())


def test_douban_counts(douban):
    # README: 114 lines, 56 contexts (55 with 2 candidates, 1 with 4 incl. 2 positives), 57 positives.
    assert douban.split_counts() == {"train": 56, "dev": 0, "test": 0}
    assert douban.candidates.height == 114 and douban.qrels.height == 114 and douban.docs.height == 114
    assert douban.qrels["rel"].sum() == 57
    assert dict(Counter(douban.qrels["rel"].to_list())) == {1: 57, 0: 57}
    assert per_query(douban) == Counter({2: 55, 4: 1})
    four = douban.candidates.group_by("qid").len().filter(pl.col("len") == 4)["qid"][0]
    assert douban.qrels.filter(pl.col("qid") == four)["rel"].sum() == 2
    assert douban.queries["domain"].null_count() == 56


def test_douban_first_record_matches_raw_line(douban, douban_path):
    first, second = (line.split("\t") for line in raw_lines(douban_path, 2))
    q = douban.queries.filter(pl.col("qid") == "train-1").row(0, named=True)
    expected = ["my hometown 的 中文 歌词 很 感动", "英文 版 是 小田 亲自 翻译 的 更加 感动", "求 v", "_url_"]
    assert q["turns"] == first[1:-1] == expected
    assert q["text"] == "\n".join(first[1:-1]) and q["split"] == "train"
    docs = dict(douban.docs.iter_rows())
    assert docs["train-1:1"] == first[-1] == "thanks 3" and docs["train-1:2"] == second[-1]
    rels = {d: r for _, d, r in douban.qrels.filter(pl.col("qid") == "train-1").iter_rows()}
    assert rels == {"train-1:1": 1, "train-1:2": 0}


def test_ecd_counts(ecd):
    # README: test 1,000 lines / 100 contexts / 10 each / 100 positives; valid 154 / 77 / 2 each / 77 positives.
    assert ecd.split_counts() == {"train": 0, "dev": 77, "test": 100}
    split_of = ecd.candidates.join(ecd.queries.select("qid", "split"), on="qid")
    assert dict(Counter(split_of["split"].to_list())) == {"test": 1000, "dev": 154}
    pos = ecd.qrels.filter(pl.col("rel") == 1)
    assert Counter(q.split("-")[0] for q in pos["qid"].to_list()) == Counter({"test": 100, "dev": 77})
    assert ecd.qrels["rel"].sum() == 177 and ecd.qrels.height == 1154
    sizes = split_of.group_by("qid", "split").len()
    assert sizes.filter(pl.col("split") == "test")["len"].unique().to_list() == [10]
    assert sizes.filter(pl.col("split") == "dev")["len"].unique().to_list() == [2]
    # 3-field lines have a single context turn: 90 lines (9 contexts) in test, 2 lines (1 context) in valid.
    assert (ecd.queries["turns"].list.len() == 1).sum() == 10


def test_ecd_last_record_of_test(ecd, ecd_paths):
    last = raw_lines(ecd_paths["test"])[-10:]
    q = ecd.queries.filter(pl.col("qid") == "test-100").row(0, named=True)
    assert q["turns"] == last[0].split("\t")[1:-1] and len(q["turns"]) == 7
    docs = dict(ecd.docs.iter_rows())
    assert [docs[f"test-100:{i}"] for i in range(1, 11)] == [line.split("\t")[-1] for line in last]
    assert ecd.qrels.filter(pl.col("qid") == "test-100")["rel"].to_list() == [1] + [0] * 9


def test_loading_twice_gives_equal_frames(douban, douban_path):
    again = msdialog.load({"train": douban_path})
    for name in ("queries", "docs", "qrels", "candidates"):
        assert getattr(again, name).equals(getattr(douban, name)), name


def test_group_size_gives_the_same_groups(ecd, ecd_paths):
    grouped = msdialog.load({"test": ecd_paths["test"]}, group_size=10)
    test_ids = ecd.queries.filter(pl.col("split") == "test")["qid"]
    expected = ecd.subset(test_ids)
    for name in ("queries", "docs", "qrels", "candidates"):
        assert getattr(grouped, name).equals(getattr(expected, name)), name


def test_group_size_mismatch_and_incomplete_group(tmp_path, ecd_paths):
    lines = raw_lines(ecd_paths["test"], 20)  # two contexts of 10 lines
    p = write(tmp_path, lines)
    # groups of 3: lines 1-3, 4-6, 7-9, then 10-12 mixes context 1 (line 10) and context 2 (line 11)
    with pytest.raises(InputFormatError, match=at(p, 11) + "context differs from the one on line 10, but group_size 3"):
        msdialog.load({"test": p}, group_size=3, allow_no_positive=True)
    # without allow_no_positive the group of lines 4-6 (all negatives) is reported first
    with pytest.raises(InputFormatError, match=at(p, 4) + "context starting on this line has no positive"):
        msdialog.load({"test": p}, group_size=3)
    p = write(tmp_path, lines[:15])
    with pytest.raises(InputFormatError, match=at(p, 11) + r"last group has 5 line\(s\), expected group_size 10"):
        msdialog.load({"test": p}, group_size=10)


def test_crlf_and_missing_final_newline(tmp_path, douban_path, douban):
    lines = raw_lines(douban_path)
    p = tmp_path / "crlf"
    p.write_bytes("\r\n".join(lines).encode("utf-8"))
    d = msdialog.load({"train": p})
    assert d.queries.equals(douban.queries) and d.docs.equals(douban.docs)


def test_ubuntu_variant(tmp_path):
    p = write(tmp_path, [
        "1\thi there __eou__ how are you __eou__ __eot__ fine __eou__ __eot__\tgreat __eou__",
        "0\thi there __eou__ how are you __eou__ __eot__ fine __eou__ __eot__\tno idea __eou__ sorry __eou__",
        "1\tinstall fails __eou__ __eot__ __eot__ which version ? __eou__\tthe latest __eou__",
    ], "ubuntu.tsv")
    d = msdialog.load({"dev": p}, variant="ubuntu").validate("ubuntu")
    assert d.queries.select("qid", "turns", "text").rows() == [
        ("dev-1", ["hi there how are you", "fine"], "hi there how are you\nfine"),
        ("dev-2", ["install fails", "which version ?"], "install fails\nwhich version ?"),
    ]
    assert d.docs.rows() == [("dev-1:1", "great"), ("dev-1:2", "no idea sorry"), ("dev-2:1", "the latest")]
    assert d.qrels.rows() == [("dev-1", "dev-1:1", 1), ("dev-1", "dev-1:2", 0), ("dev-2", "dev-2:1", 1)]


def test_ubuntu_variant_needs_exactly_three_fields(tmp_path):
    p = write(tmp_path, ["1\thi __eou__ __eot__\tyes __eou__", "0\thi __eou__\t__eot__\tno __eou__"])
    with pytest.raises(InputFormatError, match=at(p, 2) + "found 4 tab-separated field.*expected exactly 3"):
        msdialog.load({"train": p}, variant="ubuntu")


#: one of the first six lines changed -> the error reported at its line
BROKEN_LINES = {
    "two fields": (2, lambda line: "\t".join(line.split("\t")[:2]),
                   r"found 2 tab-separated field\(s\), expected at least 3"),
    "empty line": (2, lambda line: "", "found an empty line, expected at least 3"),
    "label not an integer": (3, lambda line: "x" + line[1:], "label must be an integer, got 'x'"),
    "negative label": (3, lambda line: "-1" + line[1:], "label must be a non-negative integer.*got '-1'"),
    "blank response": (1, lambda line: "\t".join(line.split("\t")[:-1] + ["  "]),
                       r"response \(last field\) is empty"),
}


@pytest.mark.parametrize("index, edit, message", BROKEN_LINES.values(), ids=BROKEN_LINES)
def test_a_broken_line_is_reported_at_its_number(tmp_path, douban_path, index, edit, message):
    lines = raw_lines(douban_path, 6)
    lines[index] = edit(lines[index])
    p = write(tmp_path, lines)
    with pytest.raises(InputFormatError, match=at(p, index + 1) + message):
        msdialog.load({"train": p})


def test_graded_labels_are_kept(tmp_path, douban_path):
    lines = raw_lines(douban_path, 4)
    lines[0] = "2" + lines[0][1:]
    d = msdialog.load({"train": write(tmp_path, lines)})
    assert d.qrels["rel"].to_list() == [2, 0, 1, 0]


def test_context_without_positive_reports_its_first_line(tmp_path, ecd_paths):
    lines = raw_lines(ecd_paths["test"], 30)
    assert lines[10].startswith("1\t")
    lines[10] = "0" + lines[10][1:]  # context 2 (lines 11-20) loses its only positive
    p = write(tmp_path, lines)
    with pytest.raises(InputFormatError, match=at(p, 11) + "context starting on this line has no positive candidate"):
        msdialog.load({"test": p})
    d = msdialog.load({"test": p}, allow_no_positive=True).validate("ecd")
    assert d.queries.height == 3 and d.qrels.filter(pl.col("qid") == "test-2")["rel"].sum() == 0


def test_bad_arguments(douban_path):
    with pytest.raises(ValueError, match="unknown file role 'validation'"):
        msdialog.load({"train": douban_path, "validation": douban_path})
    with pytest.raises(ValueError, match="variant must be one of"):
        msdialog.load({"train": douban_path}, variant="douban")
    with pytest.raises(ValueError, match="group_size must be a positive integer"):
        msdialog.load({"train": douban_path}, group_size=0)

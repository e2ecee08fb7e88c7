"""SemEval-2016 Task 3 CQA loader: real train-part2/dev counts (data README), tasks A and C, broken variants."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from curricula.data import semeval_cqa
from curricula.plumbing.errors import InputFormatError
from tests.conftest import shared_file

GRADES = {"Good": 2, "PotentiallyUseful": 1, "Bad": 0}


@pytest.fixture(scope="module")
def files(shared_data):
    folder = "semeval2016_task3_cqa"
    return {"train": shared_file(shared_data, folder, "SemEval2016-Task3-CQA-QL-train-part2.xml"),
            "dev": shared_file(shared_data, folder, "SemEval2016-Task3-CQA-QL-dev.xml")}


@pytest.fixture(scope="module")
def task_a(files):
    return semeval_cqa.load(files).validate("semeval_cqa")


@pytest.fixture(scope="module")
def task_a_all(files):
    return semeval_cqa.load(files, task="A", skip_duplicates=False).validate("semeval_cqa")


@pytest.fixture(scope="module")
def task_c(files):
    return semeval_cqa.load(files, task="C").validate("semeval_cqa")


def grade_counts(data) -> dict[str, tuple[int, int, int]]:
    """split -> (Good, PotentiallyUseful, Bad) qrels counts."""
    rows = data.qrels.join(data.queries.select("qid", "split"), on="qid").group_by("split", "rel").len().rows()
    counts = {(s, r): n for s, r, n in rows}
    return {s: tuple(counts.get((s, g), 0) for g in (2, 1, 0)) for s in ("train", "dev")}


def per_split(data, frame: pl.DataFrame, expr: pl.Expr) -> dict[str, int]:
    return dict(frame.join(data.queries.select("qid", "split"), on="qid").group_by("split").agg(expr).iter_rows())


def test_file_structure_counts(files):
    # README: train-part2 67 original questions, 670 threads, 6,700 comments; dev 50 / 500 / 5,000.
    for split, (n_org, n_threads, n_skip) in {"train": (67, 670, 291), "dev": (50, 500, 256)}.items():
        orgs = semeval_cqa.read_cqa(files[split], "RELC_RELEVANCE2RELQ")
        threads = [t for o in orgs for t in o.threads]
        assert (len(orgs), len(threads), sum(t.skip for t in threads)) == (n_org, n_threads, n_skip)
        assert {len(o.threads) for o in orgs} == {10}
        assert {len(t.comments) for t in threads} == {10}


def test_task_a_counts(task_a, task_a_all):
    assert task_a_all.split_counts() == {"train": 670, "dev": 500, "test": 0}
    assert per_split(task_a_all, task_a_all.candidates, pl.len()) == {"train": 6700, "dev": 5000}
    # comment -> RelQ Good/PU/Bad: 2,483/1,159/3,058 (train-part2), 1,851/830/2,319 (dev)
    assert grade_counts(task_a_all) == {"train": (2483, 1159, 3058), "dev": (1851, 830, 2319)}
    # skipping the 291 / 256 SubtaskA_Skip threads
    assert task_a.split_counts() == {"train": 670 - 291, "dev": 500 - 256, "test": 0}
    assert per_split(task_a, task_a.candidates, pl.len()) == {"train": 3790, "dev": 2440}
    assert task_a.candidates.group_by("qid").len()["len"].unique().to_list() == [10]
    assert task_a.qrels.select("qid", "docid").equals(task_a.candidates)
    assert set(task_a.docs["docid"]) == set(task_a.candidates["docid"])


def test_task_a_skips_flagged_threads_only(files, task_a):
    orgs = semeval_cqa.read_cqa(files["dev"], "RELC_RELEVANCE2RELQ")
    kept = {t.qid for o in orgs for t in o.threads if not t.skip}
    assert set(task_a.queries.filter(pl.col("split") == "dev")["qid"]) == kept
    assert "Q268_R4" not in kept  # the first dev thread carries SubtaskA_Skip_Because_Same_As_RelQuestion_ID


def test_task_a_queries(task_a_all):
    q = task_a_all.queries
    assert q["domain"].null_count() == 0
    assert q.filter(pl.col("split") == "train")["domain"].n_unique() == 24
    assert q.filter(pl.col("qid") == "Q268_R4").row(0, named=True) == {
        "qid": "Q268_R4", "split": "dev", "domain": "Advice and Help",
        "text": "Best Bank\nHi Guys; I need to open a new bank accoount. Which is the best bank in Qatar ? I assume "
                "all of them will roughly be the same; but stll which has a slight edge (Money transfer; benifits etc)"
                " Thanks !!!",
        "turns": ["Best Bank\nHi Guys; I need to open a new bank accoount. Which is the best bank in Qatar ? I assume "
                  "all of them will roughly be the same; but stll which has a slight edge (Money transfer; benifits "
                  "etc) Thanks !!!"],
    }
    # 26 (train) + 5 (dev) related questions have an empty RelQBody: their text is the subject alone
    assert (~q["text"].str.contains("\n")).sum() == 31
    assert q["turns"].to_list() == [[t] for t in q["text"].to_list()]


def test_texts_are_unescaped_and_stripped(task_a_all):
    texts = pl.concat([task_a_all.queries["text"], task_a_all.docs["text"]])
    assert not texts.str.contains("&#39;", literal=True).any()
    assert texts.str.contains("&", literal=True).any()  # XML-decoded &amp; stays a plain '&'
    assert (texts == texts.str.strip_chars()).all()
    assert task_a_all.queries.filter(pl.col("text").str.contains("I'm movi", literal=True)).height >= 1
    doc = task_a_all.docs.filter(pl.col("docid") == "Q268_R4_C1")["text"].to_list()
    assert doc == ["Commercial bank/IBQ"]


def test_task_c_counts(task_c):
    assert task_c.split_counts() == {"train": 67, "dev": 50, "test": 0}
    assert per_split(task_c, task_c.candidates, pl.len()) == {"train": 6700, "dev": 5000}
    assert task_c.candidates.group_by("qid").len()["len"].unique().to_list() == [100]
    # comment -> OrgQ Good/PU/Bad: 849/697/5,154 (train-part2), 345/594/4,061 (dev)
    assert grade_counts(task_c) == {"train": (849, 697, 5154), "dev": (345, 594, 4061)}
    good = task_c.qrels.filter(pl.col("rel") == 2)
    assert per_split(task_c, good, pl.col("qid").n_unique()) == {"train": 64, "dev": 40}
    assert task_c.queries["domain"].null_count() == 117
    first = task_c.queries.filter(pl.col("qid") == "Q268")
    assert first["text"].to_list() == ["Good Bank\nWhich is a good bank as per your experience in Doha"]


def test_loading_twice_gives_equal_frames(files, task_c):
    again = semeval_cqa.load(files, task="C")
    for name in ("queries", "docs", "qrels", "candidates"):
        assert getattr(again, name).equals(getattr(task_c, name)), name


def test_bad_options(files):
    with pytest.raises(ValueError, match=r"task must be one of \['A', 'C'\], got 'B'"):
        semeval_cqa.load(files, task="B")
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        semeval_cqa.load({"valid": files["dev"]})


def test_same_file_in_two_splits(files):
    with pytest.raises(InputFormatError, match=r"^.*dev\.xml:43: query Q268 also appears in .*dev\.xml:43$"):
        semeval_cqa.load({"train": files["dev"], "dev": files["dev"]}, task="C")


# ----------------------------------------------------------------------------------------------- broken input


def dev_part(files, n_org: int = 1) -> list[bytes]:
    """The DTD header and the first ``n_org`` <OrgQuestion> elements of the dev file, closed with </xml>.

    Line 43 is the first <OrgQuestion>, 47 its <Thread>, 48 its <RelQuestion>, 53 its first <RelComment>.
    """
    lines = files["dev"].read_bytes().splitlines(keepends=True)
    ends = [i for i, line in enumerate(lines) if line.strip() == b"</OrgQuestion>"]
    return lines[: ends[n_org - 1] + 1] + [b"\r\n", b"</xml>\r\n"]


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


def at(path: Path, line: int | None) -> str:
    return re.escape(f"{path}:{line}: " if line is not None else f"{path}: ")


def test_part_loads(files, tmp_path):
    p = write(tmp_path / "part.xml", dev_part(files))
    data = semeval_cqa.load({"dev": p}, task="A", skip_duplicates=False).validate("semeval_cqa")
    assert data.queries["qid"].to_list() == ["Q268_R4"]
    labels = ("Good", "Good", "PotentiallyUseful", "Good", "Good", "Good", "Good", "PotentiallyUseful",
              "PotentiallyUseful", "Bad")  # RELC_RELEVANCE2RELQ of Q268_R4_C1..C10
    assert dict(data.qrels.select("docid", "rel").iter_rows()) == {
        f"Q268_R4_C{i}": GRADES[g] for i, g in enumerate(labels, start=1)}
    assert semeval_cqa.load({"dev": p}).queries.height == 0  # its only thread is skip-flagged


def replaced(index: int, old: bytes, new: bytes):
    """An edit of a ``dev_part``: ``old`` -> ``new`` in line ``index`` (0-based), which must contain ``old``."""
    def edit(part: list[bytes]) -> None:
        assert old in part[index]
        part[index] = part[index].replace(old, new)
    return edit


def cut_inside_line_61(part: list[bytes]) -> None:
    part[60:] = [part[60][:30]]


def cut_before_line_61(part: list[bytes]) -> None:
    del part[60:]


#: an edit of the dev part, the task it is loaded for, and the error's line (1-based) and message
BROKEN_PARTS = {
    "unclosed token": (cut_inside_line_61, "A", 61, r"malformed XML: unclosed token \(column 3\)$"),
    "no end": (cut_before_line_61, "A", 61, r"malformed XML: no element found"),
    "unknown label": (replaced(52, b'RELC_RELEVANCE2RELQ="Good"', b'RELC_RELEVANCE2RELQ="Great"'), "A", 53,
                      r"RELC_RELEVANCE2RELQ='Great' is not a relevance label; expected one of Good, "
                      r"PotentiallyUseful, Bad$"),
    "missing attribute": (replaced(52, b'RELC_ID="Q268_R4_C1" ', b""), "A", 53,
                          r"<RelComment> lacks the required attribute RELC_ID$"),
    "missing category": (replaced(47, b' RELQ_CATEGORY="Advice and Help"', b""), "C", 48,
                         r"<RelQuestion> lacks the required attribute RELQ_CATEGORY"),
    "missing child": (lambda part: part.pop(53), "A", 53,
                      r"<RelComment> lacks the required child <RelCText>$"),
    "unexpected element": (lambda part: part.insert(53, b"\t\t\t<Note>x</Note>\r\n"), "A", 54,
                           r"unexpected element <Note> inside <RelComment>; expected <RelCText>$"),
    "invalid UTF-8": (replaced(53, b"Commercial", b"Comm\xe9rcial"), "A", 54, r"invalid UTF-8 at byte offset \d+$"),
    "empty file": (list.clear, "A", None, r"file is empty"),
}


@pytest.mark.parametrize("edit, task, line, message", BROKEN_PARTS.values(), ids=BROKEN_PARTS)
def test_broken_part_is_reported_at_its_line(files, tmp_path, edit, task, line, message):
    part = dev_part(files)
    assert part[47].lstrip().startswith(b"<RelQuestion ") and part[52].lstrip().startswith(b"<RelComment ")
    assert part[53].strip().startswith(b"<RelCText>")
    edit(part)
    p = write(tmp_path / "part.xml", part)
    with pytest.raises(InputFormatError, match=at(p, line) + message):
        semeval_cqa.load({"dev": p}, task=task)


def test_task_c_reads_its_own_label(files, tmp_path):
    part = dev_part(files)
    replaced(52, b'RELC_RELEVANCE2RELQ="Good"', b'RELC_RELEVANCE2RELQ="Great"')(part)  # task A's label
    assert semeval_cqa.load({"dev": write(tmp_path / "part.xml", part)}, task="C").qrels.height == 10


def test_repeated_org_question_must_agree(files, tmp_path):
    part = dev_part(files, n_org=2)
    second = [i for i, line in enumerate(part) if line.startswith(b"<OrgQuestion ")][1]
    assert part[second] == b'<OrgQuestion ORGQ_ID="Q268">\r\n'
    assert semeval_cqa.load({"dev": write(tmp_path / "part.xml", part)}, task="C").candidates.height == 20
    part[second + 1] = part[second + 1].replace(b"Good Bank", b"Best Bank")
    p = write(tmp_path / "part.xml", part)
    with pytest.raises(InputFormatError, match=at(p, second + 1) + r"ORGQ_ID Q268 repeats with a different "
                                               r"OrgQSubject/OrgQBody than at line 43$"):
        semeval_cqa.load({"dev": p}, task="C")

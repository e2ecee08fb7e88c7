"""WikiQA loader: the real train/dev files (counts from the data README), .ref cross-checks and broken variants."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from curricula.data import wikiqa
from curricula.plumbing.errors import InputFormatError
from tests.conftest import shared_file


def wikiqa_file(shared_data: Path, name: str) -> Path:
    return shared_file(shared_data, "wikiqa", name)


@pytest.fixture(scope="module")
def files(shared_data):
    return {s: wikiqa_file(shared_data, f"WikiQA-{s}.tsv") for s in ("train", "dev")}


@pytest.fixture(scope="module")
def refs(shared_data):
    return {s: wikiqa_file(shared_data, f"WikiQA-{s}.ref") for s in ("train", "dev")}


@pytest.fixture(scope="module")
def data(files, refs):
    return wikiqa.load(files, ref=refs).validate("wikiqa")


def per_split(data, frame: pl.DataFrame) -> pl.DataFrame:
    return frame.join(data.queries.select("qid", "split"), on="qid")


def test_real_counts_match_the_readme(data):
    # README: train 2,118 questions / 20,360 rows / 1,040 positives / 873 answerable; dev 296 / 2,733 / 140 / 126.
    assert data.split_counts() == {"train": 2118, "dev": 296, "test": 0}
    cands = dict(per_split(data, data.candidates).group_by("split").len().iter_rows())
    assert cands == {"train": 20360, "dev": 2733}
    qrels = per_split(data, data.qrels)
    assert qrels.height == 20360 + 2733  # every row is judged, 0s included
    pos = qrels.filter(pl.col("rel") == 1)
    assert dict(pos.group_by("split").len().iter_rows()) == {"train": 1040, "dev": 140}
    assert dict(pos.group_by("split").agg(pl.col("qid").n_unique()).iter_rows()) == {"train": 873, "dev": 126}
    assert sorted(qrels["rel"].unique().to_list()) == [0, 1]
    assert data.queries["domain"].null_count() == data.queries.height


def test_fields_are_split_on_tabs_only(data, files):
    # No quoting: text with '"' must come through unchanged; compare with a naive tab split of the raw bytes.
    expected_docs: dict[str, str] = {}
    expected_q: dict[str, str] = {}
    for path in files.values():
        for line in path.read_bytes().decode("utf-8").split("\r\n")[1:]:
            if line:
                f = line.split("\t")
                expected_q[f[0]] = f[1]
                expected_docs[f[4]] = f[5]
    assert dict(data.docs.iter_rows()) == expected_docs
    assert sum('"' in t for t in expected_docs.values()) > 1000
    assert dict(data.queries.select("qid", "text").iter_rows()) == expected_q
    assert data.queries["turns"].to_list() == [[t] for t in data.queries["text"].to_list()]
    first = data.candidates.filter(pl.col("qid") == "Q1")["docid"].to_list()
    assert first == ["D1-0", "D1-1", "D1-2", "D1-3", "D1-4"]
    assert data.qrels.filter(pl.col("qid") == "Q1")["rel"].to_list() == [0, 0, 0, 1, 0]


def test_sentences_shared_between_questions_and_splits(data, files):
    # A page can serve several questions (even across train and dev); its sentences are one doc each.
    n_rows = data.candidates.height
    assert data.docs.height < n_rows
    per_doc = per_split(data, data.candidates).group_by("docid").agg(pl.col("split").n_unique())
    assert per_doc.filter(pl.col("split") > 1).height == 459


def test_filtered_ref_restricts_dev(files, shared_data):
    filtered = wikiqa_file(shared_data, "WikiQA-dev-filtered.ref")
    d = wikiqa.load({"dev": files["dev"]}, ref={"dev": filtered}).validate("wikiqa")
    assert d.split_counts() == {"train": 0, "dev": 122, "test": 0}
    assert d.candidates.height == 1126 and d.qrels.height == 1126
    # the filtered questions are those with >= 1 positive and >= 1 negative sentence
    per_q = d.qrels.group_by("qid").agg(pos=pl.col("rel").sum(), n=pl.len())
    assert (per_q["pos"] >= 1).all() and (per_q["pos"] < per_q["n"]).all()
    assert set(d.docs["docid"]) == set(d.candidates["docid"])


def test_loading_twice_gives_equal_frames(data, files, refs):
    again = wikiqa.load(files, ref=refs)
    for name in ("queries", "docs", "qrels", "candidates"):
        assert getattr(again, name).equals(getattr(data, name)), name


# ----------------------------------------------------------------------------------------------- broken input


def question_lines(path: Path, n_questions: int) -> list[bytes]:
    """The header and the rows of the first ``n_questions`` questions of a real TSV (CRLF kept)."""
    lines = path.read_bytes().splitlines(keepends=True)
    out = [lines[0]]
    seen: list[bytes] = []
    for line in lines[1:]:
        qid = line.split(b"\t", 1)[0]
        if qid not in seen:
            if len(seen) == n_questions:
                break
            seen.append(qid)
        out.append(line)
    return out


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


@pytest.fixture()
def sample(files, tmp_path):
    """The first 3 train questions Q1, Q2, Q5 (header + 5 + 7 + 8 rows); lines 2-6 are Q1's rows."""
    return question_lines(files["train"], 3)


@pytest.fixture()
def sample_ref(refs):
    return [line for line in refs["train"].read_bytes().splitlines(keepends=True) if int(line.split()[0]) <= 3]


def replace_field(line: bytes, index: int, value: bytes) -> bytes:
    fields = line.rstrip(b"\r\n").split(b"\t")
    fields[index] = value
    return b"\t".join(fields) + b"\r\n"


def test_sample_loads(sample, sample_ref, tmp_path):
    tsv = write(tmp_path / "s.tsv", sample)
    ref = write(tmp_path / "s.ref", sample_ref)
    d = wikiqa.load({"train": tsv}, ref={"train": ref}).validate("wikiqa")
    assert d.queries["qid"].to_list() == ["Q1", "Q2", "Q5"]
    assert d.candidates.height == len(sample) - 1 == len(sample_ref) == 20


def test_wrong_column_count(sample, tmp_path):
    sample[4] = sample[4].rsplit(b"\t", 1)[0] + b"\r\n"
    p = write(tmp_path / "s.tsv", sample)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}:5: expected 7 tab-separated fields, got 6$"):
        wikiqa.load({"train": p})


def test_non_integer_and_out_of_range_label(sample, tmp_path):
    sample[2] = replace_field(sample[2], 6, b"yes")
    p = write(tmp_path / "s.tsv", sample)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}:3: Label must be an integer, got 'yes'$"):
        wikiqa.load({"train": p})
    sample[2] = replace_field(sample[2], 6, b"2")
    write(p, sample)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}:3: Label must be 0 or 1, got 2$"):
        wikiqa.load({"train": p})


def test_wrong_header(sample, tmp_path):
    sample[0] = sample[0].replace(b"\tLabel", b"\tlabel")
    p = write(tmp_path / "s.tsv", sample)
    pattern = rf"^{re.escape(str(p))}:1: expected the header 'QuestionID Question DocumentID DocumentTitle " \
              rf"SentenceID Sentence Label' \(tab-separated\), got "
    with pytest.raises(InputFormatError, match=pattern):
        wikiqa.load({"train": p})


def test_invalid_utf8_empty_file_and_header_only(sample, tmp_path):
    sample[6] = sample[6].replace(b"velocity", b"velo\xffcity", 1)
    p = write(tmp_path / "s.tsv", sample)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}:7: invalid UTF-8 at byte \d+"):
        wikiqa.load({"train": p})
    write(p, [])
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}: file is empty"):
        wikiqa.load({"train": p})
    write(p, sample[:1])
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}: no data rows after the header$"):
        wikiqa.load({"train": p})


def test_question_rows_must_be_contiguous_and_consistent(sample, tmp_path):
    # line 7 is Q2's first row; move Q1's last row (line 6) after it
    moved = sample[:5] + [sample[6], sample[5]] + sample[7:]
    p = write(tmp_path / "s.tsv", moved)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}:7: QuestionID Q1 reappears after other "
                                               r"questions \(first at line 2\)"):
        wikiqa.load({"train": p})
    sample[3] = replace_field(sample[3], 1, b"how are glacier caves made?")
    write(p, sample)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}:4: QuestionID Q1 has question "
                                               r"'how are glacier caves made\?' here"):
        wikiqa.load({"train": p})


def test_reappearing_sentence_must_keep_its_text(sample, tmp_path):
    # give Q2's first row (line 7) the SentenceID of Q1's first sentence, with other text
    sample[6] = replace_field(sample[6], 4, b"D1-0")
    p = write(tmp_path / "s.tsv", sample)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(p))}:7: SentenceID D1-0 has sentence .* but "
                                               rf".* at {re.escape(str(p))}:2$"):
        wikiqa.load({"train": p})


def test_question_in_two_splits(sample, tmp_path):
    p = write(tmp_path / "s.tsv", sample)
    q = write(tmp_path / "d.tsv", sample)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(q))}:2: QuestionID Q1 also appears in "
                                               rf"{re.escape(str(p))}:2$"):
        wikiqa.load({"train": p, "dev": q})


def test_ref_label_mismatch(sample, sample_ref, tmp_path):
    assert sample_ref[3] == b"1 0 3 1\n"
    sample_ref[3] = b"1 0 3 0\n"
    tsv = write(tmp_path / "s.tsv", sample)
    ref = write(tmp_path / "s.ref", sample_ref)
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(ref))}:4: label 0 for qnum 1 candnum 3 "
                                               rf"\(Q1 D1-3\) disagrees with {re.escape(str(tsv))}:5 \(Label 1\)$"):
        wikiqa.load({"train": tsv}, ref={"train": ref})


def test_ref_unknown_qnum_and_candnum(sample, sample_ref, tmp_path):
    tsv = write(tmp_path / "s.tsv", sample)
    ref = write(tmp_path / "s.ref", sample_ref + [b"4 0 0 0\n"])
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(ref))}:21: unknown qnum 4: .* has 3 questions"):
        wikiqa.load({"train": tsv}, ref={"train": ref})
    write(ref, sample_ref + [b"1 0 5 0\n"])
    with pytest.raises(InputFormatError, match=rf"^{re.escape(str(ref))}:21: unknown candnum 5 for qnum 1 \(Q1\), "
                                               r"which has 5 sentences"):
        wikiqa.load({"train": tsv}, ref={"train": ref})


def test_ref_field_count_integers_duplicates_and_completeness(sample, sample_ref, tmp_path):
    tsv = write(tmp_path / "s.tsv", sample)
    ref = tmp_path / "s.ref"
    cases = [
        (sample_ref[:1] + [b"1 0 1\n"], 2, r"expected 4 fields 'qnum 0 candnum label', got 3$"),
        (sample_ref[:1] + [b"1 0 x 0\n"], 2, r"candnum must be an integer, got 'x'$"),
        (sample_ref[:2] + [sample_ref[1]], 3, r"qnum 1 candnum 1 is listed twice \(first at line 2\)$"),
        (sample_ref[:4], 1, r"qnum 1 \(Q1\) lists 4 of its 5 sentences"),
    ]
    for lines, line, message in cases:
        write(ref, lines)
        with pytest.raises(InputFormatError, match=rf"^{re.escape(str(ref))}:{line}: {message}"):
            wikiqa.load({"train": tsv}, ref={"train": ref})


def test_partial_ref_keeps_listed_questions(sample, sample_ref, tmp_path):
    tsv = write(tmp_path / "s.tsv", sample)
    ref = write(tmp_path / "s.ref", [line for line in sample_ref if line.startswith(b"2 ")])
    d = wikiqa.load({"train": tsv}, ref={"train": ref}).validate("wikiqa")
    assert d.queries["qid"].to_list() == ["Q2"]
    assert d.docs["docid"].str.starts_with("D2-").all()


def test_bad_split_names(sample, tmp_path):
    p = write(tmp_path / "s.tsv", sample)
    with pytest.raises(ValueError, match="unknown split 'validation'"):
        wikiqa.load({"validation": p})
    with pytest.raises(ValueError, match=r"ref given for split\(s\) \['dev'\] without a TSV"):
        wikiqa.load({"train": p}, ref={"dev": str(p)})

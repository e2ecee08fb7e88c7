"""WikiQA (Yang et al. 2015) answer-sentence selection as ranking: each question ranks the sentences of one page.

The corpus ships one TSV per split (``WikiQA-{train,dev,test}.tsv``): UTF-8, CRLF line endings, tab-separated,
**no quoting** (text may contain ``"``, so fields are split on tabs only), and one header row::

    QuestionID  Question  DocumentID  DocumentTitle  SentenceID  Sentence  Label

One row per (question, candidate sentence); the candidates of a question are the summary sentences of one Wikipedia
page and its rows are contiguous. ``Label`` is 1 if the sentence answers the question, else 0; many questions have
no positive sentence (``keep_queries`` in config decides whether they are kept).

Identifiers: qid = ``QuestionID`` (``Q1``), docid = ``SentenceID`` (``D1-0``: page ``D1``, sentence 0). A page,
and so its sentences, can serve several questions and several splits; a reappearing SentenceID must carry the
same text. Query text = ``Question``, turns = ``[Question]``. Every row is a candidate and a qrel (rel = Label,
so qrels include the 0s). ``domain`` is null: ``DocumentTitle`` is the page's title, which is nearly unique per
question, not a topic label, so it is not used.

Optional ``ref`` files (``WikiQA-{split}.ref``, the TREC qrels used by the official evaluation scripts) are
cross-checked against the TSV: each line ``qnum 0 candnum label`` names the ``qnum``-th question (1-based, order
of first appearance in the TSV) and its ``candnum``-th sentence (0-based), and ``label`` must equal the TSV
Label. A ref that lists only some questions (``WikiQA-dev-filtered.ref``: the questions with at least one positive
and one negative sentence, the standard evaluation subset) restricts the split to those questions; each question
it lists must be listed completely.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curricula.data.base import RankingColumns, RankingData, parse_label, read_lines
from curricula.plumbing.contracts import SPLITS
from curricula.plumbing.errors import InputFormatError

HEADER = ("QuestionID", "Question", "DocumentID", "DocumentTitle", "SentenceID", "Sentence", "Label")


@dataclass(frozen=True)
class Candidate:
    docid: str
    text: str
    label: int
    line: int


@dataclass
class Question:
    qid: str
    text: str
    line: int  # line of its first row
    candidates: list[Candidate] = field(default_factory=list)


@dataclass(frozen=True)
class RefLine:
    qnum: int
    candnum: int
    label: int
    line: int


def parse_row(line: str, number: int, path: Path) -> tuple[str, str, str, str, int]:
    """``(QuestionID, Question, SentenceID, Sentence, Label)`` of one data row, checked."""
    fields = line.split("\t")
    if len(fields) != len(HEADER):
        raise InputFormatError(path, number, f"expected {len(HEADER)} tab-separated fields, got {len(fields)}")
    qid, question, _, _, docid, sentence, label_field = fields
    for name, value in (("QuestionID", qid), ("Question", question), ("SentenceID", docid), ("Sentence", sentence)):
        if not value.strip():
            raise InputFormatError(path, number, f"field {name} is empty")
    label = parse_label(label_field, path, number, "Label")
    if label not in (0, 1):
        raise InputFormatError(path, number, f"Label must be 0 or 1, got {label}")
    return qid, question, docid, sentence, label


def read_tsv(path: str | Path) -> list[Question]:
    """The questions of one WikiQA TSV in file order, each with its candidate sentences in file order.

    Checks the header, the field count and Label of every row, that a question's rows are contiguous and carry
    one question text, and that a sentence is not listed twice for a question.
    """
    path = Path(path)
    lines = read_lines(path)
    _, header = next(lines)
    header = header.removeprefix("\ufeff")
    if tuple(header.split("\t")) != HEADER:
        raise InputFormatError(
            path, 1, f"expected the header {' '.join(HEADER)!r} (tab-separated), got {header[:200]!r}"
        )
    questions: list[Question] = []
    by_qid: dict[str, Question] = {}
    seen_docs: dict[tuple[str, str], int] = {}
    for number, line in lines:
        if not line:
            continue
        qid, text, docid, sentence, label = parse_row(line, number, path)
        current = questions[-1] if questions else None
        if current is None or current.qid != qid:
            if qid in by_qid:
                raise InputFormatError(
                    path, number, f"QuestionID {qid} reappears after other questions (first at line "
                    f"{by_qid[qid].line}); the rows of a question must be contiguous"
                )
            current = Question(qid, text, number)
            questions.append(current)
            by_qid[qid] = current
        elif text != current.text:
            raise InputFormatError(
                path, number, f"QuestionID {qid} has question {text!r} here but {current.text!r} at line {current.line}"
            )
        if (qid, docid) in seen_docs:
            raise InputFormatError(
                path, number, f"SentenceID {docid} is listed twice for {qid} (first at line {seen_docs[qid, docid]})"
            )
        seen_docs[qid, docid] = number
        current.candidates.append(Candidate(docid, sentence, label, number))
    if not questions:
        raise InputFormatError(path, None, "no data rows after the header")
    return questions


def read_ref(path: str | Path) -> list[RefLine]:
    """The lines of a ``.ref`` qrels file (``qnum 0 candnum label``, whitespace-separated; blank lines skipped)."""
    path = Path(path)
    out = []
    for number, line in read_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4:
            raise InputFormatError(path, number, f"expected 4 fields 'qnum 0 candnum label', got {len(fields)}")
        qnum = parse_label(fields[0], path, number, "qnum")
        parse_label(fields[1], path, number, "iteration (second field)")
        candnum = parse_label(fields[2], path, number, "candnum")
        label = parse_label(fields[3], path, number, "label")
        out.append(RefLine(qnum, candnum, label, number))
    if not out:
        raise InputFormatError(path, None, "no qrels lines")
    return out


def check_ref(questions: list[Question], tsv: Path, ref_path: str | Path) -> list[Question]:
    """Cross-check a ``.ref`` file against the questions of its TSV; return the questions it lists, in TSV order.

    Every line must name an existing question (1-based ``qnum``) and sentence (0-based ``candnum``) with the
    TSV's label; no pair may be listed twice and each listed question must be listed with all its sentences.
    """
    ref_path = Path(ref_path)
    listed: dict[int, dict[int, int]] = {}  # qnum -> candnum -> ref line
    for r in read_ref(ref_path):
        if not 1 <= r.qnum <= len(questions):
            raise InputFormatError(
                ref_path, r.line, f"unknown qnum {r.qnum}: {tsv} has {len(questions)} questions (qnum is 1-based)"
            )
        q = questions[r.qnum - 1]
        if not 0 <= r.candnum < len(q.candidates):
            raise InputFormatError(
                ref_path, r.line, f"unknown candnum {r.candnum} for qnum {r.qnum} ({q.qid}), which has "
                f"{len(q.candidates)} sentences in {tsv} (candnum is 0-based)"
            )
        seen = listed.setdefault(r.qnum, {})
        if r.candnum in seen:
            raise InputFormatError(
                ref_path, r.line, f"qnum {r.qnum} candnum {r.candnum} is listed twice (first at line {seen[r.candnum]})"
            )
        seen[r.candnum] = r.line
        c = q.candidates[r.candnum]
        if r.label != c.label:
            raise InputFormatError(
                ref_path, r.line, f"label {r.label} for qnum {r.qnum} candnum {r.candnum} ({q.qid} {c.docid}) "
                f"disagrees with {tsv}:{c.line} (Label {c.label})"
            )
    for qnum, seen in listed.items():
        q = questions[qnum - 1]
        if len(seen) != len(q.candidates):
            raise InputFormatError(
                ref_path, min(seen.values()), f"qnum {qnum} ({q.qid}) lists {len(seen)} of its "
                f"{len(q.candidates)} sentences; a question must be listed completely or not at all"
            )
    return [q for i, q in enumerate(questions, start=1) if i in listed]


def load(files: Mapping[str, Any], *, ref: Mapping[str, str] | None = None) -> RankingData:
    """Load WikiQA TSVs; ``files`` maps split (train/dev/test) -> TSV path.

    ``ref`` optionally maps split -> ``.ref`` qrels file to cross-check against that split's TSV; a ref that
    lists a subset of the questions (the ``-filtered`` file) keeps only those questions of the split.
    """
    ref = {s: p for s, p in (ref or {}).items() if p}
    for split in list(files) + list(ref):
        if split not in SPLITS:
            raise ValueError(f"wikiqa: unknown split {split!r}; expected one of {list(SPLITS)}")
    extra = sorted(set(ref) - set(files))
    if extra:
        raise ValueError(f"wikiqa: ref given for split(s) {extra} without a TSV in files")
    if not files:
        raise ValueError("wikiqa: files must map at least one split to a WikiQA TSV")

    columns = RankingColumns(query_label="QuestionID", doc_label="SentenceID", text_label="sentence")
    for split in SPLITS:
        if split not in files:
            continue
        path = Path(files[split])
        questions = read_tsv(path)
        if split in ref:
            questions = check_ref(questions, path, ref[split])
        for q in questions:
            columns.add_query(q.qid, split, [q.text], at=(path, q.line))
            for c in q.candidates:
                columns.add_candidate(q.qid, c.docid, c.text, c.label, at=(path, c.line))
    return columns.data()

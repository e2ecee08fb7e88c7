"""SemEval-2016 Task 3 (Nakov et al. 2016), English Qatar Living forum: comment ranking for subtasks A and C.

Each split is one XML file of the official v3.2 release (UTF-8, CRLF, inline DTD, root ``<xml>``)::

    <OrgQuestion ORGQ_ID="Q268">  <OrgQSubject/> <OrgQBody/>
      <Thread THREAD_SEQUENCE="Q268_R4" [SubtaskA_Skip_Because_Same_As_RelQuestion_ID="Q246_R15"]>
        <RelQuestion RELQ_ID="Q268_R4" RELQ_CATEGORY="..." ...> <RelQSubject/> <RelQBody/> </RelQuestion>
        <RelComment RELC_ID="Q268_R4_C1" RELC_RELEVANCE2ORGQ="Good" RELC_RELEVANCE2RELQ="Bad" ...>
          <RelCText/> </RelComment>  (x 10)
      </Thread>
    </OrgQuestion>

An ``<OrgQuestion>`` element holds one ``<Thread>`` (the related question found by a search engine and its 10
comments), so the same ORGQ_ID, with the same subject and body, repeats for its 10 threads; threads are grouped by
ORGQ_ID (an element holding several threads is read the same way). Relevance labels are graded: Good = 2,
PotentiallyUseful = 1, Bad = 0 (the official MAP scorer counts only Good as relevant; ``rel > 0`` would also count
PotentiallyUseful, so evaluate with a relevance threshold of 2 to match it).

* task ``A`` (comment ranking for the thread's own question): one query per thread, qid = RELQ_ID, text =
  RelQSubject + newline + RelQBody (subject only when the body is empty), domain = RELQ_CATEGORY; candidates and
  qrels = its comments, docid = RELC_ID, rel from RELC_RELEVANCE2RELQ. With ``skip_duplicates`` the threads marked
  ``SubtaskA_Skip_Because_Same_As_RelQuestion_ID`` (duplicates of a thread elsewhere) are left out, as in the task.
* task ``C`` (comment ranking for the original question): one query per ORGQ_ID, text = OrgQSubject + newline +
  OrgQBody, domain null; candidates and qrels = the comments of all its threads (100), rel from RELC_RELEVANCE2ORGQ.
  No thread is skipped.

Texts are XML-decoded by the parser; HTML entities left in them (``&#39;``) are unescaped and surrounding
whitespace is stripped; nothing else is changed (``;`` standing for ``,`` and URLs stay as they are).
Errors name the file and the line of the offending element's start tag. ``files`` maps a split to one path or,
for a split delivered in several files (train-part1, train-part2), to a list or mapping of paths.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.parsers import expat

from curricula.data.base import RankingColumns, RankingData
from curricula.plumbing.contracts import SPLITS
from curricula.plumbing.errors import InputFormatError

LABELS = {"Good": 2, "PotentiallyUseful": 1, "Bad": 0}
TASKS = {"A": "RELC_RELEVANCE2RELQ", "C": "RELC_RELEVANCE2ORGQ"}
SKIP_ATTRIBUTE = "SubtaskA_Skip_Because_Same_As_RelQuestion_ID"

#: element -> the child elements it may contain (None: the document itself)
CHILDREN: dict[str | None, tuple[str, ...]] = {
    None: ("xml",),
    "xml": ("OrgQuestion",),
    "OrgQuestion": ("OrgQSubject", "OrgQBody", "Thread"),
    "Thread": ("RelQuestion", "RelComment"),
    "RelQuestion": ("RelQSubject", "RelQBody"),
    "RelComment": ("RelCText",),
}
TEXT_ELEMENTS = frozenset({"OrgQSubject", "OrgQBody", "RelQSubject", "RelQBody", "RelCText"})


@dataclass
class Node:
    """One parsed element: its tag, attributes, start-tag line, child elements and (for text elements) text."""

    tag: str
    attrs: dict[str, str]
    line: int
    children: list["Node"] = field(default_factory=list)
    chunks: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return clean_text("".join(self.chunks))


@dataclass(frozen=True)
class Comment:
    cid: str
    text: str
    rel: int
    line: int


@dataclass(frozen=True)
class Thread:
    qid: str  # RELQ_ID
    text: str
    category: str
    skip: bool
    comments: tuple[Comment, ...]
    line: int


@dataclass
class OrgQuestion:
    oid: str
    subject: str
    body: str
    line: int  # of its first element
    threads: list[Thread] = field(default_factory=list)

    @property
    def text(self) -> str:
        return question_text(self.subject, self.body)


def clean_text(raw: str) -> str:
    """Unescape the HTML entities that remain after XML decoding and strip surrounding whitespace."""
    return html.unescape(raw).strip()


def question_text(subject: str, body: str) -> str:
    """Subject and body on two lines; only the non-empty one when the other is empty."""
    return "\n".join(part for part in (subject, body) if part)


def parse_xml(path: str | Path) -> Node:
    """The root element of a SemEval CQA file, with the start-tag line of every element.

    Raises :class:`InputFormatError` for a missing or empty file, bytes that are not UTF-8, malformed XML
    (expat's message and position) and elements outside the format's structure.
    """
    path = Path(path)
    if not path.exists():
        raise InputFormatError(path, None, "file not found")
    raw = path.read_bytes()
    if not raw.strip():
        raise InputFormatError(path, None, "file is empty, expected a SemEval CQA XML document")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputFormatError(path, line, f"invalid UTF-8 at byte offset {exc.start}") from None

    parser = expat.ParserCreate()
    parser.buffer_text = True
    document = Node("", {}, 0)
    stack = [document]

    def start(tag: str, attrs: dict[str, str]) -> None:
        parent = stack[-1]
        allowed = CHILDREN.get(parent.tag or None, ())
        if tag not in allowed:
            where = f"inside <{parent.tag}>" if parent.tag else "as the root element"
            expected = ", ".join(f"<{t}>" for t in allowed) or "text only"
            raise InputFormatError(path, parser.CurrentLineNumber, f"unexpected element <{tag}> {where}; "
                                   f"expected {expected}")
        node = Node(tag, attrs, parser.CurrentLineNumber)
        parent.children.append(node)
        stack.append(node)

    def end(tag: str) -> None:
        stack.pop()

    def chars(data: str) -> None:
        if stack[-1].tag in TEXT_ELEMENTS:
            stack[-1].chunks.append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(raw, True)
    except expat.ExpatError as exc:
        raise InputFormatError(
            path, exc.lineno, f"malformed XML: {expat.ErrorString(exc.code)} (column {exc.offset + 1})"
        ) from None
    return document.children[0]


def attribute(node: Node, name: str, path: Path) -> str:
    value = node.attrs.get(name)
    if value is None:
        raise InputFormatError(path, node.line, f"<{node.tag}> lacks the required attribute {name}")
    if not value.strip():
        raise InputFormatError(path, node.line, f"<{node.tag}> has an empty attribute {name}")
    return value.strip()


def children(node: Node, tag: str, path: Path, *, exactly_one: bool = False) -> list[Node]:
    """The child elements named ``tag``; at least one (exactly one with ``exactly_one``), else an error."""
    found = [c for c in node.children if c.tag == tag]
    if not found:
        raise InputFormatError(path, node.line, f"<{node.tag}> lacks the required child <{tag}>")
    if exactly_one and len(found) > 1:
        raise InputFormatError(path, found[1].line, f"<{node.tag}> has {len(found)} <{tag}> children, expected one")
    return found


def child_text(node: Node, tag: str, path: Path) -> str:
    return children(node, tag, path, exactly_one=True)[0].text


def relevance(node: Node, name: str, path: Path) -> int:
    value = attribute(node, name, path)
    if value not in LABELS:
        raise InputFormatError(
            path, node.line, f"{name}={value!r} is not a relevance label; expected one of {', '.join(LABELS)}"
        )
    return LABELS[value]


def read_thread(node: Node, rel_attribute: str, path: Path) -> Thread:
    relq = children(node, "RelQuestion", path, exactly_one=True)[0]
    qid = attribute(relq, "RELQ_ID", path)
    text = question_text(child_text(relq, "RelQSubject", path), child_text(relq, "RelQBody", path))
    if not text:
        raise InputFormatError(path, relq.line, f"RelQuestion {qid} has an empty RelQSubject and RelQBody")
    comments = tuple(
        Comment(attribute(c, "RELC_ID", path), child_text(c, "RelCText", path), relevance(c, rel_attribute, path),
                c.line)
        for c in node.children if c.tag == "RelComment"
    )
    return Thread(qid, text, attribute(relq, "RELQ_CATEGORY", path), SKIP_ATTRIBUTE in node.attrs, comments,
                  node.line)


def read_cqa(path: str | Path, rel_attribute: str) -> list[OrgQuestion]:
    """The original questions of one file in order of first appearance, each with all its threads.

    ``rel_attribute`` names the comment label to read (RELC_RELEVANCE2RELQ or RELC_RELEVANCE2ORGQ). Checks that a
    repeated ORGQ_ID repeats its subject and body, and that no RELQ_ID or RELC_ID occurs twice.
    """
    path = Path(path)
    root = parse_xml(path)
    by_id: dict[str, OrgQuestion] = {}
    thread_at: dict[str, int] = {}
    comment_at: dict[str, int] = {}
    for element in root.children:
        oid = attribute(element, "ORGQ_ID", path)
        subject = child_text(element, "OrgQSubject", path)
        body = child_text(element, "OrgQBody", path)
        org = by_id.get(oid)
        if org is None:
            if not question_text(subject, body):
                raise InputFormatError(path, element.line, f"OrgQuestion {oid} has an empty OrgQSubject and OrgQBody")
            org = by_id[oid] = OrgQuestion(oid, subject, body, element.line)
        elif (subject, body) != (org.subject, org.body):
            raise InputFormatError(
                path, element.line,
                f"ORGQ_ID {oid} repeats with a different OrgQSubject/OrgQBody than at line {org.line}",
            )
        for node in children(element, "Thread", path):
            thread = read_thread(node, rel_attribute, path)
            if thread.qid in thread_at:
                raise InputFormatError(
                    path, thread.line, f"RELQ_ID {thread.qid} occurs twice (first at line {thread_at[thread.qid]})"
                )
            thread_at[thread.qid] = thread.line
            for c in thread.comments:
                if c.cid in comment_at:
                    raise InputFormatError(
                        path, c.line, f"RELC_ID {c.cid} occurs twice (first at line {comment_at[c.cid]})"
                    )
                comment_at[c.cid] = c.line
            org.threads.append(thread)
    if not by_id:
        raise InputFormatError(path, root.line, "no <OrgQuestion> elements")
    return list(by_id.values())


def split_paths(value: Any) -> list[Path]:
    """One path, or the paths of a list or mapping (a split delivered in several files)."""
    if isinstance(value, (str, os.PathLike)):
        return [Path(value)]
    if isinstance(value, Mapping):
        return [Path(v) for v in value.values()]
    if isinstance(value, (list, tuple)):
        return [Path(v) for v in value]
    raise ValueError(f"semeval_cqa: expected a path or a list/mapping of paths, got {value!r}")


def load(files: Mapping[str, Any], *, task: str = "A", skip_duplicates: bool = True) -> RankingData:
    """Load SemEval-2016 Task 3 English XML files; ``files`` maps split (train/dev/test) -> file(s).

    ``task`` is ``A`` (rank a thread's comments for its own question) or ``C`` (rank the 100 comments of the
    related threads for the original question). ``skip_duplicates`` (task A only) leaves out the threads the
    organisers marked as duplicates.
    """
    if task not in TASKS:
        raise ValueError(f"semeval_cqa: task must be one of {sorted(TASKS)}, got {task!r}")
    for split in files:
        if split not in SPLITS:
            raise ValueError(f"semeval_cqa: unknown split {split!r}; expected one of {list(SPLITS)}")
    if not files:
        raise ValueError("semeval_cqa: files must map at least one split to a SemEval CQA XML file")

    columns = RankingColumns(query_label="query", doc_label="RELC_ID", text_label="RelCText")

    def add_query(qid: str, split: str, text: str, domain: str | None, comments: list[Comment],
                  path: Path, line: int) -> None:
        columns.add_query(qid, split, [text], domain, at=(path, line))
        for c in comments:
            columns.add_candidate(qid, c.cid, c.text, c.rel, at=(path, c.line))

    for split in SPLITS:
        if split not in files:
            continue
        for path in split_paths(files[split]):
            for org in read_cqa(path, TASKS[task]):
                if task == "C":
                    comments = [c for t in org.threads for c in t.comments]
                    add_query(org.oid, split, org.text, None, comments, path, org.line)
                    continue
                for t in org.threads:
                    if skip_duplicates and t.skip:
                        continue
                    add_query(t.qid, split, t.text, t.category, list(t.comments), path, t.line)
    return columns.data()

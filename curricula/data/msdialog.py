"""Multi-turn response selection in the tab-separated "label, context turns, response" format.

This is the common release format of MSDialog-ResponseRank and MANtIS (Penha & Hauff), the Douban Conversation
Corpus (Wu et al. 2017) and the E-commerce Dialogue Corpus (Zhang et al. 2018):

* UTF-8, LF or CRLF line endings, no header; the last line may lack its newline;
* each line is ``label \\t u_1 \\t ... \\t u_n \\t response``: field 0 is an integer label (1 = true response,
  0 = negative; any non-negative integer is kept as a graded ``rel``), fields 1..n are the context turns oldest
  first, and the last field is one candidate response, so a line has at least 3 fields;
* the candidates of one context are consecutive lines with identical context fields: a new context starts where
  the context fields change, or, with ``group_size``, every ``group_size`` lines (then the lines of one group must
  agree on the context, and the file must hold whole groups). Two adjacent contexts with identical turns are
  merged unless ``group_size`` is given.

``variant="ubuntu"`` reads the Ubuntu Dialogue Corpus (v2) layout instead: exactly ``label \\t context \\t response``,
where the context's utterances end in ``__eou__`` and its turns in ``__eot__``. The context is split into turns at
``__eot__``, the ``__eou__`` markers are removed and a turn's utterances joined by a space; empty turns are dropped.
The response is cleaned the same way (its utterances joined by a space).

Context turns that are empty or whitespace only are dropped; a context with no turn left is an error, as is an
empty response. Every context must have a positive (label > 0) candidate unless ``allow_no_positive``.

Identifiers: qid ``{split}-{n}`` with n the 1-based number of the context in its file, docid ``{qid}:{i}`` with i
the 1-based position of the candidate within its context. ``queries.text`` is the turns joined by a newline,
``turns`` the list of turns, ``domain`` null. Every candidate is in ``candidates`` and in ``qrels`` with its label
(rel 0 rows included: they are judged negatives).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curricula.data.base import RankingColumns, RankingData, parse_label, read_lines, split_roles
from curricula.plumbing.errors import InputFormatError

VARIANTS = ("msdialog", "ubuntu")
EOU = "__eou__"
EOT = "__eot__"
MAX_REL = 2**31 - 1  # qrels.rel is Int32


@dataclass(frozen=True)
class Line:
    """One parsed line: its 1-based number, label, the raw context key used for grouping, turns and response."""

    number: int
    label: int
    key: tuple[str, ...]
    turns: tuple[str, ...]
    response: str


@dataclass
class Context:
    """The consecutive lines of one context; ``start`` is the line number of its first candidate."""

    start: int
    key: tuple[str, ...]
    turns: tuple[str, ...]
    labels: list[int] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)


def ubuntu_turns(text: str) -> tuple[str, ...]:
    """Turns of an Ubuntu context: split at ``__eot__``, ``__eou__`` removed, utterances joined, empties dropped."""
    turns = []
    for turn in text.split(EOT):
        utterances = [u.strip() for u in turn.split(EOU)]
        joined = " ".join(u for u in utterances if u)
        if joined:
            turns.append(joined)
    return tuple(turns)


def parse_line(number: int, line: str, path: Path, variant: str) -> Line:
    """Split one line into label, context and response, checking field count, label and response."""
    fields = line.split("\t")
    if variant == "ubuntu":
        if len(fields) != 3:
            raise InputFormatError(
                path, number, f"found {len(fields)} tab-separated field(s), expected exactly 3 "
                "(label, context with __eou__/__eot__ markers, response) for variant 'ubuntu'"
            )
    elif len(fields) < 3:
        what = "an empty line" if line == "" else f"{len(fields)} tab-separated field(s)"
        raise InputFormatError(
            path, number, f"found {what}, expected at least 3 (label, one or more context turns, response)"
        )
    label = parse_label(fields[0], path, number)
    if not 0 <= label <= MAX_REL:
        raise InputFormatError(
            path, number, f"label must be a non-negative integer (1 = true response, 0 = negative), got {fields[0]!r}"
        )
    key = tuple(fields[1:-1])
    if variant == "ubuntu":
        turns = ubuntu_turns(fields[1])
        response = " ".join(ubuntu_turns(fields[2]))
    else:
        turns = tuple(t for t in key if t.strip())
        response = fields[-1]
    if not response.strip():
        raise InputFormatError(path, number, "response (last field) is empty")
    if not turns:
        raise InputFormatError(path, number, "context has no non-empty turn")
    return Line(number, label, key, turns, response)


def read_contexts(path: Path, variant: str = "msdialog", group_size: int | None = None) -> Iterator[Context]:
    """The contexts of one file in order, each with its candidates' labels and responses."""
    current: Context | None = None
    for number, text in read_lines(path):
        if number == 1:
            text = text.removeprefix("\ufeff")
        line = parse_line(number, text, path, variant)
        if group_size is None:
            starts = current is None or line.key != current.key
        else:
            starts = current is None or len(current.labels) == group_size
            if current is not None and not starts and line.key != current.key:
                raise InputFormatError(
                    path, number, f"context differs from the one on line {current.start}, but group_size "
                    f"{group_size} puts both lines in the same group"
                )
        if starts:
            if current is not None:
                yield current
            current = Context(line.number, line.key, line.turns)
        assert current is not None  # set above when starts; starts is True whenever current is None
        current.labels.append(line.label)
        current.responses.append(line.response)
    if current is None:  # read_lines rejects empty files; this guards a file of nothing at all
        raise InputFormatError(path, None, "file has no lines")
    if group_size is not None and len(current.labels) != group_size:
        raise InputFormatError(
            path, current.start, f"last group has {len(current.labels)} line(s), expected group_size {group_size}"
        )
    yield current


def load(
    files: Mapping[str, Any],
    *,
    variant: str = "msdialog",
    allow_no_positive: bool = False,
    group_size: int | None = None,
) -> RankingData:
    """Load response-selection files; ``files`` maps a split (train/dev/test) to a file in this format.

    ``variant``: ``msdialog`` (tab-separated turns; also MANtIS, Douban, E-commerce) or ``ubuntu`` (one context
    field with ``__eou__``/``__eot__`` markers). ``allow_no_positive`` keeps contexts whose candidates are all
    negatives (otherwise an error at the line where the context starts). ``group_size`` fixes the number of
    candidates per context instead of grouping by the context text.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    if group_size is not None and (isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1):
        raise ValueError(f"group_size must be a positive integer or None, got {group_size!r}")

    columns = RankingColumns()
    for split, path in split_roles(files):
        for n, ctx in enumerate(read_contexts(path, variant, group_size), start=1):
            if not allow_no_positive and not any(label > 0 for label in ctx.labels):
                raise InputFormatError(
                    path, ctx.start, f"context starting on this line has no positive candidate (all "
                    f"{len(ctx.labels)} labels are 0); set allow_no_positive to keep such contexts"
                )
            qid = f"{split}-{n}"
            columns.add_query(qid, split, list(ctx.turns))
            for i, (label, response) in enumerate(zip(ctx.labels, ctx.responses), start=1):
                columns.add_candidate(qid, f"{qid}:{i}", response, label)
    return columns.data()

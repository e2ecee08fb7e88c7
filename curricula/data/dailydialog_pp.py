"""DailyDialog++ (Sai et al. 2020): multi-reference response ranking with adversarial and random negatives.

Each split is a JSON Lines file (named ``*.json`` upstream): UTF-8, one JSON object per line, the last line
without a newline. An object is::

    {"id": 0, "context": [turn, ...],            # oldest first, 1-6 turns
     "positive_responses": [5 strings],            # relevant          -> rel 1
     "adversarial_negative_responses": [5 strings],# hard negatives    -> rel 0
     "random_negative_responses": [5 strings]}     # easy negatives    -> rel 0

``id`` is an integer (a string is accepted too) and unique within a file; other keys are ignored. Empty or
whitespace-only context turns are dropped. An empty or whitespace-only response is dropped when
``drop_empty_responses`` (the default) and an error otherwise; every context needs at least one positive response.
The same text may occur twice in one context's responses: each occurrence is its own candidate.

Identifiers: qid ``{split}-{id}``; docid ``{qid}:pos{i}``, ``{qid}:adv{i}`` or ``{qid}:rand{i}`` with i the 1-based
position in the record's list (dropped responses leave a gap), so :func:`candidate_kind` recovers the kind of
negative from a docid. ``queries.text`` is the turns joined by a newline, ``domain`` null. Every response is a
candidate and is judged in ``qrels``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from curricula.data.base import RankingColumns, RankingData, read_lines, split_roles
from curricula.plumbing.errors import InputFormatError

#: record key -> (docid prefix, kind, rel)
RESPONSE_KEYS: dict[str, tuple[str, str, int]] = {
    "positive_responses": ("pos", "positive", 1),
    "adversarial_negative_responses": ("adv", "adversarial", 0),
    "random_negative_responses": ("rand", "random", 0),
}
KINDS = {prefix: kind for prefix, kind, _ in RESPONSE_KEYS.values()}
_DOCID = re.compile(r":(pos|adv|rand)[0-9]+$")


def candidate_kind(docid: str) -> str:
    """``positive``, ``adversarial`` or ``random``: the kind of response a DailyDialog++ docid names."""
    match = _DOCID.search(docid)
    if match is None:
        raise ValueError(f"{docid!r} is not a DailyDialog++ docid (expected '<qid>:pos|adv|rand<i>')")
    return KINDS[match.group(1)]


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def string_list(record: dict, key: str, path: Path, line: int) -> list[str]:
    """``record[key]`` as a list of strings, or an error naming the key (and the item at fault)."""
    if key not in record:
        raise InputFormatError(path, line, f"missing key {key!r}")
    value = record[key]
    if not isinstance(value, list):
        raise InputFormatError(path, line, f"{key!r} must be a list of strings, got {_type_name(value)}")
    for i, item in enumerate(value, start=1):
        if not isinstance(item, str):
            raise InputFormatError(path, line, f"{key!r} item {i} must be a string, got {_type_name(item)}")
    return value


def record_id(record: dict, path: Path, line: int) -> str:
    """The record's ``id`` as text (an integer or a non-empty string)."""
    if "id" not in record:
        raise InputFormatError(path, line, "missing key 'id'")
    value = record["id"]
    if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, str) and not value.strip()):
        raise InputFormatError(path, line, f"'id' must be an integer or a non-empty string, got {value!r}")
    return str(value)


def parse_record(text: str, path: Path, line: int) -> dict:
    """One line as a JSON object."""
    if not text.strip():
        raise InputFormatError(path, line, "empty line, expected one JSON object per line")
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFormatError(path, line, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(record, dict):
        raise InputFormatError(path, line, f"expected a JSON object, got {_type_name(record)}")
    return record


def load(files: Mapping[str, Any], *, drop_empty_responses: bool = True) -> RankingData:
    """Load DailyDialog++ files; ``files`` maps a split (train/dev/test) to its JSON Lines file.

    ``drop_empty_responses``: drop empty/whitespace responses (default) instead of raising an error.
    """
    columns = RankingColumns()
    for split, path in split_roles(files):
        first_line: dict[str, int] = {}
        for line, text in read_lines(path):
            if line == 1:
                text = text.removeprefix("\ufeff")
            record = parse_record(text, path, line)
            rid = record_id(record, path, line)
            qid = f"{split}-{rid}"
            if qid in first_line:
                raise InputFormatError(path, line, f"duplicate id {record['id']!r} (first on line {first_line[qid]})")
            first_line[qid] = line
            turns = [t for t in string_list(record, "context", path, line) if t.strip()]
            if not turns:
                raise InputFormatError(path, line, "'context' has no non-empty turn")
            responses: list[tuple[str, str, int]] = []  # (docid, text, rel)
            for key, (prefix, _kind, rel) in RESPONSE_KEYS.items():
                for i, response in enumerate(string_list(record, key, path, line), start=1):
                    if not response.strip():
                        if drop_empty_responses:
                            continue
                        raise InputFormatError(
                            path, line, f"{key!r} item {i} is empty (set drop_empty_responses to drop it)"
                        )
                    responses.append((f"{qid}:{prefix}{i}", response, rel))
            if not any(rel > 0 for _, _, rel in responses):
                raise InputFormatError(path, line, "no positive response ('positive_responses' has no non-empty text)")
            columns.add_query(qid, split, turns)
            for docid, response, rel in responses:
                columns.add_candidate(qid, docid, response, rel)
    return columns.data()

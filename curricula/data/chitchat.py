"""The embedded default dataset: Chit Chat Challenge conversations (PyPI ``chitchat-dataset``, MIT) as response ranking.

The package ships ``dataset.json``: ``{conversation UUID: {"messages": [turn, ...], ...}}`` where a turn is the list
of consecutive messages ``{"text", "timestamp", "sender"}`` of one sender. We build a response-ranking benchmark the
way MSDialog/Ubuntu/Douban-style corpora are built (Penha & Hauff 2020 §4; Su et al. 2021 §5.1):

* a turn's text is its non-empty messages joined by a space; empty turns are dropped and adjacent turns of the same
  sender merged (consecutive messages of one speaker form one turn);
* conversations with fewer than two speakers are skipped (3,150 of 7,168 have a single sender and no reply);
* for a conversation with turns u_1..u_n, the instance at turn tau (2 <= tau <= n) has context u_1..u_{tau-1}
  (optionally only the last ``max_context_turns``) and true response u_tau;
* each instance gets ``negatives`` (K-1, default 9) negative responses sampled with a seed, uniformly from the turns
  of *other* conversations of the *same split* whose text differs from the true response;
* train/dev/test are split by conversation, so no conversation (and no response text of it) crosses splits.

Identifiers: qid ``{conversation}:{tau}`` (tau 1-based position of the response), docid ``{conversation}:{i}`` (i the
1-based turn index), so a response's docid is also its turn's position. ``domain`` is null (no topic labels).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chitchat_dataset
import numpy as np
import polars as pl

from curricula.data.base import RankingData, seeded_split
from curricula.plumbing.contracts import SPLITS
from curricula.plumbing.errors import InputFormatError

DEFAULT_FRACTIONS = {"train": 0.8, "dev": 0.1, "test": 0.1}


def default_path() -> Path:
    """``dataset.json`` inside the installed ``chitchat_dataset`` package."""
    return Path(chitchat_dataset.__file__).resolve().parent / "dataset.json"


@dataclass(frozen=True)
class Conversation:
    cid: str
    turns: tuple[str, ...]  # one text per turn, speakers alternate


def conversation_turns(cid: str, messages: Any, path: Path) -> tuple[str, ...]:
    """Turn texts of one conversation, empty messages dropped and same-speaker neighbours merged.

    Returns an empty tuple when fewer than two speakers remain (a conversation without a reply).
    """
    if not isinstance(messages, list):
        raise InputFormatError(path, None, f"conversation {cid}: 'messages' must be a list of turns")
    speakers: list[object] = []  # the messages' sender values, only compared
    texts: list[str] = []
    for t, turn in enumerate(messages):
        if not isinstance(turn, list):
            raise InputFormatError(path, None, f"conversation {cid}: turn {t} must be a list of messages")
        parts = []
        sender = None
        for m in turn:
            if not isinstance(m, dict) or not isinstance(m.get("text"), str) or "sender" not in m:
                raise InputFormatError(path, None, f"conversation {cid}: turn {t} has a message without text/sender")
            sender = m["sender"]
            if m["text"].strip():
                parts.append(m["text"].strip())
        if not parts:
            continue
        text = " ".join(parts)
        if speakers and speakers[-1] == sender:
            texts[-1] = f"{texts[-1]} {text}"
        else:
            speakers.append(sender)
            texts.append(text)
    if len(set(speakers)) < 2:
        return ()
    return tuple(texts)


def read_conversations(path: str | Path) -> list[Conversation]:
    """All conversations with at least two speakers, sorted by conversation id.

    A process reads a file once (2 s for the package's 7,168 conversations): a second call on the same unchanged
    file (same size and modification time) gets the same conversations from memory."""
    path = Path(path)
    if not path.exists():
        raise InputFormatError(path, None, "file not found")
    stat = path.stat()
    if stat.st_size == 0:
        raise InputFormatError(path, None, "file is empty, expected a JSON object of conversations")
    return list(_read_conversations(path, stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=4)
def _read_conversations(path: Path, size: int, mtime_ns: int) -> tuple[Conversation, ...]:
    """:func:`read_conversations` of ``path``, remembered per (path, size, modification time)."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputFormatError(path, line, f"invalid UTF-8 at byte offset {exc.start}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFormatError(path, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InputFormatError(path, 1, "expected a JSON object mapping conversation ids to conversations")
    out = []
    for cid in sorted(data):
        conv = data[cid]
        if not isinstance(conv, dict) or "messages" not in conv:
            raise InputFormatError(path, None, f"conversation {cid}: expected an object with 'messages'")
        turns = conversation_turns(cid, conv["messages"], path)
        if turns:
            out.append(Conversation(cid, turns))
    return tuple(out)


def instance_positions(n_turns: int) -> range:
    """1-based response positions tau of a conversation with ``n_turns`` turns: every turn after the first."""
    return range(2, n_turns + 1)


def sample_negatives(
    positives: list[str],
    owners: np.ndarray,
    pool_texts: list[str],
    pool_owners: np.ndarray,
    k: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Indices into the pool: ``k`` distinct negatives per instance, from other conversations, text != positive.

    ``owners[i]`` is instance i's conversation index and ``pool_owners[j]`` that of pool response j. Draws are
    uniform over the pool with rejection (the pool is large compared with k), so the result depends only on
    the inputs and the generator's state.
    """
    n_pool = len(pool_texts)
    out = np.empty((len(positives), k), dtype=np.int64)
    for i, (pos, owner) in enumerate(zip(positives, owners)):
        chosen: list[int] = []
        seen: set[int] = set()
        attempts = 0
        while len(chosen) < k:
            attempts += 1
            if attempts > 100 * k + 1000:
                raise ValueError(f"could not sample {k} negatives from a pool of {n_pool} responses")
            j = int(rng.integers(n_pool))
            if j in seen or pool_owners[j] == owner or pool_texts[j] == pos:
                continue
            seen.add(j)
            chosen.append(j)
        out[i] = chosen
    return out


def load(
    files: Mapping[str, Any] | None = None,
    *,
    negatives: int = 9,
    fractions: Mapping[str, float] | None = None,
    seed: int = 42,
    max_instances: Mapping[str, int | None] | None = None,
    max_context_turns: int | None = None,
) -> RankingData:
    """Build the response-ranking dataset from the chitchat conversations.

    ``files`` may name ``json`` (default: the installed package's ``dataset.json``). ``fractions`` split
    conversations into train/dev/test (default 0.8/0.1/0.1). ``max_instances`` caps the number of instances per
    split (a seeded uniform sample; None = all). ``max_context_turns`` keeps only the most recent turns of each
    context (None = all). Each instance has 1 + ``negatives`` candidates; the positive has rel 1.
    """
    path = Path((files or {}).get("json") or default_path())
    fractions = dict(fractions or DEFAULT_FRACTIONS)
    caps = dict(max_instances or {})
    if negatives < 1:
        raise ValueError("negatives must be >= 1")
    conversations = read_conversations(path)
    split_of = seeded_split([c.cid for c in conversations], fractions, seed)
    tables = _Tables()
    for s_index, split in enumerate(SPLITS):
        convs = [c for c in conversations if split_of.get(c.cid) == split]
        if not convs:
            continue
        rng = np.random.default_rng([seed, s_index])
        _add_split(tables, split, convs, rng, caps.get(split), negatives, max_context_turns)
    return tables.data()


@dataclass
class _Tables:
    """The columns of the four tables, collected instance by instance (docs keyed by docid, first text kept)."""

    queries: dict[str, list] = field(default_factory=lambda: {"qid": [], "split": [], "text": [], "turns": []})
    cand_q: list[str] = field(default_factory=list)
    cand_d: list[str] = field(default_factory=list)
    qrel_q: list[str] = field(default_factory=list)
    qrel_d: list[str] = field(default_factory=list)
    doc_text: dict[str, str] = field(default_factory=dict)

    def add(self, qid: str, split: str, context: list[str], positive: tuple[str, str],
            negatives: list[tuple[str, str]]) -> None:
        """One instance: its query (context turns joined by newlines), its positive (docid, text), rel 1, and its
        candidates, the positive first, then the negatives (docid, text) in order."""
        self.queries["qid"].append(qid)
        self.queries["split"].append(split)
        self.queries["text"].append("\n".join(context))
        self.queries["turns"].append(context)
        self.qrel_q.append(qid)
        self.qrel_d.append(positive[0])
        for docid, text in [positive, *negatives]:
            self.doc_text[docid] = text
            self.cand_q.append(qid)
            self.cand_d.append(docid)

    def data(self) -> RankingData:
        """The collected rows as a :class:`RankingData` (``domain`` null)."""
        q_rows = self.queries
        queries = pl.DataFrame(
            {**q_rows, "domain": [None] * len(q_rows["qid"])},
            schema={"qid": pl.String, "split": pl.String, "text": pl.String, "turns": pl.List(pl.String),
                    "domain": pl.String},
        )
        docs = pl.DataFrame({"docid": list(self.doc_text), "text": list(self.doc_text.values())})
        qrels = pl.DataFrame({"qid": self.qrel_q, "docid": self.qrel_d, "rel": [1] * len(self.qrel_q)},
                             schema={"qid": pl.String, "docid": pl.String, "rel": pl.Int32})
        candidates = pl.DataFrame({"qid": self.cand_q, "docid": self.cand_d},
                                  schema={"qid": pl.String, "docid": pl.String})
        return RankingData.build(queries, docs, qrels, candidates)


def _add_split(tables: _Tables, split: str, convs: list[Conversation], rng: np.random.Generator, cap: int | None,
               negatives: int, max_context_turns: int | None) -> None:
    """Add every instance of one split's conversations to ``tables``: all (conversation, tau) in order, a seeded
    sample of ``cap`` of them when there are more, each with ``negatives`` responses of the split's other
    conversations (:func:`sample_negatives`); ``rng`` draws the sample, then the negatives."""
    # The response pool of this split: every turn of every conversation in it.
    pool_ids = [f"{c.cid}:{i}" for c in convs for i in range(1, len(c.turns) + 1)]
    pool_texts = [t for c in convs for t in c.turns]
    pool_owners = np.repeat(np.arange(len(convs)), [len(c.turns) for c in convs])
    # All instances of the split, in (conversation, tau) order, then a seeded cap.
    inst = [(ci, tau) for ci, c in enumerate(convs) for tau in instance_positions(len(c.turns))]
    if cap is not None and cap < len(inst):
        keep = np.sort(rng.choice(len(inst), size=cap, replace=False))
        inst = [inst[i] for i in keep]
    owners = np.array([ci for ci, _ in inst], dtype=np.int64)
    positives = [convs[ci].turns[tau - 1] for ci, tau in inst]
    negs = sample_negatives(positives, owners, pool_texts, pool_owners, negatives, rng)
    for (ci, tau), row in zip(inst, negs):
        c = convs[ci]
        context = list(c.turns[: tau - 1])
        if max_context_turns is not None:
            context = context[-max_context_turns:]
        tables.add(f"{c.cid}:{tau}", split, context, (f"{c.cid}:{tau}", c.turns[tau - 1]),
                   [(pool_ids[j], pool_texts[j]) for j in row])

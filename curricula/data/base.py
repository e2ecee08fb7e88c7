"""What every loader returns, and the checks and split handling they share.

A loader turns one native format into a :class:`RankingData`: four polars tables with the ingest contracts
of :mod:`curricula.plumbing.contracts` (queries, docs, qrels, candidates). Loaders raise
:class:`~curricula.plumbing.errors.InputFormatError` (``path:line: problem``) on malformed input and never write files;
the ingest stage writes the tables atomically only after every check passed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curricula.plumbing.contracts import CANDIDATES, DOCS, QRELS, QUERIES, SPLITS, TableSpec, check_table, conform
from curricula.plumbing.errors import InputFormatError


@dataclass(frozen=True)
class RankingData:
    """A ranking dataset in the pipeline's contract.

    ``queries``: qid, split (train/dev/test), text (the query, or a dialogue context joined by newlines), turns
    (the context's utterances oldest first; ``[text]`` for single-turn datasets), domain (nullable).
    ``docs``: docid, text. ``qrels``: qid, docid, rel (graded where the dataset is; 0 = not relevant).
    ``candidates``: qid, docid (the fixed candidate list of each query, where the dataset has one).
    """

    queries: pl.DataFrame
    docs: pl.DataFrame
    qrels: pl.DataFrame
    candidates: pl.DataFrame

    TABLES = {"queries": QUERIES, "docs": DOCS, "qrels": QRELS, "candidates": CANDIDATES}

    @classmethod
    def build(
        cls, queries: pl.DataFrame, docs: pl.DataFrame, qrels: pl.DataFrame, candidates: pl.DataFrame
    ) -> "RankingData":
        """Conform four frames to their contracts (column order, dtypes), sorted for deterministic output."""
        return cls(
            queries=conform(queries, QUERIES).sort("qid"),
            docs=conform(docs, DOCS).sort("docid"),
            qrels=conform(qrels, QRELS).sort("qid", "docid"),
            candidates=conform(candidates, CANDIDATES).sort("qid", "docid"),
        )

    @classmethod
    def from_columns(
        cls,
        queries: Mapping[str, list],
        docs: Mapping[str, list],
        qrels: Mapping[str, list],
        candidates: Mapping[str, list] | None = None,
    ) -> "RankingData":
        """Build from plain column lists (what a streaming loader collects), typed by the contracts.

        ``queries`` needs qid, split, text, turns and may omit domain (null); ``docs`` docid, text; ``qrels`` qid,
        docid, rel. ``candidates`` defaults to the judged pairs of ``qrels`` (datasets whose candidate lists are
        exactly their judged documents).
        """
        q = dict(queries)
        q.setdefault("domain", [None] * len(q["qid"]))

        def frame(columns: Mapping[str, list], spec: TableSpec) -> pl.DataFrame:
            return pl.DataFrame({c: columns[c] for c in spec.columns}, schema=spec.columns)

        judged = frame(qrels, QRELS)
        cands = judged.select("qid", "docid") if candidates is None else frame(candidates, CANDIDATES)
        return cls.build(frame(q, QUERIES), frame(docs, DOCS), judged, cands)

    def tables(self) -> dict[str, tuple[pl.DataFrame, TableSpec]]:
        return {name: (getattr(self, name), spec) for name, spec in self.TABLES.items()}

    def validate(self, source: str) -> "RankingData":
        """Check each table's contract and the references between tables.

        Every qrels and candidates qid must be a query, every docid a doc; ``source`` names the input in errors.
        """
        for name, (df, spec) in self.tables().items():
            check_table(df, spec, f"{source} ({name})")
        qids = self.queries["qid"]
        docids = self.docs["docid"]
        for name in ("qrels", "candidates"):
            df = getattr(self, name)
            unknown_q = df.filter(~pl.col("qid").is_in(qids.implode()))
            if unknown_q.height:
                raise InputFormatError(source, None, f"{name} name unknown qid {unknown_q['qid'][0]!r}")
            unknown_d = df.filter(~pl.col("docid").is_in(docids.implode()))
            if unknown_d.height:
                raise InputFormatError(source, None, f"{name} name unknown docid {unknown_d['docid'][0]!r}")
        return self

    def split_counts(self) -> dict[str, int]:
        counts = dict(self.queries.group_by("split").len().iter_rows())
        return {s: int(counts.get(s, 0)) for s in SPLITS}

    def subset(self, qids: pl.Series) -> "RankingData":
        """Keep only the given queries, their qrels and candidates, and the docs they still reference."""
        keep = qids.implode()
        queries = self.queries.filter(pl.col("qid").is_in(keep))
        qrels = self.qrels.filter(pl.col("qid").is_in(keep))
        candidates = self.candidates.filter(pl.col("qid").is_in(keep))
        used = pl.concat([qrels["docid"], candidates["docid"]]).unique().implode()
        return RankingData(queries, self.docs.filter(pl.col("docid").is_in(used)), qrels, candidates)


class RankingColumns:
    """The column lists a streaming loader fills, query by query; :meth:`data` makes them a :class:`RankingData`.

    Every candidate is judged (a qrels row) and the candidates are the judged pairs. Documents come two ways: a
    loader that makes docids unique per query (``{qid}:{i}``) calls :meth:`add_candidate` without ``at`` and the
    document is simply appended; a loader whose documents recur across queries (WikiQA's sentences, SemEval's
    comments) passes ``at=(path, line)``, and then a docid keeps its first text, may reappear with the same text,
    and reappearing with another text is an :class:`InputFormatError` naming both places. Likewise
    :meth:`add_query` with ``at`` rejects a qid added before. ``query_label``, ``doc_label`` and ``text_label``
    name the query id, document id and document text in those errors in the format's own words.
    """

    def __init__(self, query_label: str = "query", doc_label: str = "docid", text_label: str = "text") -> None:
        self.query_label, self.doc_label, self.text_label = query_label, doc_label, text_label
        self.queries: dict[str, list] = {"qid": [], "split": [], "text": [], "turns": [], "domain": []}
        self.docs: dict[str, list] = {"docid": [], "text": []}
        self.qrels: dict[str, list] = {"qid": [], "docid": [], "rel": []}
        self._query_at: dict[str, tuple[Path, int]] = {}
        self._doc_at: dict[str, tuple[str, Path, int]] = {}

    def add_query(self, qid: str, split: str, turns: list[str], domain: str | None = None, *,
                  at: tuple[Path, int] | None = None) -> None:
        """A query of ``split`` whose text is its ``turns`` joined by newlines (``[text]`` for a single turn)."""
        if at is not None:
            if qid in self._query_at:
                first_path, first_line = self._query_at[qid]
                raise InputFormatError(at[0], at[1],
                                       f"{self.query_label} {qid} also appears in {first_path}:{first_line}")
            self._query_at[qid] = at
        for key, value in (("qid", qid), ("split", split), ("text", "\n".join(turns)), ("turns", list(turns)),
                           ("domain", domain)):
            self.queries[key].append(value)

    def add_candidate(self, qid: str, docid: str, text: str, rel: int, *, at: tuple[Path, int] | None = None) -> None:
        """Document ``docid`` with ``text`` as a candidate of ``qid``, judged ``rel``."""
        known = None if at is None else self._doc_at.get(docid)
        if known is None:
            self.docs["docid"].append(docid)
            self.docs["text"].append(text)
            if at is not None:
                self._doc_at[docid] = (text, *at)
        elif known[0] != text:
            assert at is not None  # known is None whenever at is None
            raise InputFormatError(at[0], at[1], f"{self.doc_label} {docid} has {self.text_label} {text!r} here but "
                                   f"{known[0]!r} at {known[1]}:{known[2]}")
        self.qrels["qid"].append(qid)
        self.qrels["docid"].append(docid)
        self.qrels["rel"].append(rel)

    def data(self) -> RankingData:
        """The collected queries, documents and judgements as a :class:`RankingData`."""
        return RankingData.from_columns(self.queries, self.docs, self.qrels)


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` (1-based, line ending stripped: LF or CRLF) of a UTF-8 text file.

    Raises :class:`InputFormatError` for a missing or empty file, and for bytes that are not UTF-8, naming
    the line and byte offset within it.
    """
    path = Path(path)
    if not path.exists():
        raise InputFormatError(path, None, "file not found")
    if path.stat().st_size == 0:
        raise InputFormatError(path, None, "file is empty, expected at least one record")
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputFormatError(
                    path, number, f"invalid UTF-8 at byte {exc.start} of the line ({raw[exc.start:exc.start + 4]!r})"
                ) from None
            yield number, line.rstrip("\n").rstrip("\r")


def split_roles(files: Mapping[str, Any]) -> list[tuple[str, Path]]:
    """``(split, path)`` pairs in train/dev/test order; a role that is not a split is a ValueError."""
    if not files:
        raise ValueError(f"no input files given; map at least one of {list(SPLITS)} to a path")
    unknown = [role for role in files if role not in SPLITS]
    if unknown:
        raise ValueError(f"unknown file role {unknown[0]!r}; expected split names {list(SPLITS)}")
    out = []
    for role in SPLITS:
        if role in files:
            value = files[role]
            if not isinstance(value, (str, PathLike)):
                raise ValueError(f"file role {role!r} must map to a path, got {type(value).__name__}")
            out.append((role, Path(value)))
    return out


def parse_label(value: str, path: str | Path, line: int, what: str = "label") -> int:
    """An integer label, or an :class:`InputFormatError` quoting the bad value."""
    try:
        return int(value.strip())
    except ValueError:
        raise InputFormatError(path, line, f"{what} must be an integer, got {value!r}") from None


def seeded_split(ids: list[str], fractions: Mapping[str, float], seed: int) -> dict[str, str]:
    """Assign each id to a split with the given fractions, by a seeded permutation of the sorted ids.

    Fractions are normalised to sum to 1; split sizes are the rounded cumulative boundaries, so every id gets
    exactly one split and the result depends only on the set of ids, the fractions and the seed.
    """
    names = [s for s in fractions if fractions[s] > 0]
    if not names:
        raise ValueError("split fractions must contain at least one positive fraction")
    total = sum(fractions[s] for s in names)
    order = sorted(set(ids))
    perm = np.random.default_rng(seed).permutation(len(order))
    bounds = np.rint(np.cumsum([fractions[s] / total for s in names]) * len(order)).astype(int)
    out: dict[str, str] = {}
    start = 0
    for name, stop in zip(names, bounds):
        for i in perm[start:stop]:
            out[order[i]] = name
        start = stop
    return out


def fill_missing_splits(
    data: RankingData, fractions: Mapping[str, float], seed: int, resplit: bool = False
) -> tuple[RankingData, list[str]]:
    """Give a dataset all of train, dev and test.

    Datasets with their own splits keep them. With ``resplit`` (or when the loader gave no split information,
    i.e. every query is in one split) all queries are re-split by query with ``fractions``. Otherwise each
    missing split is carved out of train by query, with its fraction of the whole, seeded. Returns the new
    data and human-readable notes on what was done (for the log).
    """
    present = {s for s, n in data.split_counts().items() if n}
    qids = data.queries["qid"].to_list()
    notes: list[str] = []
    if resplit or len(present) <= 1:
        mapping = seeded_split(qids, fractions, seed)
        notes.append(f"re-split {len(qids)} queries by query with fractions {dict(fractions)} (seed {seed})")
    else:
        missing = [s for s in SPLITS if s not in present and fractions.get(s, 0) > 0]
        if not missing:
            return data, notes
        if "train" not in present:
            raise ValueError(f"splits {missing} are missing and there is no train split to carve them from; "
                             "set dataset.split.resplit: true to re-split all queries by query")
        train = data.queries.filter(pl.col("split") == "train")["qid"].to_list()
        share = {s: fractions[s] for s in missing}
        share["train"] = max(1e-9, 1.0 - sum(share.values()))
        carved = seeded_split(train, share, seed)
        mapping = dict(zip(qids, data.queries["split"].to_list()))
        mapping.update(carved)
        for s in missing:
            n = sum(1 for v in carved.values() if v == s)
            notes.append(f"carved split '{s}' ({n} queries) out of train by query (seed {seed})")
    queries = data.queries.with_columns(
        pl.col("qid").replace_strict(mapping, return_dtype=pl.String).alias("split")
    )
    return RankingData(queries, data.docs, data.qrels, data.candidates), notes


KEEP_QUERIES = ("all", "with_positive", "with_positive_and_negative")


def filter_queries(data: RankingData, keep: str, relevant_min: int = 1) -> tuple[RankingData, str | None]:
    """Drop queries that cannot be evaluated.

    ``all`` keeps everything; ``with_positive`` keeps queries with at least one relevant qrel
    (``rel >= relevant_min``); ``with_positive_and_negative`` also needs one judged or candidate document that is
    not relevant (the standard WikiQA answer-selection filter). Returns the data and a note for the log (None if nothing
    changed).
    """
    if keep not in KEEP_QUERIES:
        raise ValueError(f"keep_queries must be one of {KEEP_QUERIES}, got {keep!r}")
    if keep == "all":
        return data, None
    pos = data.qrels.filter(pl.col("rel") >= relevant_min).select("qid").unique()
    keep_ids = pos["qid"]
    if keep == "with_positive_and_negative":
        relevant = data.qrels.filter(pl.col("rel") >= relevant_min).select("qid", "docid")
        judged = pl.concat([data.qrels.select("qid", "docid"), data.candidates.select("qid", "docid")]).unique()
        negatives = judged.join(relevant, on=["qid", "docid"], how="anti").select("qid").unique()
        keep_ids = pos.join(negatives, on="qid", how="semi")["qid"]
    before = data.queries.height
    kept = data.subset(keep_ids)
    return kept, f"kept {kept.queries.height} of {before} queries ({keep})"

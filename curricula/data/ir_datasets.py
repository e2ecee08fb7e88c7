"""Optional adapter: a ranking dataset straight from the ``ir_datasets`` package (MacAvaney et al. 2021).

``ir_datasets`` is not a dependency of this project: ``pip install ir_datasets`` to use this format. It downloads
the data from the internet on first use (cached under ``~/.ir_datasets``, or ``$IR_DATASETS_HOME``), so it needs
network access or a filled cache. Offline, the ``trec`` format reads the same data from local files.

Options:

* ``dataset_id``: the ir_datasets id whose ``docs_iter()`` is the collection (e.g. ``antique``, ``msmarco-passage``).
* ``splits``: split -> ir_datasets id giving that split's ``queries_iter()``, ``qrels_iter()`` (when it has qrels)
  and ``scoreddocs_iter()`` (when it has scoreddocs); default ``{"train": dataset_id}``. ANTIQUE with a dev split:
  ``{"train": "antique/train/split200-train", "dev": "antique/train/split200-valid", "test": "antique/test"}``.
  Splits must not share queries (``antique/train`` contains ``split200-valid``): a qid in two splits is an error.
* ``candidates`` / ``run_depth``: as in :mod:`curricula.data.trec`, with the splits' scoreddocs as the run
  (``auto`` = scoreddocs if any split has them, else the judged documents). scoreddocs carry only scores, so a
  query's ranks are by score descending, ties by docid ascending. Scoreddocs are read whenever a split has them,
  and can be large for big training sets.

Mapping: docs ``(doc_id, default_text())`` (``.text`` for records without ``default_text``), queries
``(query_id, default_text() or .text)``, qrels ``(query_id, doc_id, relevance)``, scoreddocs ``(query_id, doc_id,
score)``. The tables, checks and candidate selection are those of :func:`curricula.data.trec.assemble`; errors
name ``ir_datasets <id> <kind> record:<n>`` with n the 1-based position of the record in its iterator.

:func:`from_datasets` does the mapping on already opened dataset objects (anything with ``docs_iter``,
``queries_iter``, ``qrels_iter``, ``has_scoreddocs`` and ``scoreddocs_iter``), so it is testable without network.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from curricula.data.base import RankingData
from curricula.data.trec import (
    DOC_COLUMNS,
    INT32_MAX,
    QREL_COLUMNS,
    QUERY_COLUMNS,
    SCORE_COLUMNS,
    Columns,
    assemble,
    candidate_mode,
)
from curricula.plumbing.contracts import SPLITS
from curricula.plumbing.errors import InputFormatError

MISSING_PACKAGE = (
    "dataset format 'ir_datasets' needs the optional package ir_datasets, which is not installed. "
    "Install it with `pip install ir_datasets`; note that it downloads the datasets from the internet on first use "
    "(into ~/.ir_datasets, or $IR_DATASETS_HOME). Without network access, use format 'trec' with local files."
)


def import_ir_datasets() -> Any:
    """The ``ir_datasets`` module, or a ModuleNotFoundError saying how to install it."""
    try:
        import ir_datasets
    except ImportError:
        raise ModuleNotFoundError(MISSING_PACKAGE, name="ir_datasets") from None
    return ir_datasets


def record_text(record: Any) -> str:
    """A doc's or query's text: ``default_text()`` where the record type has it, else its ``text`` field."""
    default = getattr(record, "default_text", None)
    return default() if callable(default) else record.text


def _has(dataset: Any, what: str) -> bool:
    """``dataset.has_<what>()``; objects without that method are taken to provide ``<what>``."""
    check = getattr(dataset, f"has_{what}", None)
    return bool(check()) if callable(check) else True


def from_datasets(
    corpus: Any,
    splits: Mapping[str, Any],
    *,
    candidates: str = "auto",
    run_depth: int | None = None,
    names: Mapping[str, str] | None = None,
) -> RankingData:
    """Map opened datasets to a :class:`RankingData`: docs of ``corpus``; queries, qrels, scoreddocs per split.

    ``splits`` maps split -> dataset object; ``names`` maps ``"corpus"`` and each split to the ir_datasets id used
    in error messages (default: the role itself).
    """
    unknown = [s for s in splits if s not in SPLITS]
    if unknown or not splits:
        raise ValueError(f"splits must map some of {list(SPLITS)} to datasets, got {list(splits)}")
    names = dict(names or {})
    ordered = [(s, splits[s]) for s in SPLITS if s in splits]
    if not _has(corpus, "docs"):
        raise ValueError(f"ir_datasets {names.get('corpus', 'corpus')} has no docs")
    with_run = [(s, ds) for s, ds in ordered if _has(ds, "scoreddocs")]
    mode = candidate_mode(candidates, bool(with_run), run_depth)
    sources: list[str] = []
    docs = _read_docs(corpus, _Source(sources, names, "corpus", "docs"))
    query_frames, qrel_frames, run_frames = [], [], []
    for split, ds in ordered:
        query_frames.append(_read_queries(ds, split, _Source(sources, names, split, "queries")))
        if _has(ds, "qrels"):
            qrel_frames.append(_read_qrels(ds, _Source(sources, names, split, "qrels")))
    for split, ds in with_run:
        run_frames.append(_read_scoreddocs(ds, _Source(sources, names, split, "scoreddocs")))

    qrels = pl.concat(qrel_frames) if qrel_frames else Columns(QREL_COLUMNS, 0).frame()
    run = pl.concat(run_frames) if run_frames else None
    return assemble(docs, pl.concat(query_frames), qrels, run, sources, mode, run_depth)


class _Source:
    """One iterator's records as an error source: ``ir_datasets <id> <kind> record``, appended to ``sources`` (the
    list :func:`curricula.data.trec.assemble` resolves source indices in); ``index`` is its position there."""

    def __init__(self, sources: list[str], names: Mapping[str, str], role: str, kind: str):
        sources.append(f"ir_datasets {names.get(role, role)} {kind} record")
        self.index, self.name = len(sources) - 1, sources[-1]


def _read_docs(corpus: Any, src: _Source) -> pl.DataFrame:
    """The docs table (docid, text) of ``corpus.docs_iter()``; an empty text is an error naming the record."""
    docs = Columns(DOC_COLUMNS, src.index)
    for n, doc in enumerate(corpus.docs_iter(), start=1):
        docs.append(doc.doc_id, _text(record_text(doc), src.name, n, f"doc {doc.doc_id!r}"), n)
    return docs.frame()


def _read_queries(ds: Any, split: str, src: _Source) -> pl.DataFrame:
    """The queries (qid, split, text) of ``ds.queries_iter()``, all of ``split``."""
    cols = Columns(QUERY_COLUMNS, src.index)
    for n, q in enumerate(ds.queries_iter(), start=1):
        cols.append(q.query_id, split, _text(record_text(q), src.name, n, f"query {q.query_id!r}"), n)
    return cols.frame()


def _read_qrels(ds: Any, src: _Source) -> pl.DataFrame:
    """The qrels (qid, docid, rel) of ``ds.qrels_iter()``; a relevance outside 32 bits is an error."""
    cols = Columns(QREL_COLUMNS, src.index)
    for n, r in enumerate(ds.qrels_iter(), start=1):
        if not -INT32_MAX - 1 <= int(r.relevance) <= INT32_MAX:
            raise InputFormatError(src.name, n, f"relevance {r.relevance} is outside the 32-bit range")
        cols.append(r.query_id, r.doc_id, int(r.relevance), n)
    return cols.frame()


def _read_scoreddocs(ds: Any, src: _Source) -> pl.DataFrame:
    """The run rows (qid, docid, score) of ``ds.scoreddocs_iter()``; a score that is not finite is an error."""
    cols = Columns(SCORE_COLUMNS, src.index)
    for n, r in enumerate(ds.scoreddocs_iter(), start=1):
        score = float(r.score)
        if not math.isfinite(score):
            raise InputFormatError(src.name, n, f"score must be a finite number, got {r.score!r}")
        cols.append(r.query_id, r.doc_id, score, n)
    return cols.frame()


def _text(text: Any, source: str, n: int, what: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InputFormatError(source, n, f"empty text for {what}")
    return text.strip()


def load(
    files: Mapping[str, Any],
    *,
    dataset_id: str,
    splits: Mapping[str, str] | None = None,
    candidates: str = "auto",
    run_depth: int | None = None,
) -> RankingData:
    """Load ``dataset_id``'s docs and each split's queries/qrels/scoreddocs through ``ir_datasets`` (see above)."""
    if files:
        raise ValueError(f"format ir_datasets reads no files (got roles {list(files)}); remove dataset.files")
    if not isinstance(dataset_id, str) or not dataset_id:
        raise ValueError("dataset_id must be a non-empty ir_datasets id, e.g. 'antique'")
    split_ids = dict(splits) if splits else {"train": dataset_id}
    bad = [s for s, i in split_ids.items() if s not in SPLITS or not isinstance(i, str) or not i]
    if bad:
        raise ValueError(f"splits must map {list(SPLITS)} to ir_datasets ids, got {bad[0]!r}: {split_ids[bad[0]]!r}")
    candidate_mode(candidates, True, run_depth)  # check the options before any download
    irds = import_ir_datasets()
    corpus = irds.load(dataset_id)
    opened = {s: irds.load(i) for s, i in split_ids.items()}
    return from_datasets(corpus, opened, candidates=candidates, run_depth=run_depth,
                         names={"corpus": dataset_id, **split_ids})

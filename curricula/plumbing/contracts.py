"""The pipeline's data contracts: one :class:`TableSpec` per Parquet table, checked on write and on read.

Every stage's output is listed in ``DESIGN.md`` ("Stages and their Parquet contracts"); this module is the
executable form of that table. Writes are atomic: a table is written to a hidden temporary name in the
destination folder and renamed into place, so a killed job never leaves a half-written Parquet behind.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from curricula.plumbing.errors import SchemaError

#: Marker dtype for a fixed-size float32 vector column whose width is fixed per table, not per contract.
VECTOR = pl.Array(pl.Float32, 1)

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class TableSpec:
    """Column names (in order) and dtypes of one table, with its key and value constraints."""

    name: str
    columns: dict[str, pl.DataType]
    key: tuple[str, ...] = ()
    nullable: frozenset[str] = field(default_factory=frozenset)
    allowed: dict[str, tuple[str, ...]] = field(default_factory=dict)


QUERIES = TableSpec(
    "queries",
    {"qid": pl.String, "split": pl.String, "text": pl.String, "turns": pl.List(pl.String), "domain": pl.String},
    key=("qid",),
    nullable=frozenset({"domain"}),
    allowed={"split": SPLITS},
)
DOCS = TableSpec("docs", {"docid": pl.String, "text": pl.String}, key=("docid",))
QRELS = TableSpec("qrels", {"qid": pl.String, "docid": pl.String, "rel": pl.Int32}, key=("qid", "docid"))
CANDIDATES = TableSpec("candidates", {"qid": pl.String, "docid": pl.String}, key=("qid", "docid"))
RUN = TableSpec(
    "run", {"qid": pl.String, "docid": pl.String, "rank": pl.Int32, "score": pl.Float64}, key=("qid", "docid")
)
CANDIDATE_SCORES = TableSpec(
    "candidate_scores", {"qid": pl.String, "docid": pl.String, "score": pl.Float64}, key=("qid", "docid")
)
TEACHER_SCORES = TableSpec(
    "teacher_scores",
    {"qid": pl.String, "docid": pl.String, "score": pl.Float64, "loss": pl.Float64},
    key=("qid", "docid"),
)
#: why training ended, on the dev curve's last row: the budget (max_steps) or early stopping (patience)
STOP_REASONS = ("budget", "patience")
DEV_CURVE = TableSpec(
    "dev_curve",
    {"step": pl.Int64, "metric": pl.String, "value": pl.Float64, "train_loss": pl.Float64,
     "allowed": pl.Int64, "negatives_k": pl.Int64, "best": pl.Boolean, "stopped": pl.String},
    key=("step",),
    nullable=frozenset({"stopped"}),
    allowed={"stopped": STOP_REASONS},
)
#: the dev curve of a run with ``train.diagnostic_test`` (issue 45): also the eval metric on the test queries at every
#: evaluation (``test_value``), read by the selection-noise analysis (:mod:`curricula.study.selection_noise`) and nothing else
DEV_CURVE_TEST = TableSpec("dev_curve", {**DEV_CURVE.columns, "test_value": pl.Float64}, key=DEV_CURVE.key,
                           nullable=DEV_CURVE.nullable, allowed=DEV_CURVE.allowed)
#: a diagnostic curve's per-query dev values (the eval metric of each dev query, in qid order; their mean is
#: ``value``): selection on a subset of the dev queries is replayed from them (:func:`curricula.study.selection_noise.subset_dev`)
DEV_QUERY_VALUES = ("dev_query_values", pl.List(pl.Float64))
#: the weight averages a run with ``train.diagnostic_averages`` evaluates beside its trained weights, each adding the
#: columns ``<kind>_value`` (and ``<kind>_test_value``, ``<kind>_dev_query_values`` with ``test_value``;
#: :func:`curricula.training.core.shadow_columns`)
SHADOW_KINDS = ("ema", "swa")
#: the dev-curve keys a shadow average's evaluation records, as ``<kind>_<key>`` (the dev value, the diagnostic test
#: value and per-query dev values; the others, e.g. the curriculum's ``allowed``, are the trained run's)
SHADOW_KEYS = ("value", "test_value", DEV_QUERY_VALUES[0])


def dev_curve_spec(columns: Iterable[str]) -> TableSpec:
    """The dev curve's contract for a curve with these columns: :data:`DEV_CURVE`, plus ``test_value`` when present
    (a diagnostic run's, :data:`DEV_CURVE_TEST`), plus ``dev_query_values`` when present (:data:`DEV_QUERY_VALUES`),
    plus ``<kind>_value`` (and ``<kind>_test_value``, ``<kind>_dev_query_values`` where the trained weights' columns
    are there) for each :data:`SHADOW_KINDS` whose ``<kind>_value`` is present."""
    columns = set(columns)
    base = dict((DEV_CURVE_TEST if "test_value" in columns else DEV_CURVE).columns)
    name, dtype = DEV_QUERY_VALUES
    if name in columns:
        base[name] = dtype
    kinds = [kind for kind in SHADOW_KINDS if f"{kind}_value" in columns]
    extra = {f"{kind}_{key}": base[key] for kind in kinds for key in SHADOW_KEYS if key in base}
    for known in (DEV_CURVE, DEV_CURVE_TEST):
        if not extra and base == dict(known.columns):
            return known
    return TableSpec("dev_curve", {**base, **extra}, key=DEV_CURVE.key, nullable=DEV_CURVE.nullable,
                     allowed=DEV_CURVE.allowed)


def read_dev_curve(path: str | Path) -> pl.DataFrame:
    """A ``dev_curve.parquet``, checked against :data:`DEV_CURVE` or, with a ``test_value`` column,
    :data:`DEV_CURVE_TEST` (:func:`dev_curve_spec`)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: table 'dev_curve' not found (has its stage run?)")
    return read_table(path, dev_curve_spec(pl.read_parquet_schema(path)))


VECTORS = TableSpec("vectors", {"id": pl.String, "vector": VECTOR}, key=("id",))
NEIGHBORS = TableSpec(
    "neighbors", {"qid": pl.String, "docid": pl.String, "rank": pl.Int32, "score": pl.Float32}, key=("qid", "docid")
)


def _dtype_matches(actual: pl.DataType, expected: pl.DataType) -> bool:
    if expected is VECTOR:
        return isinstance(actual, pl.Array) and actual.inner == pl.Float32
    return actual == expected


def check_table(df: pl.DataFrame, spec: TableSpec, source: str | Path) -> pl.DataFrame:
    """Verify ``df`` against ``spec`` exactly: column names and order, dtypes, nulls, allowed values, unique key.

    Raises :class:`SchemaError` naming ``source`` and the first violated rule; returns ``df`` unchanged.
    """
    names = list(spec.columns)
    if df.columns != names:
        raise SchemaError(f"{source}: table '{spec.name}' has columns {df.columns}, expected {names}")
    for col, expected in spec.columns.items():
        actual = df.schema[col]
        if not _dtype_matches(actual, expected):
            want = "Array(Float32, d)" if expected is VECTOR else str(expected)
            raise SchemaError(f"{source}: column '{col}' of '{spec.name}' has type {actual}, expected {want}")
        if col not in spec.nullable:
            nulls = df[col].null_count()
            if nulls:
                raise SchemaError(f"{source}: column '{col}' of '{spec.name}' has {nulls} null value(s)")
    for col, values in spec.allowed.items():
        bad = df.filter(~pl.col(col).is_in(list(values)) & pl.col(col).is_not_null())
        if bad.height:
            raise SchemaError(
                f"{source}: column '{col}' of '{spec.name}' has value {bad[col][0]!r}, expected one of {list(values)}"
            )
    if spec.key and df.height:
        dup = df.select(spec.key).filter(pl.struct(spec.key).is_duplicated())
        if dup.height:
            first = dict(zip(spec.key, dup.row(0)))
            raise SchemaError(f"{source}: '{spec.name}' has duplicate key {first} ({dup.height} duplicated rows)")
    return df


def conform(df: pl.DataFrame, spec: TableSpec) -> pl.DataFrame:
    """Select the contract's columns in order and cast them to the contract's dtypes (vectors keep their width)."""
    missing = [c for c in spec.columns if c not in df.columns]
    if missing:
        raise SchemaError(f"table '{spec.name}' lacks column(s) {missing}")
    exprs = []
    for col, dtype in spec.columns.items():
        exprs.append(pl.col(col) if dtype is VECTOR else pl.col(col).cast(dtype, strict=True))
    return df.select(exprs)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Delete hidden temporaries (``.<name>.*.tmp`` / ``.old``) a killed writer of ``path`` left beside it.

    A SIGKILL skips every cleanup handler, so an atomic write interrupted at that moment leaves its temporary file
    or folder behind (never a partial ``path``). Snakemake runs one job per output, so at the start of the next
    write of ``path`` no other writer can own them. Returns what was removed.
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    stale = [p for p in path.parent.glob(f".{glob.escape(path.name)}.*") if p.name.endswith((".tmp", ".old"))]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return stale


def write_table(df: pl.DataFrame, path: str | Path, spec: TableSpec) -> Path:
    """Conform, check and write ``df`` to ``path`` atomically (temporary file in the same folder, then rename).

    Parquet is written with zstd compression and without per-write timestamps, so the same rows give the
    same bytes.
    """
    path = Path(path)
    df = check_table(conform(df, spec), spec, path)
    return write_file_atomically(path, lambda tmp: df.write_parquet(tmp, compression="zstd", statistics=True))


#: rows per row group that :func:`group_size` aims at: small enough that reading one group to find one query's
#: rows costs about a millisecond, large enough that a table of 131M rows has only a few thousand groups
GROUP_ROWS = 32_768


def group_size(rows_per_key: int, target_rows: int = GROUP_ROWS) -> int:
    """How many consecutive key values (queries) go into one row group when each has about ``rows_per_key`` rows."""
    return max(1, target_rows // max(1, int(rows_per_key)))


def key_groups(frames: Iterable[pl.DataFrame], by: str, size: int) -> Iterator[pl.DataFrame]:
    """Re-cut ``frames`` (rows sorted by ``by`` across all frames) into frames of exactly ``size`` consecutive
    distinct ``by`` values (the last may hold fewer); the rows of one value are never split between two frames.

    Streaming: holds at most one input frame plus the rows of one unfinished group. Rows out of ``by`` order
    raise ValueError (the input must be sorted by ``by``, as every query-keyed table of the pipeline is).
    """
    if size < 1:
        raise ValueError(f"size={size}: expected >= 1")
    carry: pl.DataFrame | None = None
    last = None
    for frame in frames:
        if frame.height == 0:
            continue
        col = frame[by]
        if not col.is_sorted() or (last is not None and col[0] < last):
            raise ValueError(f"rows are not sorted by {by!r} (at {by} {col[0]!r}); a query-keyed table is written "
                             f"in {by} order")
        last = col[-1]
        carry = frame if carry is None else pl.concat([carry, frame], how="vertical")
        ids = carry[by].rle_id()
        n = int(ids[-1]) + 1  # distinct values held; the last one may continue in the next frame
        whole = (n - 1) // size * size
        if whole:
            cut = int(ids.search_sorted(whole, side="left"))
            for start in range(0, whole, size):
                lo, hi = int(ids.search_sorted(start, side="left")), int(ids.search_sorted(start + size, side="left"))
                yield carry.slice(lo, hi - lo)
            carry = carry.slice(cut)
    if carry is not None:
        ids = carry[by].rle_id()
        n = int(ids[-1]) + 1
        for start in range(0, n, size):
            lo, hi = int(ids.search_sorted(start, side="left")), int(ids.search_sorted(start + size, side="left"))
            yield carry.slice(lo, hi - lo)


def write_grouped_table(frames: Iterable[pl.DataFrame], path: str | Path, spec: TableSpec, *, by: str = "qid",
                        size: int) -> int:
    """Write a large query-keyed table from a stream of frames, atomically, in row groups of ``size`` whole
    ``by`` values (:func:`key_groups`); returns the number of rows.

    Memory is one input frame and one row group, never the table: the dense neighbours (131M rows for the whole
    chitchat corpus at k = 1,000) and BM25 runs are written this way. Each group is conformed and checked against
    ``spec``; ``spec.key`` must contain ``by``, so a key unique within every group is unique in the table (a
    ``by`` value lives in one group only). The row groups carry min/max statistics, from which
    :class:`KeyedRowGroups` finds the group of a query without reading the others. The same rows give the same
    bytes whatever frames they arrive in (sharded stages gather into exactly the unsharded file).
    """
    import pyarrow.parquet as pq

    if by not in spec.key:
        raise ValueError(f"table '{spec.name}': grouping column {by!r} must be part of its key {spec.key}")
    path = Path(path)
    empty = conform(pl.DataFrame(schema=spec.columns), spec).to_arrow(compat_level=pl.CompatLevel.oldest())
    schema = empty.schema
    rows = 0

    def write(tmp: str) -> None:
        nonlocal rows
        with pq.ParquetWriter(tmp, schema, compression="zstd", write_statistics=True) as writer:
            wrote = False
            for group in key_groups(frames, by, size):
                group = check_table(conform(group, spec), spec, path)
                table = group.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(schema)
                writer.write_table(table, row_group_size=max(1, group.height))
                rows += group.height
                wrote = True
            if not wrote:
                writer.write_table(empty)

    write_file_atomically(path, write)
    return rows


def iter_row_groups(path: str | Path, spec: TableSpec, columns: list[str] | None = None) -> Iterator[pl.DataFrame]:
    """The row groups of a Parquet table one at a time (each checked against ``spec``): a streaming read."""
    import pyarrow.parquet as pq

    path = Path(path)
    _check_file_schema(path, spec)
    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        frame = _read_row_group(pf, i, path, spec)
        yield frame.select(columns) if columns else frame


def _check_file_schema(path: Path, spec: TableSpec) -> None:
    """A missing file, or column names and dtypes of a Parquet file's footer against ``spec`` (no rows read):
    :func:`check_table` on an empty frame of the file's schema."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: table '{spec.name}' not found (has its stage run?)")
    check_table(pl.DataFrame(schema=pl.read_parquet_schema(path)), spec, path)


def _read_row_group(pf, i: int, path: Path, spec: TableSpec) -> pl.DataFrame:
    """Row group ``i`` of the open Parquet file ``pf``, checked against ``spec``."""
    frame = pl.from_arrow(pf.read_row_group(i))
    return check_table(conform(frame, spec), spec, f"{path} (row group {i})")


class KeyedRowGroups:
    """Read side of a Parquet table sorted by a key column (``qid``): the rows of given keys, reading only the
    row groups that hold them.

    The footer's per-row-group min/max statistics of ``by`` locate a key by binary search (a key may span
    groups in a file written by another writer; :func:`write_grouped_table` keeps each key in one group). Groups
    read are checked against ``spec`` and kept in a small LRU cache (``cache`` groups; none at 0, for a caller that
    caches what it makes of the groups, as :class:`curricula.curriculum.negatives.LazyRankedLists` does); ``groups_read``
    counts the reads, so tests can check that a reader touched only what it needed. Memory: the footer plus
    ``cache`` groups, whatever the table's size.
    """

    def __init__(self, path: str | Path, spec: TableSpec, *, by: str = "qid", cache: int = 16):
        import pyarrow.parquet as pq

        self.path = Path(path)
        _check_file_schema(self.path, spec)
        self.spec, self.by = spec, by
        self._file = pq.ParquetFile(self.path)
        meta = self._file.metadata
        j = list(spec.columns).index(by)
        lo, hi = [], []
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(j).statistics
            if meta.row_group(i).num_rows == 0:
                continue
            if stats is None or not stats.has_min_max:
                raise SchemaError(f"{self.path}: row group {i} has no min/max statistics for '{by}'; re-run the "
                                  "stage that writes it")
            lo.append((stats.min, i))
            hi.append(stats.max)
        self.groups = np.array([i for _, i in lo], dtype=np.int64)
        self.mins = [m for m, _ in lo]
        self.maxs = hi
        for a in range(1, len(self.mins)):
            if self.mins[a] < self.maxs[a - 1]:
                raise SchemaError(f"{self.path}: rows are not sorted by '{by}' (row group {self.groups[a]} starts "
                                  f"at {self.mins[a]!r} before the previous group's last {self.maxs[a - 1]!r})")
        self.cache = max(0, cache)
        self._groups: OrderedDict[int, pl.DataFrame] = OrderedDict()
        self.groups_read = 0

    @property
    def num_row_groups(self) -> int:
        return self._file.metadata.num_row_groups

    def groups_of(self, key) -> list[int]:
        """The row groups whose [min, max] of ``by`` contains ``key`` (none when the table lacks it)."""
        import bisect

        first = bisect.bisect_left(self.maxs, key)
        out = []
        for a in range(first, len(self.mins)):
            if self.mins[a] > key:
                break
            out.append(int(self.groups[a]))
        return out

    def group(self, i: int) -> pl.DataFrame:
        """Row group ``i``, from the cache or the file."""
        if i in self._groups:
            self._groups.move_to_end(i)
            return self._groups[i]
        frame = _read_row_group(self._file, i, self.path, self.spec)
        self.groups_read += 1
        if self.cache:
            self._groups[i] = frame
            if len(self._groups) > self.cache:
                self._groups.popitem(last=False)
        return frame

    def rows(self, key) -> pl.DataFrame:
        """The rows whose ``by`` equals ``key``, in file order (empty when there are none)."""
        parts = [self.group(i).filter(pl.col(self.by) == key) for i in self.groups_of(key)]
        if not parts:
            return pl.DataFrame(schema=self.spec.columns)
        return parts[0] if len(parts) == 1 else pl.concat(parts)


def write_file_atomically(path: str | Path, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp)`` on a hidden temporary file beside ``path``, fsync it and rename it to ``path``: the
    atomic write of the tables, TREC runs, text files and the report's CSV and Parquet files.

    Stale temporaries of ``path`` are removed first; on any error the temporary is removed and an existing
    ``path`` stays as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual permissions
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_trec_run(run: pl.DataFrame | Iterable[pl.DataFrame], path: str | Path, tag: str) -> Path:
    """Write a ``RUN`` table in TREC format (``qid Q0 docid rank score tag``), atomically.

    ``run`` is a frame, or a stream of frames in qid order each holding whole queries (the row groups of
    :func:`iter_row_groups`), so a run of any size is written without holding it.
    Rows are written by qid, then rank; scores in their shortest round-trip decimal form, so no two distinct scores
    collapse. Note that trec_eval and ir-measures ignore the rank column and order tied scores by docid
    *descending*, while :func:`curricula.retrieval.bm25.search` ranks ties by docid ascending; with exact BM25 ties the
    evaluated order inside a tie can therefore differ from ``rank`` (Anserini avoids that by perturbing scores,
    which the BM25 stage deliberately does not). The file goes to a temporary name in the same folder, is fsynced
    and renamed.
    """
    path = Path(path)
    if not tag or any(ch.isspace() for ch in tag):
        raise ValueError(f"run tag must be non-empty without whitespace, got {tag!r}")
    frames = [run] if isinstance(run, pl.DataFrame) else run

    def lines(frame: pl.DataFrame) -> pl.Series:
        frame = check_table(conform(frame, RUN), RUN, path)
        for col in ("qid", "docid"):
            bad = frame.filter(pl.col(col).str.contains(r"\s") | (pl.col(col) == ""))
            if bad.height:
                raise ValueError(f"{path}: {col} {bad[col][0]!r} is empty or contains whitespace; TREC run files "
                                 "are whitespace-separated")
        return frame.sort("qid", "rank").select(
            pl.concat_str(
                [pl.col("qid"), pl.lit("Q0"), pl.col("docid"), pl.col("rank").cast(pl.String),
                 pl.col("score").cast(pl.String), pl.lit(tag)],
                separator=" ",
            )
        ).to_series()

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            for frame in frames:
                for line in lines(frame):
                    fh.write(line)
                    fh.write("\n")

    return write_file_atomically(path, write)


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write a small text file (JSON state, a config echo, a Markdown page) in UTF-8, atomically
    (:func:`write_file_atomically`)."""
    return write_file_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def read_table(path: str | Path, spec: TableSpec, columns: list[str] | None = None) -> pl.DataFrame:
    """Read a Parquet table and check it against ``spec``; a missing file or a broken contract is a clear error.

    With ``columns`` only those are read (a job that needs a query's text, not its turns, does not pay for them):
    the file's footer is checked against the whole contract, the columns read against theirs.
    """
    path = Path(path)
    _check_file_schema(path, spec)
    if columns is None:
        return check_table(pl.read_parquet(path), spec, path)
    part = subspec(spec, columns)
    return check_table(pl.read_parquet(path, columns=list(part.columns)), part, path)


def scan_table(path: str | Path, spec: TableSpec) -> pl.LazyFrame:
    """A lazy scan of a Parquet table whose footer (column names and dtypes) is checked against ``spec``.

    For a large table read only in part (a join with a few keys, a few columns): no rows are read here, and the
    rows the query does read are not checked row by row (nulls, allowed values, keys), unlike :func:`read_table`.
    """
    path = Path(path)
    _check_file_schema(path, spec)
    return pl.scan_parquet(path)


def subspec(spec: TableSpec, columns: list[str]) -> TableSpec:
    """The contract of some of ``spec``'s columns (in ``spec``'s order; the key only if all its columns are kept)."""
    unknown = [c for c in columns if c not in spec.columns]
    if unknown:
        raise ValueError(f"table '{spec.name}' has no column(s) {unknown}")
    keep = [c for c in spec.columns if c in columns]
    return TableSpec(spec.name, {c: spec.columns[c] for c in keep},
                     key=spec.key if set(spec.key) <= set(keep) else (),
                     nullable=frozenset(c for c in spec.nullable if c in keep),
                     allowed={c: v for c, v in spec.allowed.items() if c in keep})


def write_dir_atomically(out_dir: str | Path, fill: Callable[[Path], None]) -> Path:
    """Call ``fill(tmp)`` on a hidden temporary folder beside ``out_dir``, then rename it to ``out_dir``.

    An existing ``out_dir`` is replaced only once the new one is complete; on any error the temporary folder
    is removed and the old one (if any) stays in place.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    old = None
    try:
        fill(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
            os.replace(out_dir, old / "previous")
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "previous").exists() and not out_dir.exists():
            os.replace(old / "previous", out_dir)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return out_dir

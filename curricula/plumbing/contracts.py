"""The pipeline's data contracts: one :class:`TableSpec` per Parquet table, checked on write and on read.

Every stage's tables and their columns are listed in ``docs/pipeline.md`` ("The data contract"); this module is the
executable form of that list. Writes are atomic (:mod:`curricula.plumbing.atomic`): a table is written to a hidden
temporary name in the destination folder and renamed into place, so a killed job never leaves a half-written Parquet
behind. Large query-keyed tables are written and read in row groups of whole queries by
:mod:`curricula.plumbing.row_groups`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

from curricula.plumbing.atomic import write_file_atomically
from curricula.plumbing.errors import SchemaError

#: Marker dtype for a fixed-size float32 vector column whose width is fixed per table, not per contract.
VECTOR = pl.Array(pl.Float32, 1)

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class TableSpec:
    """Column names (in order) and dtypes of one table, with its key and value constraints."""

    name: str
    columns: Mapping[str, PolarsDataType]
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
#: evaluation (``test_value``), read by the selection-noise analysis (:mod:`analyses.selection_noise_lib`) and
#: nothing else
DEV_CURVE_TEST = TableSpec("dev_curve", {**DEV_CURVE.columns, "test_value": pl.Float64}, key=DEV_CURVE.key,
                           nullable=DEV_CURVE.nullable, allowed=DEV_CURVE.allowed)
#: a diagnostic curve's per-query dev values (the eval metric of each dev query, in qid order; their mean is
#: ``value``): selection on a subset of the dev queries is replayed from them
#: (:func:`analyses.selection_noise_lib.subset_dev`)
DEV_QUERY_VALUES = ("dev_query_values", pl.List(pl.Float64))
#: the weight averages a run with ``train.diagnostic_averages`` evaluates beside its trained weights, each adding the
#: columns ``<kind>_value`` (and ``<kind>_test_value``, ``<kind>_dev_query_values`` with ``test_value``;
#: :func:`curricula.training.averaging.shadow_columns`)
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


def _dtype_matches(actual: pl.DataType, expected: PolarsDataType) -> bool:
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


def write_table(df: pl.DataFrame, path: str | Path, spec: TableSpec) -> Path:
    """Conform, check and write ``df`` to ``path`` atomically (temporary file in the same folder, then rename).

    Parquet is written with zstd compression and without per-write timestamps, so the same rows give the
    same bytes.
    """
    path = Path(path)
    df = check_table(conform(df, spec), spec, path)
    return write_file_atomically(path, lambda tmp: df.write_parquet(tmp, compression="zstd", statistics=True))


def check_file_schema(path: Path, spec: TableSpec) -> None:
    """A missing file, or column names and dtypes of a Parquet file's footer against ``spec`` (no rows read):
    :func:`check_table` on an empty frame of the file's schema."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: table '{spec.name}' not found (has its stage run?)")
    check_table(pl.DataFrame(schema=pl.read_parquet_schema(path)), spec, path)


def write_trec_run(run: pl.DataFrame | Iterable[pl.DataFrame], path: str | Path, tag: str) -> Path:
    """Write a ``RUN`` table in TREC format (``qid Q0 docid rank score tag``), atomically.

    ``run`` is a frame, or a stream of frames in qid order each holding whole queries (the row groups of
    :func:`curricula.plumbing.row_groups.iter_row_groups`), so a run of any size is written without holding it.
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


def read_table(path: str | Path, spec: TableSpec, columns: list[str] | None = None) -> pl.DataFrame:
    """Read a Parquet table and check it against ``spec``; a missing file or a broken contract is a clear error.

    With ``columns`` only those are read (a job that needs a query's text, not its turns, does not pay for them):
    the file's footer is checked against the whole contract, the columns read against theirs.
    """
    path = Path(path)
    check_file_schema(path, spec)
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
    check_file_schema(path, spec)
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

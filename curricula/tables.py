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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from curricula.errors import SchemaError

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
    return _write_file_atomically(path, lambda tmp: df.write_parquet(tmp, compression="zstd", statistics=True))


def _write_file_atomically(path: Path, write: Callable[[str], None]) -> Path:
    """Call ``write(tmp)`` on a hidden temporary file beside ``path``, fsync it and rename it to ``path``.

    Stale temporaries of ``path`` are removed first; on any error the temporary is removed and an existing
    ``path`` stays as it was.
    """
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


def write_trec_run(run: pl.DataFrame, path: str | Path, tag: str) -> Path:
    """Write a ``RUN`` table in TREC format (``qid Q0 docid rank score tag``), atomically.

    Rows are written by qid, then rank; scores in their shortest round-trip decimal form, so no two distinct scores
    collapse. Note that trec_eval and ir-measures ignore the rank column and order tied scores by docid
    *descending*, while :func:`curricula.bm25.search` ranks ties by docid ascending; with exact BM25 ties the
    evaluated order inside a tie can therefore differ from ``rank`` (Anserini avoids that by perturbing scores,
    which the BM25 stage deliberately does not). The file goes to a temporary name in the same folder, is fsynced
    and renamed.
    """
    path = Path(path)
    if not tag or any(ch.isspace() for ch in tag):
        raise ValueError(f"run tag must be non-empty without whitespace, got {tag!r}")
    run = check_table(conform(run, RUN), RUN, path)
    for col in ("qid", "docid"):
        bad = run.filter(pl.col(col).str.contains(r"\s") | (pl.col(col) == ""))
        if bad.height:
            raise ValueError(f"{path}: {col} {bad[col][0]!r} is empty or contains whitespace; TREC run files "
                             "are whitespace-separated")
    lines = run.sort("qid", "rank").select(
        pl.concat_str(
            [pl.col("qid"), pl.lit("Q0"), pl.col("docid"), pl.col("rank").cast(pl.String),
             pl.col("score").cast(pl.String), pl.lit(tag)],
            separator=" ",
        )
    ).to_series()

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            for line in lines:
                fh.write(line)
                fh.write("\n")

    return _write_file_atomically(path, write)


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write a small text file (JSON state, a config echo) via a hidden temporary beside it, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_table(path: str | Path, spec: TableSpec) -> pl.DataFrame:
    """Read a Parquet table and check it against ``spec``; a missing file or a broken contract is a clear error."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: table '{spec.name}' not found (has its stage run?)")
    return check_table(pl.read_parquet(path), spec, path)


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

"""A study's ledger: one compressed Parquet file per finished (dataset, arm, seed) run, holding what the study's
verdicts need of it and where it came from, so that a study outlives the machine that trained its runs.

An entry (:class:`Entry`) is a long table of the run's per-query test values, float32 (``experiment`` as the study's
metrics frames name it: the trained experiment, ``<experiment>+bm25`` for its BM25 interpolation, or
``active:<method>@<round>`` for an active-learning run's rounds; ``qid``, ``measure``, ``value``), and a record kept
in the file's Parquet metadata (key ``curricula.ledger``): the run (dataset, arm, seed, kind), its training (the
kept step, the best dev value, why it stopped), its cost (CPU seconds, peak memory), and its provenance (project
commit, a digest of the arm's resolved spec, a digest of every upstream table it read, the compute it ran on,
torch's version, a digest of the host's name).

The store (:class:`Ledger`) is a folder: ``study.json`` (the study settings its runs are judged under, :func:`manifest`)
and ``runs/<dataset>/<arm>/seed=<s>/<run id>.parquet``. The run id (:func:`run_id`) digests what determines a run's
values: the same id means the same values (same config, seed, upstream tables, compute class and torch), so the
store is append-only and two machines' stores merge by copying files; an id already held with other values is a
broken determinism promise and is refused, naming the fields that differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import polars as pl

if TYPE_CHECKING:
    from polars._typing import ColumnNameOrSelector, PolarsDataType

from curricula.plumbing.atomic import write_file_atomically
from curricula.plumbing.errors import InputFormatError

#: The entry format's version (the record's ``version``).
VERSION = 1
#: The Parquet metadata key holding an entry's record.
RECORD_KEY = b"curricula.ledger"
#: An entry's table: one row per (experiment form, query, measure).
ENTRY_SCHEMA: dict[str, PolarsDataType] = {"experiment": pl.String, "qid": pl.String, "measure": pl.String,
                                           "value": pl.Float32}
#: The record fields that are the run's results (a second entry with the same run id must agree on them).
RESULT_FIELDS = ("kept_step", "best_dev", "stopped")
#: The record fields every entry has.
RECORD_FIELDS = ("version", "run_id", "dataset", "arm", "kind", "seed", *RESULT_FIELDS, "cpu_seconds", "peak_rss_mb",
                 "commit", "spec_digest", "upstream", "compute", "host")
#: The study settings a ledger's runs are judged under (``study.json``); another study's ledger is refused.
MANIFEST_KEYS = ("measure", "alpha", "equivalence_margin", "multiplicity", "looks", "kind", "claims")
#: The ledger's files under its folder.
MANIFEST, RUNS = "study.json", "runs"


class LedgerError(ValueError):
    """A ledger that cannot be read, merged or extended as asked; the message names the file or run and the fix."""


@dataclass(frozen=True)
class Entry:
    """One finished run: its per-query test values (:data:`ENTRY_SCHEMA`) and its record (:data:`RECORD_FIELDS`)."""

    values: pl.DataFrame
    record: dict[str, Any]

    @property
    def key(self) -> tuple[str, str, int]:
        """(dataset, arm, seed): the run a study asks for."""
        return self.record["dataset"], self.record["arm"], int(self.record["seed"])


def digest(data: Any) -> str:
    """A 16-hex-digit SHA-256 digest of ``data`` as canonical JSON (sorted keys)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_id(record: Mapping[str, Any]) -> str:
    """The id of a run: a digest of what determines its values (the run's key and kind, the arm's spec, its
    upstream tables, the compute class, precision and torch build). Cost, commit, host and time are left out: a
    rerun on a like machine gets the same id and must give the same values."""
    compute = {k: v for k, v in record["compute"].items() if k != "gpu_driver"}
    return digest({k: record[k] for k in ("dataset", "arm", "kind", "seed", "spec_digest", "upstream")} |
                  {"compute": compute})


def entry_path(root: str | Path, record: Mapping[str, Any]) -> Path:
    """Where a run's entry lives in the ledger at ``root``."""
    return Path(root) / RUNS / record["dataset"] / record["arm"] / f"seed={record['seed']}" / \
        f"{record['run_id']}.parquet"


def entry_frame(values: pl.DataFrame) -> pl.DataFrame:
    """``values`` (experiment, qid, measure, value) in the entry's types and order (float32 values, sorted)."""
    # the same dict under the key type polars' DataFrame.cast declares (names, selectors or dtypes): a Mapping is
    # invariant in its key, so no dict keyed by column names alone matches it
    dtypes = cast("Mapping[ColumnNameOrSelector | PolarsDataType, PolarsDataType]", ENTRY_SCHEMA)
    return values.select(list(ENTRY_SCHEMA)).cast(dtypes).sort("experiment", "qid", "measure")


def write_entry(path: str | Path, entry: Entry) -> Path:
    """Write ``entry`` atomically as zstd-compressed Parquet with its record in the file's metadata."""
    import pyarrow.parquet as pq

    missing = [f for f in RECORD_FIELDS if f not in entry.record]
    if missing:
        raise LedgerError(f"ledger entry for {entry.record.get('dataset')}/{entry.record.get('arm')}: record lacks "
                          f"{', '.join(missing)}")
    table = entry_frame(entry.values).to_arrow()
    table = table.replace_schema_metadata({RECORD_KEY: json.dumps(entry.record, sort_keys=True).encode()})
    return write_file_atomically(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def read_entry(path: str | Path, in_ledger: bool = False) -> Entry:
    """An entry as :func:`write_entry` wrote it. A truncated or corrupted file, or one that is not a ledger entry
    (``in_ledger``: a ledger's file, named by its run id), raises
    :class:`~curricula.plumbing.errors.InputFormatError` naming it."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
        meta = (table.schema.metadata or {}).get(RECORD_KEY)
        if meta is None:
            raise InputFormatError(path, None, "not a ledger entry (no curricula.ledger record in its metadata)")
        record = json.loads(meta)
    except InputFormatError:
        raise
    except Exception as err:  # pyarrow's and json's errors on a truncated or corrupted file
        raise InputFormatError(path, None, f"unreadable ledger entry ({type(err).__name__}: {err}); restore it from "
                               f"the ledger it came from, or delete it and run the study again") from None
    # pq.read_table gives a pyarrow Table, which from_arrow makes a DataFrame (a Series only comes of an Array)
    values = cast(pl.DataFrame, pl.from_arrow(table))
    missing = [f for f in RECORD_FIELDS if f not in record]
    if missing or dict(values.schema) != ENTRY_SCHEMA:
        raise InputFormatError(path, None, f"ledger entry of another format (record lacks {missing or 'nothing'}, "
                               f"columns {dict(values.schema)})")
    if in_ledger:
        check_name(path, record)
    return Entry(values, record)


def check_name(path: str | Path, record: Mapping[str, Any]) -> None:
    """Refuse a ledger file whose name is not its run's id (a file copied or renamed by hand)."""
    if record["run_id"] != Path(path).stem:
        raise InputFormatError(path, None, f"holds run {record['run_id']}, not the run its name says; move it to "
                               f"{entry_path('<ledger>', record).as_posix().removeprefix('<ledger>/')}")


def read_record(path: str | Path, in_ledger: bool = False) -> dict[str, Any]:
    """An entry's record from its file's footer, without its values; errors as :func:`read_entry`'s."""
    import pyarrow.parquet as pq

    try:
        meta = (pq.read_schema(path).metadata or {}).get(RECORD_KEY)
        record = None if meta is None else json.loads(meta)
    except Exception as err:  # a truncated or corrupted footer
        raise InputFormatError(path, None, f"unreadable ledger entry ({type(err).__name__}: {err}); restore it from "
                               f"the ledger it came from, or delete it and run the study again") from None
    if record is None or any(f not in record for f in RECORD_FIELDS):
        raise InputFormatError(path, None, "not a ledger entry of this format (no complete curricula.ledger record)")
    if in_ledger:
        check_name(path, record)
    return record


def differing_fields(a: Entry, b: Entry) -> list[str]:
    """The result fields (:data:`RESULT_FIELDS`, and ``values`` for the per-query values) in which two entries of
    one run id differ; empty when they agree."""
    fields = [f for f in RESULT_FIELDS if a.record[f] != b.record[f]]
    return fields + ([] if entry_frame(a.values).equals(entry_frame(b.values)) else ["values"])


def manifest(settings: Mapping[str, Any], looks: Iterable[int] | None, claims: Iterable[Mapping[str, Any]]
             ) -> dict[str, Any]:
    """What a ledger's runs are judged under (:data:`MANIFEST_KEYS`): the study's measure, alpha, equivalence margin,
    multiplicity, looks and alpha spending (null without rounds), and each claim's arms and direction."""
    sequential = settings.get("sequential") or {}
    return {"measure": settings["measure"], "alpha": settings["alpha"],
            "equivalence_margin": settings["equivalence_margin"], "multiplicity": settings["multiplicity"],
            "looks": None if looks is None else list(looks), "kind": sequential.get("kind") if looks else None,
            "claims": {c["id"]: {k: c.get(k) for k in ("experiment", "against", "expect", "datasets")} for c in claims}}


def manifest_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The manifest keys in which two ledgers' studies differ (``claims.<id>`` for a claim's arms or direction)."""
    keys = [k for k in MANIFEST_KEYS if k != "claims" and a.get(k) != b.get(k)]
    claims_a, claims_b = a.get("claims") or {}, b.get("claims") or {}
    return keys + [f"claims.{c}" for c in sorted(set(claims_a) | set(claims_b)) if claims_a.get(c) != claims_b.get(c)]


class Ledger:
    """The ledger folder at ``root`` (:mod:`curricula.study.ledger`'s layout)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Ledger({str(self.root)!r})"

    def read_manifest(self) -> dict[str, Any] | None:
        """``study.json``, or None when the ledger has none yet."""
        path = self.root / MANIFEST
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise InputFormatError(path, err.lineno, f"not JSON ({err.msg})") from None

    def check_manifest(self, expected: Mapping[str, Any]) -> None:
        """Refuse a ledger made under another study config, naming the differing keys."""
        held = self.read_manifest()
        if held is not None and (diff := manifest_differences(held, expected)):
            raise LedgerError(f"ledger {self.root} was made under another study config: {', '.join(diff)} differ; "
                              f"use that study's config, or another study.ledger folder")

    def write_manifest(self, expected: Mapping[str, Any]) -> None:
        """Write ``study.json`` when absent (after :meth:`check_manifest`)."""
        self.check_manifest(expected)
        path = self.root / MANIFEST
        if not path.is_file():
            from curricula.plumbing.atomic import write_text_atomically
            write_text_atomically(path, json.dumps(dict(expected), indent=1, sort_keys=True) + "\n")

    def paths(self) -> list[Path]:
        """Every entry file, sorted."""
        return sorted((self.root / RUNS).glob("*/*/seed=*/*.parquet"))

    def entries(self) -> list[Entry]:
        """Every entry, in path order (each file read and checked, :func:`read_entry`)."""
        return [read_entry(p, in_ledger=True) for p in self.paths()]

    def records(self) -> list[dict[str, Any]]:
        """Every entry's record, in path order, read from the files' footers only (cheap at parse time)."""
        return [read_record(p, in_ledger=True) for p in self.paths()]

    def add(self, entry: Entry) -> Path:
        """Append ``entry``: write it when its run id is new; keep the held one when it agrees on every result
        field; refuse (:class:`LedgerError`, naming the run and fields) when it does not."""
        path = entry_path(self.root, entry.record)
        if path.is_file():
            held = read_entry(path, in_ledger=True)
            if diff := differing_fields(held, entry):
                raise LedgerError(conflict_message(entry.record, diff, path))
            return path
        return write_entry(path, entry)


def conflict_message(record: Mapping[str, Any], fields: Iterable[str], path: str | Path) -> str:
    """The refusal of a run id held with other values."""
    return (f"run {record['dataset']}/{record['arm']}/seed={record['seed']} (id {record['run_id']}) is held in "
            f"{path} with other {', '.join(fields)}: the same config, seed, upstream tables and compute gave other "
            f"results; keep one of the two files")


__all__ = ["Entry", "ENTRY_SCHEMA", "Ledger", "LedgerError", "MANIFEST_KEYS", "RECORD_FIELDS", "RESULT_FIELDS",
           "check_name", "conflict_message", "differing_fields", "digest", "entry_frame", "entry_path", "manifest",
           "manifest_differences", "read_entry", "read_record", "run_id", "write_entry"]

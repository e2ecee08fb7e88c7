"""Large query-keyed tables in row groups of whole queries: a streaming write (:func:`write_grouped_table`), a
streaming read (:func:`iter_row_groups`) and a keyed read that touches only the groups of the keys asked for
(:class:`KeyedRowGroups`). Every group is checked against its table's contract (:mod:`curricula.plumbing.contracts`);
``docs/scale.md`` says why the dense neighbours and the BM25 runs are written this way.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import cast

import numpy as np
import polars as pl

from curricula.plumbing.atomic import write_file_atomically
from curricula.plumbing.contracts import TableSpec, check_file_schema, check_table, conform
from curricula.plumbing.errors import SchemaError


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
    check_file_schema(path, spec)
    pf = pq.ParquetFile(path)
    for i in range(pf.num_row_groups):
        frame = _read_row_group(pf, i, path, spec)
        yield frame.select(columns) if columns else frame


def _read_row_group(pf, i: int, path: Path, spec: TableSpec) -> pl.DataFrame:
    """Row group ``i`` of the open Parquet file ``pf``, checked against ``spec``."""
    # a row group is a pyarrow Table, which from_arrow makes a DataFrame (a Series only comes of an Array)
    frame = cast(pl.DataFrame, pl.from_arrow(pf.read_row_group(i)))
    return check_table(conform(frame, spec), spec, f"{path} (row group {i})")


class KeyedRowGroups:
    """Read side of a Parquet table sorted by a key column (``qid``): the rows of given keys, reading only the
    row groups that hold them.

    The footer's per-row-group min/max statistics of ``by`` locate a key by binary search (a key may span
    groups in a file written by another writer; :func:`write_grouped_table` keeps each key in one group). Groups
    read are checked against ``spec`` and kept in a small LRU cache (``cache`` groups; none at 0, for a caller that
    caches what it makes of the groups, as :class:`curricula.curriculum.negatives.LazyRankedLists` does);
    ``groups_read`` counts the reads, so tests can check that a reader touched only what it needed. Memory: the
    footer plus ``cache`` groups, whatever the table's size.
    """

    def __init__(self, path: str | Path, spec: TableSpec, *, by: str = "qid", cache: int = 16):
        import pyarrow.parquet as pq

        self.path = Path(path)
        check_file_schema(self.path, spec)
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

"""The gather of a sharded table: the tables its shard jobs wrote, joined into exactly the table the unsharded stage
writes (:mod:`curricula.plumbing.shards` says how the shards cut the work).

Rules ``bm25_run``, ``bm25_candidate_scores``, ``dense_neighbors`` and ``teacher_score`` gather this way (their
entry point is :func:`curricula.stages.common.gather_table`). Two kinds of table:

* :data:`GATHERED`: a table small enough to hold whole, concatenated and sorted by its key;
* :data:`STREAMED`: a table of (query x k) rows, copied a row group at a time into the unsharded stage's row groups
  of whole queries: the shards cut the queries in qid order, so their concatenation is in order and is never held
  whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl

from curricula.plumbing.contracts import (
    CANDIDATE_SCORES,
    NEIGHBORS,
    RUN,
    TEACHER_SCORES,
    TableSpec,
    write_table,
)
from curricula.plumbing.row_groups import group_size, iter_row_groups, write_grouped_table
from curricula.plumbing.shards import gather_tables

#: The contract and row order of each sharded table gathered whole (the unsharded stage writes the same order).
GATHERED = {
    "candidate_scores": (CANDIDATE_SCORES, ["qid", "docid"]),
    "teacher_scores": (TEACHER_SCORES, ["qid", "docid"]),
}


#: The contract of each table of (query x k) rows whose shards are gathered streaming, in row groups of whole
#: queries (in qid order, then rank, as the unsharded stage writes them).
STREAMED = {
    "run": RUN,
    "neighbors": NEIGHBORS,
}


def gather_shards(table: str, shard_paths: Sequence[str | Path], out_path: str | Path,
                  k: int | None = None) -> int:
    """Concatenate the shard tables of ``table`` (a key of :data:`STREAMED` or :data:`GATHERED`) in the unsharded
    stage's row order and write them to ``out_path``; returns the number of rows.

    The query x k tables (:data:`STREAMED`; ``k`` their per-query depth, which cuts the row groups) are copied a
    row group at a time (:func:`gathered_groups`), never held whole.
    """
    if table in STREAMED:
        if k is None:
            raise ValueError(f"gathering '{table}' needs k, the per-query depth its row groups are cut by")
        spec = STREAMED[table]
        return write_grouped_table(gathered_groups(shard_paths, spec), out_path, spec, by="qid", size=group_size(k))
    spec, order = GATHERED[table]
    out = gather_tables(shard_paths, spec, order)
    write_table(out, out_path, spec)
    return out.height


def gathered_groups(shard_paths: Sequence[str | Path], spec: TableSpec) -> Iterator[pl.DataFrame]:
    """The row groups of the shard tables in shard order (each checked; a stream for write_grouped_table)."""
    if not shard_paths:
        raise ValueError(f"no shard files to gather for table '{spec.name}'")
    for path in shard_paths:
        yield from iter_row_groups(path, spec)


__all__ = ["GATHERED", "STREAMED", "gather_shards", "gathered_groups"]

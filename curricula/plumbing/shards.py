"""Shards of the expensive precompute stages, for Snakemake's ``scattergather:`` (one job per shard, then a gather).

A sharded stage runs as ``n`` jobs that each compute one part of the stage's table, and one gather job that
concatenates the parts into exactly the table the unsharded stage writes (the unsharded run is the 1-shard case of
the same code). Two ways of cutting the work keep the result identical for every shard count:

* by query (:func:`block`): contiguous blocks of queries. Used where one query's rows never depend on another's:
  BM25 search and candidate scoring (Lucene scores each query on its own) and exact FAISS neighbour search.
* by batch (:func:`batch_shard`): contiguous runs of the length-sorted batches a model would process anyway. A
  transformer's output for a padded text changes in the last float bits with the batch it is padded in (measured:
  1e-8 on cross-encoder logits), so encoders and the teacher cut between whole batches: every batch, and so every
  number, is the one the unsharded job computes.

Snakemake names shard ``i`` of ``n`` ``"{i}-of-{n}"`` (1-based), the ``{scatteritem}`` wildcard.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import polars as pl

from curricula.plumbing.contracts import TableSpec, check_table, read_table

_ITEM = re.compile(r"^([0-9]+)-of-([0-9]+)$")


# the functional form: in a class body, mypy takes the fields index and count for overrides of tuple's methods
Shard = NamedTuple("Shard", [("index", int), ("count", int)])
Shard.__doc__ = """Shard ``index`` (0-based) of ``count``."""


WHOLE = Shard(0, 1)


def parse_scatteritem(item: str | Shard | None) -> Shard:
    """The :class:`Shard` named by Snakemake's ``{scatteritem}`` (``"2-of-4"`` is ``Shard(1, 4)``); None is whole."""
    if item is None:
        return WHOLE
    if isinstance(item, Shard):
        shard = item
    else:
        m = _ITEM.match(str(item))
        if not m:
            raise ValueError(f"shard {item!r}: expected '<i>-of-<n>' with 1 <= i <= n")
        shard = Shard(int(m.group(1)) - 1, int(m.group(2)))
    if shard.count < 1 or not 0 <= shard.index < shard.count:
        raise ValueError(f"shard {shard.index + 1}-of-{shard.count}: expected 1 <= i <= n")
    return shard


def block(n: int, shard: Shard) -> slice:
    """Rows ``[start, stop)`` of shard ``shard`` when ``n`` rows are cut into contiguous blocks.

    Block sizes differ by at most one, larger blocks first (``numpy.array_split``); a shard may be empty when
    there are fewer rows than shards.
    """
    size, extra = divmod(n, shard.count)
    start = shard.index * size + min(shard.index, extra)
    return slice(start, start + size + (1 if shard.index < extra else 0))


def length_batches(lengths: Sequence[int] | np.ndarray, batch_size: int,
                   longest_first: bool = False) -> list[np.ndarray]:
    """Row indices grouped into the batches a model processes: rows sorted by length (stable), cut every
    ``batch_size``. ``longest_first`` sorts by decreasing length (a memory problem shows in the first batch)."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: expected >= 1")
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths if longest_first else lengths, kind="stable")
    return [order[s : s + batch_size] for s in range(0, len(order), batch_size)]


def batch_shard(batches: list[np.ndarray], shard: Shard) -> list[np.ndarray]:
    """The contiguous run of whole ``batches`` that shard ``shard`` processes (see :func:`block`)."""
    return batches[block(len(batches), shard)]


def shard_rows(batches: list[np.ndarray]) -> np.ndarray:
    """The rows of some batches in input order (sorted indices)."""
    return np.sort(np.concatenate(batches)) if batches else np.empty(0, dtype=np.int64)


def gather_tables(paths: Sequence[str | Path], spec: TableSpec, sort_by: Sequence[str]) -> pl.DataFrame:
    """Concatenate the shard tables at ``paths`` (each checked against ``spec``) and sort by ``sort_by``.

    The stage's key must stay unique across shards: a row in two shards means the shards overlap (a
    :class:`~curricula.plumbing.errors.SchemaError` naming the first shard path).
    """
    if not paths:
        raise ValueError(f"no shard files to gather for table '{spec.name}'")
    frames = [read_table(p, spec) for p in paths]
    frames = [f for f in frames if f.height] or frames[:1]
    out = pl.concat(frames, how="vertical").sort(list(sort_by), maintain_order=True)
    return check_table(out, spec, f"{paths[0]} (+{len(paths) - 1} more shards)")

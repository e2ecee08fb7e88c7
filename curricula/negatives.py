"""Negative responses for each training positive: random, the dataset's candidates, BM25, or HCL's instance level.

Modes (an experiment's ``negatives.mode``):

* ``random``: uniform over the training response pool (every doc that is a train candidate or a train positive),
  never one of the query's relevant docs; the usual response-selection negatives (Su et al. 2021 §2).
* ``candidates``: uniform over the query's own non-relevant candidates (the dataset's fixed lists; MacAvaney's
  re-ranking pool, Penha's MSDialog/MANtIS candidates); a query without any falls back to ``random`` (counted).
* ``neighbors``: HCL's instance-level curriculum (Su et al. 2021 §3.3, Algorithm 1 line 4): uniform over the top
  k = 10^h_p(t) responses most similar to the context in ``dense/neighbors.parquet``, excluding the positive and
  every other relevant doc. Only the top K (the dense stage's ``neighbors_k``) are stored; when k > K the top-k set
  is the stored K plus k - K unseen ranks, which are drawn as uniform pool docs outside the stored list with
  probability (k - K) / k. At k = |pool| (the start of training, k_0 = log10 |D|) this is exactly uniform over the
  pool, as in the paper.
* ``bm25``: the same over the query's BM25 run (``bm25/run.parquet``), cut to ``depth`` (never beyond the run's
  training-pool docs); with a ``pacing`` the sampling space shrinks like HCL's, without one it is the whole list (MacAvaney §4.3: "randomly sample
  from the top 100 BM25 results for additional negative samples").

Only training-split responses are ever drawn (ranked lists are filtered to the pool), so dev and test responses
never appear in training. The ranked tables (neighbours, BM25 run) may be passed as frames or as file paths; from a
path the lists are read lazily (:class:`LazyRankedLists`): only the row groups of the queries a step draws for, so
a 131M-row neighbour table never has to fit in memory. Both give the same draws. Draws for step t use a generator seeded by (seed, t): a pure function of the step, which
keeps resumed runs identical to uninterrupted ones.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from curricula.pacing import instance_pace_k
from curricula.tables import NEIGHBORS, RUN, KeyedRowGroups

log = logging.getLogger(__name__)

MODES = ("random", "candidates", "neighbors", "bm25")


@dataclass(frozen=True)
class RankedLists:
    """Per-query doc codes in rank order, in CSR form (row q is ``codes[offsets[q]:offsets[q + 1]]``)."""

    offsets: np.ndarray
    codes: np.ndarray

    def row(self, q: int) -> np.ndarray:
        return self.codes[self.offsets[q] : self.offsets[q + 1]]


def ranked_lists(frame: pl.DataFrame, query_index: pl.DataFrame, doc_index: pl.DataFrame, n_queries: int,
                 order: str | None = "rank") -> RankedLists:
    """CSR lists of ``frame`` (qid, docid[, rank]) for the queries of ``query_index`` (qid, q) and docs of
    ``doc_index`` (docid, code); rows whose query or doc is not indexed are dropped."""
    coded = frame.join(query_index, on="qid").join(doc_index, on="docid")
    coded = coded.sort(["q", order] if order else ["q", "code"])
    q = coded["q"].to_numpy()
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(np.bincount(q, minlength=n_queries), out=offsets[1:])
    return RankedLists(offsets, coded["code"].to_numpy().astype(np.int64))


def _codes_nbytes(group: Mapping[str, np.ndarray]) -> int:
    """Bytes of one decoded row group's doc codes (what :class:`LazyRankedLists` bounds its cache by)."""
    return sum(a.nbytes for a in group.values())


class LazyRankedLists:
    """Per-query doc codes in rank order, read on demand from a query-keyed Parquet table (``NEIGHBORS`` or
    ``RUN``, sorted by qid, rank): the same rows as :func:`ranked_lists` over the whole table cut to ``depth`` and
    to the docs with ``keep[code]``, but only the row groups holding the asked queries are ever read.

    ``qids[q]`` names query index ``q``; ``doc_index`` maps docid to code. Decoded row groups are kept in an LRU
    cache of at most ``cache_bytes`` of doc codes (:attr:`groups_read` counts file reads), the only cache in front
    of the file: ``reader`` is opened without one (``cache=0``, as :class:`NegativeSampler` does). 256 MiB holds
    every training query's 1,000 neighbours up to about 33,000 queries, so a training job on a default-sized split
    reads each group once, while a larger table still costs a bounded amount of memory. Memory: the file's footer,
    the doc index and the cached groups, whatever the number of queries in the table.
    """

    def __init__(self, reader: KeyedRowGroups, qids: list[str], doc_index: pl.DataFrame, keep: np.ndarray,
                 depth: int | None = None, cache_bytes: int = 256 << 20):
        self.reader, self.qids, self.doc_index, self.keep, self.depth = reader, qids, doc_index, keep, depth
        self.cache_bytes = max(0, cache_bytes)
        self._decoded: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._total = 0  # bytes of the cached codes

    @property
    def groups_read(self) -> int:
        return self.reader.groups_read

    def _group(self, i: int) -> dict[str, np.ndarray]:
        if i in self._decoded:
            self._decoded.move_to_end(i)
            return self._decoded[i]
        frame = self.reader.group(i).select("qid", "docid", "rank")
        if self.depth:
            frame = frame.filter(pl.col("rank") <= self.depth)
        coded = frame.join(self.doc_index, on="docid", maintain_order="left").sort("qid", "rank",
                                                                                  maintain_order=True)
        codes = coded["code"].to_numpy().astype(np.int64)
        keep = self.keep[codes]
        qid = coded["qid"].filter(pl.Series(keep))
        codes = codes[keep]
        out: dict[str, np.ndarray] = {}
        if qid.len():
            ids = qid.rle_id().to_numpy()
            bounds = np.flatnonzero(np.diff(ids)) + 1
            starts = np.concatenate([[0], bounds])
            stops = np.concatenate([bounds, [ids.size]])
            for a, b in zip(starts.tolist(), stops.tolist()):
                out[qid[a]] = codes[a:b]
        self._decoded[i] = out
        self._total += _codes_nbytes(out)
        while len(self._decoded) > 1 and self._total > self.cache_bytes:
            _, dropped = self._decoded.popitem(last=False)
            self._total -= _codes_nbytes(dropped)
        return out

    def row(self, q: int) -> np.ndarray:
        qid = self.qids[q]
        parts = [self._group(i).get(qid) for i in self.reader.groups_of(qid)]
        parts = [p for p in parts if p is not None]
        if not parts:
            return np.empty(0, dtype=np.int64)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


class NegativeSampler:
    """Draws ``m`` negatives per (query, positive) for a training step; see the module docstring for the modes."""

    def __init__(self, spec: Mapping, *, queries: pl.DataFrame, docs: pl.DataFrame, qrels: pl.DataFrame,
                 candidates: pl.DataFrame, relevant_min: int = 1, neighbors: pl.DataFrame | str | Path | None = None,
                 run: pl.DataFrame | str | Path | None = None, total_steps: int = 1, seed: int = 0):
        self.spec = dict(spec)
        self.mode = self.spec.get("mode", "random")
        if self.mode not in MODES:
            raise ValueError(f"negatives mode {self.mode!r} unknown; known: {list(MODES)}")
        self.m = int(self.spec.get("m", 1))
        self.total_steps = total_steps
        self.seed = seed
        train_q = queries.filter(pl.col("split") == "train").select("qid").sort("qid")
        self.qids = train_q["qid"].to_list()
        self.q_of = {q: i for i, q in enumerate(self.qids)}
        query_index = train_q.with_row_index("q").with_columns(pl.col("q").cast(pl.Int64))
        self.docids = docs["docid"].to_list()
        self.code_of = {d: i for i, d in enumerate(self.docids)}
        doc_index = docs.select("docid").with_row_index("code").with_columns(pl.col("code").cast(pl.Int64))
        n_q = len(self.qids)
        train_qids = train_q["qid"].implode()
        rel = qrels.filter((pl.col("rel") >= relevant_min) & pl.col("qid").is_in(train_qids))
        cand = candidates.filter(pl.col("qid").is_in(train_qids))
        self.relevant = ranked_lists(rel, query_index, doc_index, n_q, order=None)
        pool_ids = pl.concat([cand.select("docid"), rel.select("docid")]).unique()
        self.pool = np.sort(pool_ids.join(doc_index, on="docid")["code"].to_numpy().astype(np.int64))
        if self.pool.size < 2:
            raise ValueError("the training response pool has fewer than 2 docs: no negatives to sample")
        self.in_pool = np.zeros(len(self.docids), dtype=bool)
        self.in_pool[self.pool] = True
        self.fallbacks = 0
        self.lists: RankedLists | LazyRankedLists | None = None
        if self.mode == "candidates":
            nonrel = cand.join(rel.select("qid", "docid"), on=["qid", "docid"], how="anti")
            self.lists = ranked_lists(nonrel, query_index, doc_index, n_q, order=None)
        elif self.mode in ("neighbors", "bm25"):
            frame = neighbors if self.mode == "neighbors" else run
            if frame is None:
                raise ValueError(f"negatives mode {self.mode!r} needs the {'neighbors' if self.mode == 'neighbors' else 'BM25 run'} table")
            depth = int(self.spec["depth"]) if self.mode == "bm25" and self.spec.get("depth") else None
            if isinstance(frame, pl.DataFrame):
                self.lists = self._stored_lists(frame, train_qids, query_index, doc_index, depth)
            else:  # a file: read each query's list when a step draws for it
                reader = KeyedRowGroups(frame, NEIGHBORS if self.mode == "neighbors" else RUN, cache=0)
                self.lists = LazyRankedLists(reader, self.qids, doc_index, self.in_pool, depth)

    def _stored_lists(self, frame: pl.DataFrame, train_qids: pl.Series, query_index: pl.DataFrame,
                      doc_index: pl.DataFrame, depth: int | None) -> RankedLists:
        """The training queries' ranked lists of a whole frame, cut to ``depth`` and to the training pool."""
        n_q = len(self.qids)
        frame = frame.filter(pl.col("qid").is_in(train_qids))
        if depth:
            frame = frame.filter(pl.col("rank") <= depth)
        lists = ranked_lists(frame.select("qid", "docid", "rank"), query_index, doc_index, n_q)
        keep = self.in_pool[lists.codes]  # only training responses
        row_query = np.repeat(np.arange(n_q), np.diff(lists.offsets))
        counts = np.bincount(row_query[keep], minlength=n_q)
        offsets = np.zeros(n_q + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return RankedLists(offsets, lists.codes[keep])

    # ------------------------------------------------------------------ sampling space
    def space(self, step: int) -> int:
        """k, the size of the ranked sampling space at ``step`` (neighbors/bm25), from the instance pacing."""
        pacing = self.spec.get("pacing")
        if self.mode == "neighbors":
            pacing = pacing or {}
        if pacing is None:  # bm25 without pacing: the whole stored list
            return int(self.spec.get("depth") or np.iinfo(np.int64).max)
        return int(np.asarray(instance_pace_k(pacing, step, self.total_steps, int(self.pool.size))))

    def _relevant(self, q: int) -> np.ndarray:
        return self.relevant.row(q)

    def _from_pool(self, rng: np.random.Generator, n: int, exclude: np.ndarray) -> np.ndarray:
        """``n`` distinct pool docs not in ``exclude`` (repeats only if the pool is smaller than needed)."""
        out: list[int] = []
        banned = set(exclude.tolist())
        for _ in range(50):
            for c in self.pool[rng.integers(0, self.pool.size, size=2 * n)].tolist():
                if c not in banned:
                    out.append(c)
                    banned.add(c)
                    if len(out) == n:
                        return np.asarray(out, dtype=np.int64)
        allowed = np.setdiff1d(self.pool, exclude)
        if allowed.size == 0:
            raise ValueError("no negative left in the pool after excluding the query's relevant docs")
        extra = rng.choice(allowed, n - len(out), replace=allowed.size < n - len(out))
        return np.concatenate([np.asarray(out, dtype=np.int64), extra])

    def _from_list(self, rng: np.random.Generator, row: np.ndarray, k: int, exclude: np.ndarray) -> np.ndarray:
        """m distinct docs uniform over the top ``k`` of ``row`` (beyond the stored list: uniform pool docs)."""
        stored = row[: min(k, row.size)]
        stored = stored[~np.isin(stored, exclude)]
        if k <= row.size or stored.size >= k:
            if stored.size == 0:
                self.fallbacks += 1
                return self._from_pool(rng, self.m, exclude)
            return rng.choice(stored, self.m, replace=stored.size < self.m)
        # top-k reaches past the stored list: each draw is a stored doc with prob |stored| / k, else an unseen one
        n_stored = int(rng.binomial(self.m, stored.size / k))
        n_stored = min(n_stored, stored.size)
        picked = rng.choice(stored, n_stored, replace=False) if n_stored else np.empty(0, dtype=np.int64)
        rest = self._from_pool(rng, self.m - n_stored, np.concatenate([exclude, row, picked]))
        return np.concatenate([picked, rest])

    def sample(self, qids: list[str], step: int) -> np.ndarray:
        """Doc codes, shape (len(qids), m): the negatives of each instance of step ``step``."""
        rng = np.random.default_rng([self.seed, step, 1])
        out = np.empty((len(qids), self.m), dtype=np.int64)
        k = self.space(step) if self.mode in ("neighbors", "bm25") else 0
        for i, qid in enumerate(qids):
            q = self.q_of[qid]
            exclude = self._relevant(q)
            if self.mode == "random":
                out[i] = self._from_pool(rng, self.m, exclude)
            elif self.mode == "candidates":
                row = self.lists.row(q)
                if row.size == 0:
                    self.fallbacks += 1
                    out[i] = self._from_pool(rng, self.m, exclude)
                else:
                    out[i] = rng.choice(row, self.m, replace=row.size < self.m)
            elif self.mode == "bm25":  # the run is the whole space: never beyond its depth
                row = self.lists.row(q)
                out[i] = self._from_list(rng, row, min(k, row.size), exclude)
            else:
                out[i] = self._from_list(rng, self.lists.row(q), k, exclude)
        return out

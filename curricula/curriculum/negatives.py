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
  training-pool docs); with a ``pacing`` the sampling space shrinks like HCL's, without one it is the whole list
  (MacAvaney §4.3: "randomly sample
  from the top 100 BM25 results for additional negative samples").

HCL's false-negative guard (``false_negative_guard``: a ratio, e.g. 0.8; absent or null = off), for ``neighbors``
only: a listed neighbour d of context c is never drawn when G(c, d) > ratio x G(c, r+), G being the dense model's
inner product (the neighbour table's ``score``; G(c, r+) from ``dense/queries.parquet`` and ``dense/docs.parquet``,
computed once per query when the sampler is built). See :func:`false_negative_guard` for the authors' rule and
where this sampler departs from it.

Only training-split responses are ever drawn (ranked lists are filtered to the pool), so dev and test responses
never appear in training. The ranked tables (neighbours, BM25 run) may be passed as frames or as file paths; from a
path the lists are read lazily (:class:`LazyRankedLists`): only the row groups of the queries a step draws for, so
a 131M-row neighbour table never has to fit in memory. Both give the same draws. Draws for step t use a generator seeded
by (seed, t): a pure function of the step, which
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

from curricula.curriculum.pacing import InstancePacing, resolve_instance_pacing
from curricula.plumbing.contracts import NEIGHBORS, RUN
from curricula.plumbing.row_groups import KeyedRowGroups
from curricula.plumbing.errors import whole_number
from curricula.retrieval.similarity import positive_similarity

log = logging.getLogger(__name__)

MODES = ("random", "candidates", "neighbors", "bm25")


def false_negative_guard(scores: np.ndarray, positive_score: float, ratio: float) -> np.ndarray:
    """HCL's false-negative guard: True where a negative may be drawn, i.e. ``scores <= ratio * positive_score``.

    Su et al.'s released code (github yxuansu/HCL, ``SMN_MSN/dataclass.py`` and ``SABERT/dataloader.py``,
    ``Data.select_response``, the same in both) scores a context's sampled responses and its true reply with the
    ranking model G as raw inner products of the stored vectors (``torch.sum(context_vec * true_response_vec)``,
    ``matmul(context, candidates)``), sets ``score_threshold = cutoff_threshold * true_scores`` (``--cutoff_threshold``
    default 0.8 in ``SMN_MSN/train.py``) and masks every candidate with ``candi_scores - score_threshold > 0`` to
    -inf: strictly above is dropped, equal is kept. The threshold is the ratio times the raw score, whatever its
    sign: when G(c, r+) < 0 the threshold lies above G(c, r+), and negatives between the two are kept, as there.

    Where this project departs from that code: there, 50 responses (``--negative_selection_k``) are drawn uniformly
    from the whole index and the 5 (``--negative_num``) highest-scoring survivors are taken with ``torch.topk``, so
    when fewer than 5 survive, topk returns masked (-inf) candidates, i.e. guarded-out responses are used anyway.
    Here the survivors of the top-k neighbour window are drawn uniformly (Su §3.3), and a window with no survivor
    falls back to uniform pool docs (:meth:`NegativeSampler._from_list`, counted in ``fallbacks``).
    """
    return np.asarray(scores) <= ratio * positive_score


def _read_vectors(source: pl.DataFrame | str | Path, ids: list[str]) -> pl.DataFrame:
    """The rows of a ``VECTORS`` table (a frame or a Parquet file, read only for ``ids``) whose id is in ``ids``."""
    wanted = pl.Series("id", ids, dtype=pl.String).implode()
    if isinstance(source, pl.DataFrame):
        return source.filter(pl.col("id").is_in(wanted))
    return pl.scan_parquet(source).filter(pl.col("id").is_in(wanted)).collect()


@dataclass(frozen=True)
class RankedLists:
    """Per-query doc codes in rank order, in CSR form (row q is ``codes[offsets[q]:offsets[q + 1]]``), with the
    ranking's scores when asked for (``row_scores``)."""

    offsets: np.ndarray
    codes: np.ndarray
    scores: np.ndarray | None = None

    def row(self, q: int) -> np.ndarray:
        return self.codes[self.offsets[q] : self.offsets[q + 1]]

    def row_scores(self, q: int) -> np.ndarray:
        if self.scores is None:
            raise ValueError("these ranked lists were built without scores")
        return self.scores[self.offsets[q] : self.offsets[q + 1]]


def ranked_lists(frame: pl.DataFrame, query_index: pl.DataFrame, doc_index: pl.DataFrame, n_queries: int,
                 order: str | None = "rank", score: str | None = None) -> RankedLists:
    """CSR lists of ``frame`` (qid, docid[, rank]) for the queries of ``query_index`` (qid, q) and docs of
    ``doc_index`` (docid, code); rows whose query or doc is not indexed are dropped. With ``score``, that column
    is kept beside the codes."""
    coded = frame.join(query_index, on="qid").join(doc_index, on="docid")
    coded = coded.sort(["q", order] if order else ["q", "code"])
    q = coded["q"].to_numpy()
    offsets = np.zeros(n_queries + 1, dtype=np.int64)
    np.cumsum(np.bincount(q, minlength=n_queries), out=offsets[1:])
    scores = coded[score].to_numpy().astype(np.float64) if score else None
    return RankedLists(offsets, coded["code"].to_numpy().astype(np.int64), scores)


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
                 depth: int | None = None, cache_bytes: int = 256 << 20, with_scores: bool = False):
        self.reader, self.qids, self.doc_index, self.keep, self.depth = reader, qids, doc_index, keep, depth
        self.cache_bytes = max(0, cache_bytes)
        self.with_scores = with_scores  # also keep the table's score column (``row_scores``)
        self._decoded: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._scores: dict[int, dict[str, np.ndarray]] = {}  # the cached groups' scores, with_scores only
        self._total = 0  # bytes of the cached codes (and scores)

    @property
    def groups_read(self) -> int:
        return self.reader.groups_read

    def _group(self, i: int) -> dict[str, np.ndarray]:
        if i in self._decoded:
            self._decoded.move_to_end(i)
            return self._decoded[i]
        frame = self.reader.group(i).select("qid", "docid", "rank", *(["score"] if self.with_scores else []))
        if self.depth:
            frame = frame.filter(pl.col("rank") <= self.depth)
        coded = frame.join(self.doc_index, on="docid", maintain_order="left").sort("qid", "rank",
                                                                                  maintain_order=True)
        codes = coded["code"].to_numpy().astype(np.int64)
        keep = self.keep[codes]
        qid = coded["qid"].filter(pl.Series(keep))
        codes = codes[keep]
        scores = coded["score"].to_numpy().astype(np.float64)[keep] if self.with_scores else None
        out: dict[str, np.ndarray] = {}
        out_scores: dict[str, np.ndarray] = {}
        if qid.len():
            ids = qid.rle_id().to_numpy()
            bounds = np.flatnonzero(np.diff(ids)) + 1
            starts = np.concatenate([[0], bounds])
            stops = np.concatenate([bounds, [ids.size]])
            for a, b in zip(starts.tolist(), stops.tolist()):
                out[qid[a]] = codes[a:b]
                if scores is not None:
                    out_scores[qid[a]] = scores[a:b]
        self._decoded[i] = out
        self._total += _codes_nbytes(out)
        if self.with_scores:
            self._scores[i] = out_scores
            self._total += _codes_nbytes(out_scores)
        while len(self._decoded) > 1 and self._total > self.cache_bytes:
            j, dropped = self._decoded.popitem(last=False)
            self._total -= _codes_nbytes(dropped) + _codes_nbytes(self._scores.pop(j, {}))
        return out

    def row(self, q: int) -> np.ndarray:
        qid = self.qids[q]
        parts = [self._group(i).get(qid) for i in self.reader.groups_of(qid)]
        found = [p for p in parts if p is not None]
        if not found:
            return np.empty(0, dtype=np.int64)
        return found[0] if len(found) == 1 else np.concatenate(found)

    def row_scores(self, q: int) -> np.ndarray:
        """The scores of :meth:`row`'s docs, in the same order (``with_scores`` only)."""
        if not self.with_scores:
            raise ValueError("these ranked lists were built without scores")
        qid = self.qids[q]
        parts = []
        for i in self.reader.groups_of(qid):
            self._group(i)
            part = self._scores[i].get(qid)
            if part is not None:
                parts.append(part)
        if not parts:
            return np.empty(0, dtype=np.float64)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


_NEGATIVES_KEYS = ("mode", "m", "depth", "pacing", "false_negative_guard")


@dataclass(frozen=True)
class Negatives:
    """An experiment's ``negatives`` section resolved once against its curriculum's length: the mode (:data:`MODES`),
    ``m`` negatives per positive, the BM25 run's ``depth`` (None = the whole stored list), the instance-level
    pacing of the ranked sampling space (:class:`curricula.curriculum.pacing.InstancePacing`; None = the whole list,
    which
    ``neighbors`` never is: it defaults to Su's) and HCL's false-negative ``guard`` ratio (None = off). Build it with
    :func:`resolve_negatives`."""

    mode: str = "random"
    m: int = 1
    depth: int | None = None
    pacing: InstancePacing | None = None
    guard: float | None = None


def resolve_negatives(section: Mapping, total_steps: int, where: str = "negatives") -> Negatives:
    """The :class:`Negatives` of a ``negatives`` section ({mode, m, depth, pacing, false_negative_guard}; mode
    defaults to ``random``, m to 1), the pacing's ``T`` resolved against ``total_steps``, the curriculum's length.
    ``neighbors`` without a ``pacing`` gets Su's defaults (:func:`curricula.curriculum.pacing.resolve_instance_pacing`
    of {}).
    ValueError naming the key under ``where`` for an unknown mode or key, a bad m or depth, or a guard outside
    ``neighbors``."""
    unknown = set(section) - set(_NEGATIVES_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; known: {list(_NEGATIVES_KEYS)}")
    mode = section.get("mode", "random")
    if mode not in MODES:
        raise ValueError(f"{where}.mode: unknown {mode!r}; known: {list(MODES)}")
    guard = section.get("false_negative_guard")
    if guard is not None and mode != "neighbors":
        raise ValueError(
            f"{where}.false_negative_guard: HCL's guard drops negatives scoring above a ratio of the true reply's "
            f"score under the dense model G; mode {mode!r} has no G scores (set mode: neighbors or remove the guard)")
    m = whole_number(section.get("m", 1), f"{where}.m")
    depth = section.get("depth") if mode == "bm25" else None
    if depth is not None:
        depth = whole_number(depth, f"{where}.depth")
    pacing = section.get("pacing")
    if mode == "neighbors" and pacing is None:
        pacing = {}
    resolved = None
    if pacing is not None and mode in ("neighbors", "bm25"):
        try:
            resolved = resolve_instance_pacing(pacing, total_steps)
        except ValueError as err:
            raise ValueError(f"{where}.pacing: {err}") from None
    return Negatives(mode, m, depth, resolved,
                     None if guard is None else float(guard))


class NegativeSampler:
    """Draws ``m`` negatives per (query, positive) for a training step; see the module docstring for the modes."""

    def __init__(self, negatives: Negatives, *, queries: pl.DataFrame, docs: pl.DataFrame, qrels: pl.DataFrame,
                 candidates: pl.DataFrame, relevant_min: int = 1, neighbors: pl.DataFrame | str | Path | None = None,
                 run: pl.DataFrame | str | Path | None = None, seed: int = 0,
                 query_vectors: pl.DataFrame | str | Path | None = None,
                 doc_vectors: pl.DataFrame | str | Path | None = None):
        if not isinstance(negatives, Negatives):
            raise TypeError(f"NegativeSampler takes a resolved Negatives (resolve_negatives), got "
                            f"{type(negatives).__name__}")
        self.negatives = negatives
        self.mode = negatives.mode
        self.guard_ratio: float | None = negatives.guard
        self.m = negatives.m
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
        #: per instance of the last :meth:`sample` call: its negatives came from the pool fallback (no list doc left)
        self.last_fallback = np.zeros(0, dtype=bool)
        self.guard_unchecked = 0  # guarded draws from beyond the stored list whose G may exceed the threshold
        self.lists: RankedLists | LazyRankedLists | None = None
        self.positive_score: np.ndarray | None = None  # G(c, r+) per training query (the guard's reference)
        if self.guard_ratio is not None:
            self.positive_score = self._positive_scores(rel.select("qid", "docid"), query_vectors, doc_vectors)
        if self.mode == "candidates":
            nonrel = cand.join(rel.select("qid", "docid"), on=["qid", "docid"], how="anti")
            self.lists = ranked_lists(nonrel, query_index, doc_index, n_q, order=None)
        elif self.mode in ("neighbors", "bm25"):
            frame = neighbors if self.mode == "neighbors" else run
            if frame is None:
                table = "neighbors" if self.mode == "neighbors" else "BM25 run"
                raise ValueError(f"negatives mode {self.mode!r} needs the {table} table")
            depth = self.negatives.depth
            scored = self.positive_score is not None
            if isinstance(frame, pl.DataFrame):
                self.lists = self._stored_lists(frame, train_qids, query_index, doc_index, depth, scored)
            else:  # a file: read each query's list when a step draws for it
                reader = KeyedRowGroups(frame, NEIGHBORS if self.mode == "neighbors" else RUN, cache=0)
                self.lists = LazyRankedLists(reader, self.qids, doc_index, self.in_pool, depth, with_scores=scored)

    def _positive_scores(self, pairs: pl.DataFrame, query_vectors: pl.DataFrame | str | Path | None,
                         doc_vectors: pl.DataFrame | str | Path | None) -> np.ndarray:
        """The guard's reference G(c, r+) per training query (row order of ``self.qids``; inf for a query without a
        relevant doc, which is never drawn as a positive), from the relevant ``pairs`` (qid, docid).

        A query with several relevant docs takes the lowest, so the guard is at least as strict as Su's
        per-positive rule for each of them (their data has one true reply per context)."""
        if query_vectors is None or doc_vectors is None:
            raise ValueError("negatives.false_negative_guard needs the dense query and doc vectors")
        positive = positive_similarity(pairs, _read_vectors(query_vectors, self.qids),
                                       _read_vectors(doc_vectors, pairs["docid"].unique().to_list()))
        lowest = positive.group_by("qid").agg(pl.col("g").min())
        g = np.full(len(self.qids), np.inf)
        g[[self.q_of[q] for q in lowest["qid"].to_list()]] = lowest["g"].to_numpy()
        return g

    def _stored_lists(self, frame: pl.DataFrame, train_qids: pl.Series, query_index: pl.DataFrame,
                      doc_index: pl.DataFrame, depth: int | None, scored: bool = False) -> RankedLists:
        """The training queries' ranked lists of a whole frame, cut to ``depth`` and to the training pool (with the
        frame's ``score`` column when ``scored``)."""
        n_q = len(self.qids)
        frame = frame.filter(pl.col("qid").is_in(train_qids))
        if depth:
            frame = frame.filter(pl.col("rank") <= depth)
        lists = ranked_lists(frame.select("qid", "docid", "rank", *(["score"] if scored else [])), query_index,
                             doc_index, n_q, score="score" if scored else None)
        keep = self.in_pool[lists.codes]  # only training responses
        row_query = np.repeat(np.arange(n_q), np.diff(lists.offsets))
        counts = np.bincount(row_query[keep], minlength=n_q)
        offsets = np.zeros(n_q + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        # ranked_lists keeps the scores exactly when ``scored`` asked for them
        return RankedLists(offsets, lists.codes[keep], lists.scores[keep] if lists.scores is not None else None)

    # ------------------------------------------------------------------ sampling space
    def space(self, step: int) -> int:
        """k, the size of the ranked sampling space at ``step`` (neighbors/bm25), from the instance pacing."""
        if self.negatives.pacing is None:  # bm25 without pacing: the whole stored list
            return int(self.negatives.depth or np.iinfo(np.int64).max)
        return int(np.asarray(self.negatives.pacing.k(step, int(self.pool.size))))

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

    def _from_list(self, rng: np.random.Generator, row: np.ndarray, k: int, exclude: np.ndarray,
                   guarded: np.ndarray | None = None) -> np.ndarray:
        """m distinct docs uniform over the top ``k`` of ``row`` (beyond the stored list: uniform pool docs).

        ``guarded``: the docs of ``row`` the false-negative guard drops (:func:`false_negative_guard`). They are never
        drawn, not even by the fallback to the pool when no doc of the window is left (counted in ``fallbacks``);
        the unseen ranks past the stored list then count as |unseen| / (|allowed stored| + |unseen|) of the draws.
        """
        stored = row[: min(k, row.size)]
        stored = stored[~np.isin(stored, exclude)]
        if guarded is not None:
            stored = stored[~np.isin(stored, guarded)]
            exclude = np.concatenate([exclude, guarded])
        if k <= row.size or stored.size >= k:
            if stored.size == 0:
                self.fallbacks += 1
                return self._from_pool(rng, self.m, exclude)
            return rng.choice(stored, self.m, replace=stored.size < self.m)
        # top-k reaches past the stored list: each draw is a stored doc with prob |stored| / k, else an unseen one
        share = stored.size / k if guarded is None else stored.size / (stored.size + k - row.size)
        n_stored = int(rng.binomial(self.m, share))
        n_stored = min(n_stored, stored.size)
        picked = rng.choice(stored, n_stored, replace=False) if n_stored else np.empty(0, dtype=np.int64)
        rest = self._from_pool(rng, self.m - n_stored, np.concatenate([exclude, row, picked]))
        return np.concatenate([picked, rest])

    def sample(self, qids: list[str], step: int) -> np.ndarray:
        """Doc codes, shape (len(qids), m): the negatives of each instance of step ``step``.

        :attr:`last_fallback` then marks the instances whose negatives are pool docs drawn because their list had
        none left (counted in ``fallbacks``): :class:`curricula.curriculum.weighting.PairEase` weighs those outside its
        table.
        """
        rng = np.random.default_rng([self.seed, step, 1])
        out = np.empty((len(qids), self.m), dtype=np.int64)
        k = self.space(step) if self.mode in ("neighbors", "bm25") else 0
        fell = np.zeros(len(qids), dtype=bool)
        for i, qid in enumerate(qids):
            q = self.q_of[qid]
            exclude = self._relevant(q)
            before = self.fallbacks
            if self.mode == "random":
                out[i] = self._from_pool(rng, self.m, exclude)
            elif self.mode == "candidates":
                assert self.lists is not None  # __init__ builds the lists of every mode but random
                row = self.lists.row(q)
                if row.size == 0:
                    self.fallbacks += 1
                    out[i] = self._from_pool(rng, self.m, exclude)
                else:
                    out[i] = rng.choice(row, self.m, replace=row.size < self.m)
            elif self.mode == "bm25":  # the run is the whole space: never beyond its depth
                assert self.lists is not None
                row = self.lists.row(q)
                out[i] = self._from_list(rng, row, min(k, row.size), exclude)
            elif self.positive_score is None:
                assert self.lists is not None
                out[i] = self._from_list(rng, self.lists.row(q), k, exclude)
            else:
                out[i] = self._guarded_from_list(rng, q, k, exclude)
            fell[i] = self.fallbacks != before
        self.last_fallback = fell
        return out

    def _guarded_from_list(self, rng: np.random.Generator, q: int, k: int, exclude: np.ndarray) -> np.ndarray:
        """:meth:`_from_list` over query ``q``'s neighbours without those scoring above ratio x G(c, r+).

        Docs past the stored list rank below its last doc, so they pass the guard whenever that doc does; when it
        does not (every stored neighbour is guarded out), draws from past the list (unseen ranks or the fallback) are
        unchecked and counted in ``guard_unchecked``.
        """
        # called in neighbors mode with the guard on: the lists are built, and the guard's scores with its ratio
        assert self.lists is not None and self.positive_score is not None and self.guard_ratio is not None
        row, scores = self.lists.row(q), self.lists.row_scores(q)
        passes = false_negative_guard(scores, self.positive_score[q], float(self.guard_ratio))
        out = self._from_list(rng, row, k, exclude, guarded=row[~passes])
        if row.size and not passes[-1]:
            self.guard_unchecked += int(np.isin(out, row, invert=True).sum())
        return out

"""Dense representations and exact nearest neighbours: the "fast ranking model" of Su et al. (2021), §3.4.

* :func:`encode` turns texts into L2-normalised mean-pooled vectors (all-MiniLM-L6-v2's own recipe), as a
  ``VECTORS`` table. Each distinct text is tokenised once per job into flat arrays (:func:`token_table`) and texts
  are batched by length (about 3x faster than batching in input order on CPU); rows come back in input order. The
  same input gives the same vectors on the same machine.
* :func:`neighbors` is the all-pairs similarity G(c, r) = E_c(c)^T E_r(r) (eq. 4) reduced to what the curricula
  need: for every query the top-k documents by inner product (exact, FAISS ``IndexFlatIP`` on the CPU; with a CUDA
  ``device`` and a FAISS GPU build, fp32 on the GPU: :mod:`curricula.retrieval.gpu_search`), searched in chunks of
  queries so memory stays O(queries x k); an N x N matrix is never built. Ranks are the paper's h_d(c, r): 1 = most
  similar among *all* documents. Ties are broken by document order (the earlier row of ``doc_vecs`` wins), also at
  the k-th place.
  Nothing is excluded: a context's own positive response normally appears in its list; instance-level
  negatives are drawn after an anti-join with the qrels (ask for a few more than 10^k_T to keep 10^k_T).
* :func:`positive_ranks` and :func:`positive_rank_summary` say how well G ranks each context's true reply among
  its neighbours (rule ``dense_positive_ranks``, ``analyses/g_rank.py`` before and after fine-tuning G).
* The dual encoder of eq. 4 fine-tuned with in-batch negatives lives in :mod:`curricula.retrieval.biencoder`; its two
  halves (``<folder>/context``, ``<folder>/response``) encode like any checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import cast

import numpy as np
import polars as pl
import torch
from tqdm.auto import tqdm

from curricula.models.device import select_device
from curricula.models.hf import (
    autocast,
    load_encoder,
    load_tokenizer,
    mean_pool,
    resolve_model_dir,
)
from curricula.models.runtime import JobRuntime, start_job
from curricula.plumbing.contracts import NEIGHBORS, SPLITS, VECTORS, TableSpec, check_table
from curricula.plumbing.shards import WHOLE, Shard, batch_shard, length_batches, shard_rows
from curricula.retrieval.similarity import vectors_to_numpy
from curricula.training.spec import Runtime
from curricula.training.transfer import batch_to_device

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------- encoding
def tokenize_texts(
    tokenizer, texts: Sequence[str], max_length: int, truncation_side: str = "right"
) -> dict[str, list[list[int]]]:
    """Token ids (and token type ids when the model uses them), truncated, unpadded.

    ``truncation_side="left"`` drops the *first* tokens of a long text (special tokens are kept), which is what a
    dialogue context wants: its latest turns decide what a good reply is.
    """
    if truncation_side not in ("left", "right"):
        raise ValueError(f"truncation_side={truncation_side!r}: expected 'left' or 'right'")
    tokenizer.truncation_side = truncation_side
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"text #{bad} is {type(texts[bad]).__name__}, expected str")
    enc = tokenizer(
        list(texts), truncation=True, max_length=max_length, padding=False, return_attention_mask=False
    )
    return {k: v for k, v in enc.items() if k in ("input_ids", "token_type_ids")}


#: texts tokenised at a time when only their lengths are kept
LENGTH_CHUNK = 16_384


@dataclass(frozen=True)
class TokenTable:
    """The truncated word-piece ids of many texts in flat arrays (as Python lists the 131,548 chitchat contexts' ids
    took 6 GB; here 4 bytes a piece): text ``i`` is ``ids[starts[i] : starts[i] + lengths[i]]``, its token type
    ids the same run of ``types`` (None when the tokenizer gives none). Repeated texts share one run."""

    ids: np.ndarray  # int32, the runs of the distinct texts one after another
    types: np.ndarray | None  # int8, aligned with ids
    starts: np.ndarray  # int64 per text: where its run begins
    lengths: np.ndarray  # int64 per text: word pieces, special tokens included


def _flat(lists: list[list[int]], dtype: type) -> np.ndarray:
    """The concatenation of integer lists as one numpy array of ``dtype``."""
    return np.fromiter(chain.from_iterable(lists), dtype=dtype, count=sum(map(len, lists)))


def token_table(tokenizer, texts: Sequence[str], max_length: int, truncation_side: str = "right") -> TokenTable:
    """:func:`tokenize_texts` of every text as a :class:`TokenTable`: each distinct text tokenised once,
    ``LENGTH_CHUNK`` at a time (the same ids as tokenising every text, in any batch)."""
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"text #{bad} is {type(texts[bad]).__name__}, expected str")
    uniq = list(dict.fromkeys(texts))
    ids, types, lengths = [], [], []
    for start in range(0, len(uniq), LENGTH_CHUNK):
        enc = tokenize_texts(tokenizer, uniq[start : start + LENGTH_CHUNK], max_length, truncation_side)
        lengths.append(np.fromiter(map(len, enc["input_ids"]), dtype=np.int64, count=len(enc["input_ids"])))
        ids.append(_flat(enc["input_ids"], np.int32))
        if "token_type_ids" in enc:
            types.append(_flat(enc["token_type_ids"], np.int8))
    ulen = np.concatenate(lengths) if lengths else np.empty(0, dtype=np.int64)
    ustart = np.cumsum(ulen) - ulen
    of = {text: i for i, text in enumerate(uniq)}
    at = np.fromiter((of[t] for t in texts), dtype=np.int64, count=len(texts))
    return TokenTable(np.concatenate(ids) if ids else np.empty(0, dtype=np.int32),
                      np.concatenate(types) if types else None, ustart[at], ulen[at])


def pad_rows(table: TokenTable, rows: Sequence[int] | np.ndarray, pad_id: int, device) -> dict[str, torch.Tensor]:
    """The model inputs of texts ``rows`` of ``table``, right-padded to their longest member: the tensors
    :func:`pad_batch` makes of the same ids (int64 ids, attention mask, token types where the table has them)."""
    rows = np.asarray(rows, dtype=np.int64)
    lengths = table.lengths[rows]
    positions = np.arange(int(lengths.max()))
    mask = positions[None, :] < lengths[:, None]
    at = (table.starts[rows][:, None] + positions[None, :])[mask]  # the tokens' places in the flat arrays
    input_ids = np.full(mask.shape, pad_id, dtype=np.int64)
    input_ids[mask] = table.ids[at]
    batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask.astype(np.int64))}
    if table.types is not None:
        types = np.zeros(mask.shape, dtype=np.int64)
        types[mask] = table.types[at]
        batch["token_type_ids"] = torch.from_numpy(types)
    return batch_to_device(batch, device)  # pinned, non-blocking on CUDA


def pad_batch(tokens: dict[str, list[list[int]]], rows: Sequence[int] | np.ndarray, pad_id: int,
              device) -> dict[str, torch.Tensor]:
    """Right-pad the given rows to their longest member; returns model inputs with the attention mask."""
    ids = [tokens["input_ids"][i] for i in rows]
    width = max(len(x) for x in ids)
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for j, x in enumerate(ids):
        input_ids[j, : len(x)] = x
        mask[j, : len(x)] = 1
    batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}
    if "token_type_ids" in tokens:
        types = np.zeros((len(ids), width), dtype=np.int64)
        for j, i in enumerate(rows):
            t = tokens["token_type_ids"][i]
            types[j, : len(t)] = t
        batch["token_type_ids"] = torch.from_numpy(types)
    return batch_to_device(batch, device)  # pinned, non-blocking on CUDA


def embed_batch(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Unit-norm mean-pooled vectors (batch, hidden) of a padded batch (:func:`pad_batch`)."""
    return mean_pool(model(**batch).last_hidden_state, batch["attention_mask"])


def encode_rows(
    texts: Sequence[str],
    model,
    tokenizer,
    *,
    max_length: int = 128,
    batch_size: int = 64,
    precision: str = "auto",
    progress: bool = True,
    desc: str = "encode",
    truncation_side: str = "right",
    shard: Shard = WHOLE,
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, vectors) of the texts shard ``shard`` encodes, rows in input order (:mod:`curricula.plumbing.shards`).

    Each distinct text is tokenised once (:func:`token_table`; the batches' tensors are those of tokenising each
    batch anew). Texts are batched longest first; a shard takes a contiguous run of whole batches, so each vector is
    bitwise the one the unsharded job computes.
    """
    if batch_size < 1 or max_length < 2:
        raise ValueError(f"batch_size={batch_size}, max_length={max_length}: expected >= 1 and >= 2")
    device = next(model.parameters()).device
    dim = model.config.hidden_size
    if not len(texts):
        return np.empty(0, dtype=np.int64), np.empty((0, dim), dtype=np.float32)
    table = token_table(tokenizer, texts, max_length, truncation_side)  # every text once, as the old lengths pass
    batches = batch_shard(length_batches(table.lengths, batch_size, longest_first=True), shard)
    rows = shard_rows(batches)
    out = np.empty((len(texts), dim), dtype=np.float32)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), autocast(device, precision, transformer=True):
            for batch in tqdm(batches, desc=desc, unit="batch", disable=not progress, mininterval=2.0):
                out[batch] = embed_batch(model, pad_rows(table, batch, pad_id, device)).float().cpu().numpy()
    finally:
        model.train(was_training)
    return rows, np.ascontiguousarray(out[rows])


def vectors_frame(ids: Sequence[str], matrix: np.ndarray) -> pl.DataFrame:
    """A ``VECTORS`` table from ids and a float32 matrix (one row per id)."""
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(ids):
        raise ValueError(f"matrix of shape {matrix.shape} does not match {len(ids)} ids")
    df = pl.DataFrame({"id": pl.Series("id", list(ids), dtype=pl.String), "vector": pl.Series("vector", matrix)})
    return check_table(df, VECTORS, "encode")


def _check_ids(texts: Sequence[str], ids: Sequence[str]) -> None:
    if len(texts) != len(ids):
        raise ValueError(f"{len(texts)} texts but {len(ids)} ids")
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise ValueError(f"duplicate id {i!r}: vector ids must be unique")
        seen.add(i)


def encode(
    texts: Sequence[str],
    ids: Sequence[str],
    model_dir: str | Path = "minilm",
    *,
    max_length: int = 128,
    batch_size: int = 64,
    layers: int | None = None,
    device: str = "auto",
    precision: str = "auto",
    progress: bool = True,
    truncation_side: str = "right",
    shard: Shard = WHOLE,
    runtime: JobRuntime | None = None,
) -> pl.DataFrame:
    """Encode ``texts`` into a ``VECTORS`` table (``id``, ``vector`` Array(Float32, hidden size)), in input order.

    Mean pooling over the attention mask and L2 normalisation, so inner product = cosine similarity.
    ``model_dir`` is ``"minilm"`` (the packaged all-MiniLM-L6-v2), any local BERT-family checkpoint, or one half
    of a bi-encoder saved by :func:`curricula.retrieval.biencoder.finetune_biencoder` (``out_dir/context``,
    ``out_dir/response``).
    ``truncation_side="left"`` keeps the end of texts longer than ``max_length`` (dialogue contexts).
    With ``shard`` only that shard's texts are encoded (:func:`encode_rows`), still in input order.
    """
    _check_ids(texts, ids)
    # a job passes its runtime (curricula.models.runtime); a direct call resolves ``device`` and ``precision``
    runtime = runtime or start_job(Runtime(device=device, precision=precision), True, "encoding")
    dev, precision = runtime.device, runtime.precision
    path = resolve_model_dir(model_dir)
    tokenizer = load_tokenizer(path)
    model = load_encoder(path, layers=layers, device=dev)
    t0 = time.perf_counter()
    rows, matrix = encode_rows(
        texts, model, tokenizer, max_length=max_length, batch_size=batch_size, precision=precision,
        progress=progress, truncation_side=truncation_side, shard=shard,
    )
    secs = time.perf_counter() - t0
    log.info("encoded %d texts with %s on %s in %.1f s (%.0f texts/s)", len(rows), path.name, dev, secs,
             len(rows) / secs if secs > 0 else float("nan"))
    return vectors_frame([ids[i] for i in rows], matrix)


# ------------------------------------------------------------------------------------------------- neighbours
def _make_search(docs: np.ndarray) -> tuple[Callable[[np.ndarray, int], tuple], str]:
    """An exact inner-product search function over ``docs`` on the CPU (FAISS ``IndexFlatIP``)."""
    import faiss

    index = faiss.IndexFlatIP(docs.shape[1])
    index.add(docs)
    return index.search, "faiss IndexFlatIP (CPU)"


def _pool_searches(Q: np.ndarray, pools: list[tuple[pl.Series, np.ndarray]], device: str) -> list[tuple | None]:
    """Per pool, ``(search, doc ids, doc count, kind)`` or None where the pool or the queries are empty: on the GPU
    when ``device`` is a CUDA device and this faiss can search there
    (:func:`curricula.retrieval.gpu_search.choose_search_device`, one ``StandardGpuResources`` for all pools), else
    FAISS ``IndexFlatIP`` on the CPU."""
    import faiss

    from curricula.models.device import log_device
    from curricula.retrieval import gpu_search

    for _, X in pools:
        if len(X) and len(Q) and Q.shape[1] != X.shape[1]:
            raise ValueError(f"query vectors have {Q.shape[1]} dimensions, document vectors {X.shape[1]}")
    used = [X if len(X) and len(Q) else None for _, X in pools]
    card = None if all(X is None for X in used) else gpu_search.choose_search_device(device, faiss, select_device)
    if card is None:
        made = [None if X is None else _make_search(X) for X in used]
    else:
        log_device(torch.device("cuda", card), None, "neighbour search")
        made = gpu_search.gpu_searches(faiss, used, card, torch.cuda.mem_get_info(card)[0])
    return [None if m is None else (m[0], dids, len(X), m[1]) for (dids, X), m in zip(pools, made)]


def _sort_rows(D: np.ndarray, I: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (scores, ids) ordered by score descending, then doc index ascending; first k columns."""
    order = np.lexsort((I[rows], -D[rows]), axis=-1)[:, :k]
    return np.take_along_axis(D[rows], order, axis=1), np.take_along_axis(I[rows], order, axis=1)


def _topk(search, q: np.ndarray, k: int, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k with ties broken by doc index, also across the k-th place (widening the search there)."""
    kk = min(k + 1, n_docs)
    D, I = search(q, kk)
    if kk > k:
        boundary = np.flatnonzero(D[:, k - 1] == D[:, k])
        D, I = np.ascontiguousarray(D[:, :k]), np.ascontiguousarray(I[:, :k])
        width = kk
        while boundary.size:
            width = min(n_docs, width * 2)
            D2, I2 = search(np.ascontiguousarray(q[boundary]), width)
            closed = (D2[:, k - 1] != D2[:, width - 1]) | (width == n_docs)
            done = np.flatnonzero(closed)
            D[boundary[done]], I[boundary[done]] = _sort_rows(D2, I2, done, k)
            boundary = boundary[~closed]
    # equal scores inside the list: order them by doc index (faiss's heap order is not specified)
    tied = np.flatnonzero((D[:, 1:] == D[:, :-1]).any(axis=1)) if k > 1 else np.empty(0, dtype=np.int64)
    if tied.size:
        D[tied], I[tied] = _sort_rows(D, I, tied, k)
    return D, I


def neighbors(
    query_vecs: pl.DataFrame,
    doc_vecs: pl.DataFrame,
    k: int,
    *,
    chunk_size: int = 4096,
    progress: bool = True,
    device: str = "cpu",
) -> pl.DataFrame:
    """Exact top-``k`` documents by inner product for every query, as a ``NEIGHBORS`` table.

    ``query_vecs`` and ``doc_vecs`` are ``VECTORS`` tables of the same width (rows of :func:`encode` are
    unit-norm, so the score is the cosine). ``k`` is capped at the number of documents. Rows come out by query
    (in ``query_vecs`` order) and rank 1..k (score descending; equal scores in ``doc_vecs`` order). The whole
    table in memory: the pipeline's stage streams :func:`neighbor_chunks` to disk instead. ``device`` (``cpu``,
    ``auto``, ``cuda``, ``cuda:N``) puts the search on a GPU where this faiss has GPU support
    (:func:`neighbor_chunks`).
    """
    qids = query_vecs["id"].cast(pl.String)
    Q = vectors_to_numpy(query_vecs)
    pools = [(doc_vecs["id"].cast(pl.String), vectors_to_numpy(doc_vecs))]
    frames = list(neighbor_chunks(qids, Q, pools, np.zeros(len(Q), dtype=np.int64), k, chunk_size=chunk_size,
                                  progress=progress, device=device))
    return pl.concat(frames, rechunk=False) if frames else pl.DataFrame(schema=NEIGHBORS.columns)


def neighbor_chunks(
    qids: pl.Series,
    Q: np.ndarray,
    pools: list[tuple[pl.Series, np.ndarray]],
    pool_of: np.ndarray,
    k: int,
    *,
    chunk_size: int = 1024,
    progress: bool = True,
    device: str = "cpu",
) -> Iterator[pl.DataFrame]:
    """``NEIGHBORS`` rows of the queries ``Q`` (ids ``qids``), ``chunk_size`` queries at a time, in query order.

    Query ``i`` searches pool ``pool_of[i]`` of ``pools`` (doc ids and unit-norm vectors; e.g. its split's docs)
    for its exact top ``min(k, pool size)`` by inner product (rank 1 = highest; equal scores in pool order). A
    generator: memory is the pools' indexes plus one chunk's chunk_size x k rows, never the whole table, so a
    caller can write 131M rows (the whole chitchat corpus at k = 1,000) as they come. With a CUDA ``device``
    (``auto`` on a machine with a card, ``cuda``, ``cuda:N``) and a FAISS GPU build the search runs on the card in
    fp32 (:mod:`curricula.retrieval.gpu_search`): the same lists apart from near-ties, scores equal up to the last
    float bits; ``cpu`` (the default) is FAISS ``IndexFlatIP`` on the CPU.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k={k!r}: expected a positive integer")
    if chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size}: expected >= 1")
    if len(Q) != len(qids) or len(pool_of) != len(Q):
        raise ValueError(f"{len(qids)} query ids, {len(Q)} query vectors and {len(pool_of)} pool labels")
    searches = _pool_searches(Q, pools, device)
    t0 = time.perf_counter()
    for start in tqdm(range(0, len(Q), chunk_size), desc="neighbours", unit="chunk", disable=not progress,
                      mininterval=2.0):
        stop = min(len(Q), start + chunk_size)
        parts = []
        for p, entry in enumerate(searches):
            sel = np.flatnonzero(pool_of[start:stop] == p) + start
            if entry is None or not sel.size:
                continue
            search, dids, n_docs, _ = entry
            kp = int(min(k, n_docs))
            D, I = _topk(search, np.ascontiguousarray(Q[sel]), kp, n_docs)
            if (I < 0).any():  # only with non-finite vectors
                raise ValueError("faiss returned fewer than k results; are there NaN or infinite vectors?")
            at = np.repeat(sel, kp)
            parts.append(pl.DataFrame({
                "qid": qids.gather(at),
                "docid": dids.gather(I.ravel()),
                "rank": pl.Series("rank", np.tile(np.arange(1, kp + 1, dtype=np.int32), sel.size), dtype=pl.Int32),
                "score": pl.Series("score", D.ravel(), dtype=pl.Float32),
                "_at": at,
            }))
        if parts:
            yield pl.concat(parts).sort("_at", "rank").drop("_at")
    kinds = sorted({entry[3] for entry in searches if entry is not None})
    log.info("%s: top-%d of %s docs for %d queries in %.1f s", ", ".join(kinds) or "faiss", k,
             "/".join(str(len(X)) for _, X in pools), len(Q), time.perf_counter() - t0)


# ---------------------------------------------------------------------------------- where G ranks the true reply
#: One row per split: where G puts each context's true reply among the context's top-k neighbours (rule
#: ``dense_positive_ranks``, :func:`positive_rank_summary`). Shares are fractions in [0, 1] of ``queries``.
POSITIVE_RANKS = TableSpec(
    "positive_ranks",
    {"split": pl.String, "k": pl.Int64, "queries": pl.Int64, "median_rank": pl.Float64, "at_1": pl.Float64,
     "top_10": pl.Float64, "top_100": pl.Float64, "top_k": pl.Float64, "outside_k": pl.Float64},
    key=("split",),
    allowed={"split": SPLITS},
)


def positive_ranks(
    neighbors: pl.DataFrame | pl.LazyFrame,
    qrels: pl.DataFrame,
    queries: pl.DataFrame,
    relevant_min: int = 1,
) -> pl.DataFrame:
    """Per query with a relevant doc: the rank G gives its best-ranked relevant doc among its neighbours.

    ``neighbors`` is a ``NEIGHBORS`` table (qid, docid, rank; rank 1 = G's most similar doc), eager or lazy: a
    ``pl.scan_parquet`` of ``dense/neighbors.parquet`` (4M rows for the default chitchat run, 131M for the whole
    corpus) is only joined with the relevant (qid, docid) pairs, streaming, so the table is never held. A doc is
    relevant when its qrels ``rel >= relevant_min``; queries without one (nothing to rank) are left out.

    Returns (qid, split, rank) sorted by qid: ``rank`` (Int32, 1 = best) is the smallest rank among the query's
    relevant docs, null when none of them is in its top k (the stored list's depth).
    """
    rel = qrels.filter(pl.col("rel") >= relevant_min).select("qid", "docid").unique()
    asked = queries.select("qid", "split").join(rel.select("qid").unique(), on="qid", how="semi")
    lazy = neighbors.lazy() if isinstance(neighbors, pl.DataFrame) else neighbors
    best = (
        lazy.select("qid", "docid", "rank")
        .join(rel.lazy(), on=["qid", "docid"], how="inner")
        .group_by("qid")
        .agg(pl.col("rank").min())
        .collect(engine="streaming")
    )
    return (asked.join(best, on="qid", how="left")
            .select("qid", "split", pl.col("rank").cast(pl.Int32))
            .sort("qid"))


def positive_rank_summary(ranks: pl.DataFrame, k: int) -> pl.DataFrame:
    """One row per split (train, dev, test order; splits without queries are left out) of :func:`positive_ranks`:
    a ``POSITIVE_RANKS`` table.

    ``k`` is the neighbour lists' depth (config ``dense.neighbors_k``). Columns: ``queries`` (contexts with a true
    reply), ``median_rank`` over all of them with a reply outside the top k counted as rank k + 1 (so a median of
    k + 1 means more than half are outside; rank 1 = G's best), and the shares (fractions in [0, 1]) whose true
    reply is at rank 1 (``at_1``), within the top 10 and top 100 (the top k when k is smaller), within the top k
    (``top_k``) and outside it (``outside_k``; ``top_k + outside_k = 1``).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k={k!r}: expected a positive integer")
    # rank is a numeric column (positive_ranks' Int32 ranks), whose max is a number, or None without rows
    deepest = cast("float | None", ranks["rank"].max())
    if deepest is not None and deepest > k:
        raise ValueError(f"a true reply at rank {deepest} > k={k}: k must be the neighbour lists' depth")
    rank = pl.col("rank").cast(pl.Int64)

    def within(n: int) -> pl.Expr:
        return (rank <= n).fill_null(False).mean()

    out = (
        ranks.group_by("split")
        .agg(
            k=pl.lit(int(k), dtype=pl.Int64),
            queries=pl.len().cast(pl.Int64),
            median_rank=rank.fill_null(int(k) + 1).median().cast(pl.Float64),
            at_1=within(1),
            top_10=within(10),
            top_100=within(100),
            top_k=rank.is_not_null().mean(),
            outside_k=rank.is_null().mean(),
        )
        .sort(pl.col("split").replace_strict(list(SPLITS), list(range(len(SPLITS))), default=len(SPLITS)))
    )
    return check_table(out.select(list(POSITIVE_RANKS.columns)), POSITIVE_RANKS, "positive_rank_summary")

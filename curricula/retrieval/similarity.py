"""Similarities of stored dense vectors, without torch: what the curricula read from the dense stage's tables.

G(c, r+), the fast ranker's similarity of a context and its true reply (Su et al. 2021 eq. 4), is read in two places
of HCL: the corpus-level difficulty f_d (eq. 2, :func:`curricula.difficulty.hcl.hcl_corpus`) and the false-negative
guard of the instance-level negatives (:class:`curricula.curriculum.negatives.NegativeSampler`). Both read it from
:func:`positive_similarity`, so the two can never disagree about a pair. Kept free of torch so that importing the
curricula (which Snakemake does while it parses the workflow) stays light.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def vectors_to_numpy(vectors: pl.DataFrame | pl.Series) -> np.ndarray:
    """The ``vector`` column (Array or List of floats) as a C-contiguous float32 matrix, without a Python loop.

    Zero-copy where polars allows it, so the result may be a read-only view: copy it before writing to it.
    """
    s = vectors["vector"] if isinstance(vectors, pl.DataFrame) else vectors
    if s.null_count():
        raise ValueError(f"vector column has {s.null_count()} null row(s)")
    if isinstance(s.dtype, pl.List):
        if not len(s):
            return np.empty((0, 0), dtype=np.float32)
        widths = s.list.len()
        if widths.min() != widths.max():
            raise ValueError(f"vectors of unequal length ({widths.min()!s}..{widths.max()!s})")
        s = s.list.to_array(int(widths[0]))
    if not isinstance(s.dtype, pl.Array):
        raise TypeError(f"vector column has type {s.dtype}, expected Array or List of floats")
    m = s.to_numpy()
    if m.ndim != 2:
        m = m.reshape(len(s), -1)
    return np.ascontiguousarray(m, dtype=np.float32)


def positive_similarity(pairs: pl.DataFrame, query_vectors: pl.DataFrame, doc_vectors: pl.DataFrame) -> pl.DataFrame:
    """G(c, r+) for every (qid, docid) row of ``pairs`` (the relevant pairs): ``(qid, docid, g)`` in the rows' order,
    ``g`` the inner product of the dense vectors (the dense stage's unit-norm vectors, so a cosine in [-1, 1]),
    accumulated in float64. ``query_vectors`` / ``doc_vectors`` are ``VECTORS`` tables (id, vector) holding at
    least every qid / docid of ``pairs``; a missing one is a ValueError naming the first few."""
    qids, docids = pairs["qid"].to_list(), pairs["docid"].to_list()
    # only the rows the pairs need: a collection's whole doc table would not fit a float32 matrix in memory
    query_vectors = query_vectors.filter(pl.col("id").is_in(pairs["qid"].unique().implode()))
    doc_vectors = doc_vectors.filter(pl.col("id").is_in(pairs["docid"].unique().implode()))
    q_row = {q: i for i, q in enumerate(query_vectors["id"].to_list())}
    d_row = {d: i for i, d in enumerate(doc_vectors["id"].to_list())}
    missing = sorted({q for q in qids if q not in q_row}) + sorted({d for d in docids if d not in d_row})
    if missing:
        raise ValueError(f"G(c, r+) needs the dense vectors of every query and relevant doc; missing: "
                         f"{missing[:5]}{' ...' if len(missing) > 5 else ''}")
    Q, D = vectors_to_numpy(query_vectors), vectors_to_numpy(doc_vectors)
    qi = np.array([q_row[q] for q in qids], dtype=np.int64)
    di = np.array([d_row[d] for d in docids], dtype=np.int64)
    g = np.einsum("ij,ij->i", Q[qi].astype(np.float64), D[di].astype(np.float64)) if len(qi) else np.empty(0)
    return pl.DataFrame({"qid": qids, "docid": docids, "g": g},
                        schema={"qid": pl.String, "docid": pl.String, "g": pl.Float64})

"""Su et al. (2021) hierarchical curriculum learning (HCL): corpus-level difficulty, eq. 2.

f_d(c, r+) = 1 - G(c, r+) / max over the training pairs of G(c_k, r_k+), with G the fast bi-encoder's similarity
(eq. 4; the dense stage's unit-norm vectors, so G is a cosine). "A lower difficulty score indicates c and r+ are
more similar to each other thus are easier": f_d is already a difficulty, 1 = hardest. The paper states
f_d in [0, 1], which holds for G >= 0; a negative cosine would exceed 1, so values are clipped to [0, 1].
The instance-level difficulty h_d (eq. 3) is the rank of a response among a context's neighbours, stored by the
dense stage in ``dense/neighbors.parquet`` and used by the training sampler.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from curricula.retrieval.similarity import positive_similarity


def hcl_corpus_difficulty(similarity: np.ndarray) -> np.ndarray:
    """Eq. 2 on an array of G(c, r+) over the training pairs: 1 - G / max G, clipped to [0, 1]."""
    g = np.asarray(similarity, dtype=np.float64)
    if g.size == 0:
        return g
    top = g.max()
    if top <= 0:
        return np.ones_like(g)  # no pair is similar at all: all equally (maximally) hard
    return np.clip(1.0 - g / top, 0.0, 1.0)


def hcl_corpus(pairs: pl.DataFrame, query_vectors: pl.DataFrame, doc_vectors: pl.DataFrame) -> pl.DataFrame:
    """Per query: (qid, hcl_corpus_raw = G(c, r+), hcl_corpus = f_d of eq. 2), mean over several positives."""
    sim = positive_similarity(pairs.filter(pl.col("rel") > 0).select("qid", "docid"), query_vectors, doc_vectors)
    sim = sim.with_columns(fd=pl.Series(hcl_corpus_difficulty(sim["g"].to_numpy()), dtype=pl.Float64))
    return sim.group_by("qid").agg(pl.col("g").mean().alias("hcl_corpus_raw"), pl.col("fd").mean().alias("hcl_corpus"))

"""Penha & Hauff (2020) scoring functions, Table 2: the difficulty of a training instance (U, R, Y).

An instance is a query (dialogue context U) with its candidate responses R and labels Y; every function returns one
raw value per query. Orientation, from the paper's §3 "Scoring Functions": for every function here a LARGER raw
value means a HARDER instance (bigger contexts spread the information need; longer responses distract;
heterogeneous candidate lists are hard, "homogeneous ranked lists are considered to be easy"; a small margin of the
teacher between the positive and the negatives, or a large teacher loss, is hard). :func:`percentile_difficulty`
turns raw values into ``difficulty`` in [0, 1] (1 = hardest) by their rank among the training instances, which is
all the paper's sorting uses.

Table 2 as printed shows the same formula for #turns and #Uwords; from the text, #turns is |U| (the number of
utterances) and the barred #Uwords is the average number of words per utterance; the barred #Rwords is the average
number of words per candidate response. Words are whitespace-separated tokens.
"""

from __future__ import annotations

import numpy as np
import polars as pl

#: Penha & Hauff compute sigma_SM over the first k = 20 words of the context and of each response (§4).
SM_WORDS = 20


def random_score(qids: pl.Series, seed: int) -> pl.Series:
    """Table 2 *random*: Uniform(0, 1) per query, seeded; the no-curriculum baseline. Depends only on the qid set."""
    order = qids.unique().sort()
    values = np.random.default_rng(seed).random(order.len())
    lookup = dict(zip(order.to_list(), values.tolist()))
    return pl.Series("random", [lookup[q] for q in qids.to_list()], dtype=pl.Float64)


def word_count(text: pl.Expr) -> pl.Expr:
    """Whitespace-separated words of a text column."""
    return text.str.strip_chars().str.split(" ").list.eval(pl.element().filter(pl.element() != "")).list.len()


def turns(queries: pl.DataFrame) -> pl.DataFrame:
    """Table 2 #turns: |U|, the number of utterances of the context (qid, turns_raw). More turns = harder."""
    return queries.select("qid", pl.col("turns").list.len().cast(pl.Float64).alias("turns_raw"))


def u_words(queries: pl.DataFrame) -> pl.DataFrame:
    """Table 2 #Uwords (barred): mean words per utterance, sum_i word_count(u_i) / |U| (qid, u_words_raw)."""
    words = queries.select("qid", pl.col("turns")).explode("turns").with_columns(n=word_count(pl.col("turns")))
    return words.group_by("qid").agg(pl.col("n").mean().cast(pl.Float64).alias("u_words_raw"))


def r_words(pairs: pl.DataFrame, docs: pl.DataFrame) -> pl.DataFrame:
    """Table 2 #Rwords (barred): mean words per candidate response of the query (qid, r_words_raw)."""
    words = pairs.select("qid", "docid").join(docs, on="docid").with_columns(n=word_count(pl.col("text")))
    return words.group_by("qid").agg(pl.col("n").mean().cast(pl.Float64).alias("r_words_raw"))


def candidate_std(pairs: pl.DataFrame, score: str, name: str) -> pl.DataFrame:
    """Sample standard deviation (ddof 1, Table 2's |R| - 1) of a per-candidate score within each query."""
    return pairs.group_by("qid").agg(pl.col(score).std(ddof=1).fill_null(0.0).cast(pl.Float64).alias(name))


def sigma_bm25(pairs: pl.DataFrame, candidate_scores: pl.DataFrame) -> pl.DataFrame:
    """Table 2 sigma_BM25: std of the BM25 scores of all the query's candidates (qid, sigma_bm25_raw).

    ``candidate_scores`` (qid, docid, score) are Lucene's BM25 scores of every candidate (the bm25 stage), so
    candidates outside BM25's top k count too. The paper used gensim's BM25 (k1 1.5, b 0.75); here k1/b are config.
    """
    scored = pairs.select("qid", "docid").join(candidate_scores.select("qid", "docid", "score"), on=["qid", "docid"],
                                               how="left").with_columns(pl.col("score").fill_null(0.0))
    return candidate_std(scored, "score", "sigma_bm25_raw")


#: texts tokenised, or pairs matched, at a time (memory stays flat in the number of pairs)
CHUNK = 65_536


def first_word_vectors(texts: list[str], tokenizer, embeddings: np.ndarray, k: int = SM_WORDS) -> np.ndarray:
    """Mean of the L2-normalised input embeddings of each text's first ``k`` word pieces (punctuation skipped).

    The paper averages fastText vectors of the first k = 20 words; fastText cannot be had here, so the packaged
    MiniLM's input word-piece embedding matrix stands in (same recipe, static vectors, no context). A text with no
    word piece left gets a zero vector (similarity 0 with everything).
    """
    vocab = tokenizer.convert_ids_to_tokens(list(range(embeddings.shape[0])))
    wordlike = np.array([any(ch.isalnum() for ch in tok) for tok in vocab])
    unit = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
    out = np.zeros((len(texts), embeddings.shape[1]), dtype=np.float64)
    for start in range(0, len(texts), CHUNK):  # word-piece ids of CHUNK texts at a time, not of the whole corpus
        ids = tokenizer(texts[start : start + CHUNK], add_special_tokens=False, truncation=False,
                        verbose=False)["input_ids"]
        for i, row in enumerate(ids, start):
            keep = [t for t in row if wordlike[t]][:k]
            if keep:
                out[i] = unit[keep].mean(axis=0)
    return out


def semantic_match(query_vectors: np.ndarray, doc_vectors: np.ndarray) -> np.ndarray:
    """SM(U, r): the average cosine between every word of U's first k and every word of r's first k.

    The mean over all word pairs of cos(u_a, r_b) equals the dot product of the two means of unit word vectors,
    which is what :func:`first_word_vectors` returns; rows are aligned pairs.
    """
    return np.einsum("ij,ij->i", query_vectors, doc_vectors)


def sigma_sm(pairs: pl.DataFrame, queries: pl.DataFrame, docs: pl.DataFrame, tokenizer, embeddings: np.ndarray,
             k: int = SM_WORDS) -> pl.DataFrame:
    """Table 2 sigma_SM: std over the query's candidates of SM(U, r) (qid, sigma_sm_raw); U = the concatenated
    context."""
    q = queries.filter(pl.col("qid").is_in(pairs["qid"].unique().implode())).select("qid", "text")
    d = docs.filter(pl.col("docid").is_in(pairs["docid"].unique().implode())).select("docid", "text")
    qv = first_word_vectors(q["text"].to_list(), tokenizer, embeddings, k)
    dv = first_word_vectors(d["text"].to_list(), tokenizer, embeddings, k)
    qi = dict(zip(q["qid"].to_list(), range(q.height)))
    di = dict(zip(d["docid"].to_list(), range(d.height)))
    rows_q = np.array([qi[x] for x in pairs["qid"].to_list()], dtype=np.int64)
    rows_d = np.array([di[x] for x in pairs["docid"].to_list()], dtype=np.int64)
    # pair by pair in chunks: gathering both sides' vectors for a million pairs at once would take 6 GB
    sm = np.concatenate([semantic_match(qv[rows_q[s : s + CHUNK]], dv[rows_d[s : s + CHUNK]])
                         for s in range(0, rows_q.size, CHUNK)]) if rows_q.size else np.empty(0)
    return candidate_std(pairs.select("qid").with_columns(sm=pl.Series(sm)), "sm", "sigma_sm_raw")


def _sigmoid(x: pl.Expr) -> pl.Expr:
    return 1.0 / (1.0 + (-x).exp())


def bert_pred(pairs: pl.DataFrame, teacher: pl.DataFrame) -> pl.DataFrame:
    """Table 2 BERT_pred: -(P(r+) - P(r-)), the negated margin of the teacher's confidence (qid, bert_pred_raw).

    P is the teacher's probability (sigmoid of its logit); with several positives or negatives their means are
    used. "The higher the difference the easier the instance is", so the negated margin grows with difficulty
    (in [-1, 1]). A query without a positive or without a negative gets 0 (no margin to measure).
    """
    scored = pairs.select("qid", "docid", "rel").join(teacher.select("qid", "docid", "score"), on=["qid", "docid"])
    p = scored.with_columns(p=_sigmoid(pl.col("score")))
    agg = p.group_by("qid").agg(
        pos=pl.col("p").filter(pl.col("rel") > 0).mean(), neg=pl.col("p").filter(pl.col("rel") <= 0).mean()
    )
    return agg.select("qid", (-(pl.col("pos") - pl.col("neg"))).fill_null(0.0).cast(pl.Float64).alias("bert_pred_raw"))


def bert_loss(pairs: pl.DataFrame, teacher: pl.DataFrame) -> pl.DataFrame:
    """Table 2 BERT_loss (barred): mean of the teacher's per-candidate loss over the query's candidates."""
    scored = pairs.select("qid", "docid").join(teacher.select("qid", "docid", "loss"), on=["qid", "docid"])
    return scored.group_by("qid").agg(pl.col("loss").mean().cast(pl.Float64).alias("bert_loss_raw"))


def percentile_difficulty(raw: pl.Series) -> pl.Series:
    """Difficulty in [0, 1] from raw values where larger = harder: (average rank - 1) / (n - 1); ties share a value.

    A single instance (or all tied) gets 0.5. Sorting by this equals sorting by the raw value.
    """
    n = raw.len()
    if n <= 1:
        return pl.Series(raw.name, [0.5] * n, dtype=pl.Float64)
    ranks = raw.rank(method="average")
    if ranks.min() == ranks.max():
        return pl.Series(raw.name, [0.5] * n, dtype=pl.Float64)
    return ((ranks - 1) / (n - 1)).cast(pl.Float64).alias(raw.name)


def by_rank(raw: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """(qid, ``f_raw``, ``f``) for the queries of ``pairs``, sorted by qid, from a (qid, ``f_raw``) frame of any
    queries: ``f`` is :func:`percentile_difficulty` of the raw value among the scored queries only (1 = hardest)."""
    name = next(c for c in raw.columns if c.endswith("_raw"))
    frame = raw.filter(pl.col("qid").is_in(pairs["qid"].unique().implode())).sort("qid")
    return frame.select("qid", name, percentile_difficulty(frame[name]).alias(name.removesuffix("_raw")))


def random(pairs: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Table 2 *random* of the queries of ``pairs``: (qid, random_raw), see :func:`random_score`."""
    qids = pairs["qid"].unique().sort()
    return pl.DataFrame({"qid": qids, "random_raw": random_score(qids, seed)})

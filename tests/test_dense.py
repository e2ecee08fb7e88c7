"""Dense encoding, exact FAISS neighbours and the in-batch-negatives bi-encoder (Su et al. 2021, §3.4)."""

from __future__ import annotations

import csv
import json

import numpy as np
import polars as pl
import pytest
import torch

from curricula.models.hf import autocast, load_encoder, load_tokenizer
from curricula.plumbing.contracts import NEIGHBORS, VECTORS, check_table, read_table, write_table
from curricula.plumbing.shards import Shard, length_batches
from curricula.retrieval.biencoder import (
    CONTEXT_DIR,
    RESPONSE_DIR,
    embed_in_chunks,
    finetune_biencoder,
    in_batch_loss,
    length_chunks,
)
from curricula.retrieval.dense import (
    POSITIVE_RANKS,
    embed_batch,
    encode,
    encode_rows,
    neighbors,
    pad_batch,
    pad_rows,
    positive_rank_summary,
    positive_ranks,
    token_table,
    tokenize_texts,
    vectors_frame,
)
from curricula.retrieval.similarity import vectors_to_numpy
from tests.conftest import shared_file

TEXTS = [
    "How are glacier caves formed?",
    "A partly submerged glacier cave on Perito Moreno Glacier.",
    "The ice facade is approximately 60 m high.",
    "",
    "Ice formations in the Titlis glacier cave.",
    "A glacier cave is a cave formed within the ice of a glacier. Glacier caves are often called ice caves, "
    "but this term is properly used to describe bedrock caves that contain year-round ice. " * 3,
    "ok",
    "How much is 1 tablespoon of water?",
]
IDS = [f"t{i}" for i in range(len(TEXTS))]


@pytest.fixture(scope="module")
def minilm():
    return load_tokenizer("minilm"), load_encoder("minilm")


@pytest.fixture(scope="module")
def vecs():
    # fp32, pinned: "auto" is bf16 on a CPU with bf16 instructions, and these tests compare to an fp32 reference
    return encode(TEXTS, IDS, "minilm", device="cpu", batch_size=3, progress=False, precision="fp32")


def reference_vector(tok, model, text, max_length=128):
    """A naive one-text-at-a-time transformers forward, mean pooled and normalised (no padding at all)."""
    batch = tok([text], truncation=True, max_length=max_length, return_tensors="pt")
    with torch.inference_mode():
        h = model(**batch).last_hidden_state[0]
    v = h.mean(dim=0)
    return (v / v.norm()).numpy()


def test_encode_contract_order_and_norm(vecs):
    check_table(vecs, VECTORS, "test")
    assert vecs["id"].to_list() == IDS
    assert vecs.schema["vector"] == pl.Array(pl.Float32, 384)
    m = vectors_to_numpy(vecs)
    assert m.dtype == np.float32 and m.shape == (len(TEXTS), 384) and m.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)


def test_encode_equals_naive_one_by_one_forward(vecs, minilm):
    tok, model = minilm
    m = vectors_to_numpy(vecs)
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(m[i], reference_vector(tok, model, text), atol=1e-5, err_msg=text[:40])


def test_encode_is_deterministic_and_batch_independent(vecs):
    again = encode(TEXTS, IDS, "minilm", device="cpu", batch_size=3, progress=False, precision="fp32")
    assert again.equals(vecs)
    one_batch = encode(TEXTS, IDS, "minilm", device="cpu", batch_size=64, progress=False, precision="fp32")
    np.testing.assert_allclose(vectors_to_numpy(one_batch), vectors_to_numpy(vecs), atol=1e-5)


def test_bf16_vectors_point_where_the_fp32_ones_do(vecs):
    """bf16 autocast ("auto" on a CPU with bf16 instructions): unit vectors within a few thousandths of fp32's
    in cosine, repeatable run to run, and each text still its fp32 vector's nearest neighbour."""
    half = encode(TEXTS, IDS, "minilm", device="cpu", batch_size=3, progress=False, precision="bf16")
    assert half.equals(encode(TEXTS, IDS, "minilm", device="cpu", batch_size=3, progress=False, precision="bf16"))
    a, b = vectors_to_numpy(half), vectors_to_numpy(vecs)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cosine = (a * b).sum(axis=1)
    assert cosine.min() > 0.99 and not np.array_equal(a, b)
    assert ((a @ b.T).argmax(axis=1) == np.arange(len(TEXTS))).all()


def test_encode_roundtrips_through_the_vectors_table(vecs, tmp_path):
    path = write_table(vecs, tmp_path / "dense" / "docs.parquet", VECTORS)
    assert read_table(path, VECTORS).equals(vecs)


def test_text_is_its_own_nearest_neighbour(vecs):
    distinct = vecs.filter(pl.col("id") != "t3")  # (the empty text aside)
    top = neighbors(distinct, distinct, 1, progress=False)
    assert top["qid"].to_list() == top["docid"].to_list()
    np.testing.assert_allclose(top["score"].to_numpy(), 1.0, atol=1e-5)
    # and a question is closer to its answer than to an unrelated question
    s = dict(zip(*neighbors(vecs.slice(0, 1), vecs, len(TEXTS), progress=False).select("docid", "score")))
    assert s["t5"] > s["t7"]


class CountingTokenizer:
    """A tokenizer that records the texts it is asked to tokenise (``calls``, one list per call)."""

    def __init__(self, tok):
        self.tok, self.calls = tok, []

    def __call__(self, texts, **kw):
        self.calls.append(list(texts))
        return self.tok(texts, **kw)

    def __getattr__(self, name):
        return getattr(self.tok, name)

    def __setattr__(self, name, value):
        if name in ("tok", "calls"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.tok, name, value)


REPEATED = TEXTS + ["ok", TEXTS[0], "", TEXTS[5]]  # texts that occur twice


@pytest.mark.parametrize("side", ["left", "right"])
def test_token_table_tokenises_each_distinct_text_once_and_pads_the_tensors_of_each_batch(minilm, side):
    counting = CountingTokenizer(minilm[0])
    table = token_table(counting, REPEATED, 16, side)
    assert sorted(t for call in counting.calls for t in call) == sorted(set(REPEATED))  # each distinct text once
    assert table.lengths.tolist() == [len(x) for x in tokenize_texts(minilm[0], REPEATED, 16, side)["input_ids"]]
    rng = np.random.default_rng(0)
    for rows in (rng.permutation(len(REPEATED))[:5], np.arange(len(REPEATED)), np.array([3]), np.array([6, 6])):
        fresh = tokenize_texts(minilm[0], [REPEATED[i] for i in rows], 16, side)  # the batch tokenised anew
        want = pad_batch(fresh, range(len(rows)), 0, "cpu")
        got = pad_rows(table, rows, 0, "cpu")
        assert list(got) == list(want) and all(torch.equal(got[k], want[k]) for k in want), rows
        assert all(got[k].dtype == torch.int64 for k in got)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_encode_rows_tokenises_once_and_gives_bitwise_the_vectors_of_tokenising_each_batch(precision):
    """The vectors of the batches the encoder ran before texts were tokenised once: each length-sorted batch
    tokenised anew (and padded by pad_batch), bit for bit, under either arithmetic; in input order, also by shard."""
    tok, model = load_tokenizer("minilm"), load_encoder("minilm", layers=1).eval()
    counting = CountingTokenizer(tok)
    rows, got = encode_rows(REPEATED, model, counting, max_length=16, batch_size=3, precision=precision,
                            progress=False, truncation_side="left")
    assert sum(map(len, counting.calls)) == len(set(REPEATED)) and rows.tolist() == list(range(len(REPEATED)))
    lengths = [len(x) for x in tokenize_texts(tok, REPEATED, 16, "left")["input_ids"]]
    want = np.empty_like(got)
    with torch.inference_mode(), autocast("cpu", precision, transformer=True):
        for batch in length_batches(lengths, 3, longest_first=True):
            tokens = tokenize_texts(tok, [REPEATED[i] for i in batch], 16, "left")
            want[batch] = embed_batch(model, pad_batch(tokens, range(len(batch)), tok.pad_token_id, "cpu")).numpy()
    assert np.array_equal(got, want)
    shard_rows, part = encode_rows(REPEATED, model, tok, max_length=16, batch_size=3, precision=precision,
                                   progress=False, truncation_side="left", shard=Shard(1, 2))
    assert 0 < len(shard_rows) < len(REPEATED) and np.array_equal(part, want[shard_rows])


def test_encode_options_and_bad_input():
    small = encode(TEXTS[:3], IDS[:3], "minilm", device="cpu", layers=2, max_length=8, progress=False)
    assert small.schema["vector"] == pl.Array(pl.Float32, 384)
    bf16 = encode(TEXTS[:3], IDS[:3], "minilm", device="cpu", precision="bf16", progress=False)
    fp32 = encode(TEXTS[:3], IDS[:3], "minilm", device="cpu", progress=False)
    cos = (vectors_to_numpy(bf16) * vectors_to_numpy(fp32)).sum(axis=1)
    assert cos.min() > 0.98
    assert encode([], [], "minilm", device="cpu", progress=False).schema == small.schema
    with pytest.raises(ValueError, match="duplicate id 'a'"):
        encode(["x", "y"], ["a", "a"], "minilm", device="cpu", progress=False)
    with pytest.raises(ValueError, match="2 texts but 1 ids"):
        encode(["x", "y"], ["a"], "minilm", device="cpu", progress=False)
    with pytest.raises(TypeError, match="text #1"):
        encode(["x", None], ["a", "b"], "minilm", device="cpu", progress=False)


# ------------------------------------------------------------------------------------------------ neighbours
def frame(matrix: np.ndarray, prefix: str) -> pl.DataFrame:
    return vectors_frame([f"{prefix}{i}" for i in range(len(matrix))], matrix)


def brute_force(Q: np.ndarray, X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy top-k in float64: score descending, then document index ascending."""
    S = Q.astype(np.float64) @ X.astype(np.float64).T
    idx = np.arange(X.shape[0])
    order = np.array([np.lexsort((idx, -row))[:k] for row in S])
    return order, np.take_along_axis(S, order, axis=1)


def as_arrays(nb: pl.DataFrame, nq: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    docs = nb["docid"].str.slice(1).cast(pl.Int64).to_numpy().reshape(nq, k)
    return docs, nb["score"].to_numpy().reshape(nq, k)


def random_unit(rng, n, d):
    m = rng.standard_normal((n, d)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.mark.parametrize("chunk_size", [4096, 64, 7, 1])
def test_neighbours_equal_brute_force(chunk_size):
    rng = np.random.default_rng(0)
    Q, X = random_unit(rng, 150, 32), random_unit(rng, 700, 32)
    k = 40
    nb = neighbors(frame(Q, "q"), frame(X, "d"), k, chunk_size=chunk_size, progress=False)
    check_table(nb, NEIGHBORS, "test")
    assert nb.height == 150 * k
    assert nb["qid"].to_list() == [f"q{i}" for i in range(150) for _ in range(k)]
    assert nb["rank"].to_list() == list(range(1, k + 1)) * 150
    docs, scores = as_arrays(nb, 150, k)
    want_docs, want_scores = brute_force(Q, X, k)
    for got, want in zip(docs, want_docs):
        assert set(got) == set(want)
    np.testing.assert_allclose(scores, want_scores, atol=1e-6)
    assert (np.diff(scores, axis=1) <= 0).all()


def test_neighbours_cap_k_at_the_number_of_docs():
    rng = np.random.default_rng(1)
    Q, X = random_unit(rng, 5, 16), random_unit(rng, 12, 16)
    nb = neighbors(frame(Q, "q"), frame(X, "d"), 1000, chunk_size=2, progress=False)
    assert nb.height == 5 * 12
    assert nb.group_by("qid").agg(pl.col("docid").n_unique())["docid"].to_list() == [12] * 5
    docs, scores = as_arrays(nb, 5, 12)
    want_docs, want_scores = brute_force(Q, X, 12)
    np.testing.assert_array_equal(docs, want_docs)
    np.testing.assert_allclose(scores, want_scores, atol=1e-6)


@pytest.mark.parametrize("k", [1, 5, 17, 60])
@pytest.mark.parametrize("chunk_size", [4096, 3, 1])
def test_neighbours_break_ties_by_document_order(k, chunk_size):
    """Small-integer vectors: scores are exact and tied everywhere, also across the k-th place."""
    rng = np.random.default_rng(2)
    Q = rng.integers(-1, 2, (40, 4)).astype(np.float32)
    X = rng.integers(-1, 2, (60, 4)).astype(np.float32)
    nb = neighbors(frame(Q, "q"), frame(X, "d"), k, chunk_size=chunk_size, progress=False)
    docs, scores = as_arrays(nb, 40, k)
    want_docs, want_scores = brute_force(Q, X, k)
    np.testing.assert_array_equal(docs, want_docs)
    np.testing.assert_array_equal(scores, want_scores)


def test_neighbours_are_deterministic_and_write_as_the_contract(tmp_path):
    rng = np.random.default_rng(3)
    Q, X = frame(random_unit(rng, 300, 24), "q"), frame(random_unit(rng, 500, 24), "d")
    a = neighbors(Q, X, 25, chunk_size=128, progress=False)
    b = neighbors(Q, X, 25, chunk_size=128, progress=False)
    assert a.equals(b)
    p1 = write_table(a, tmp_path / "n1.parquet", NEIGHBORS)
    p2 = write_table(b, tmp_path / "n2.parquet", NEIGHBORS)
    assert p1.read_bytes() == p2.read_bytes()
    assert read_table(p1, NEIGHBORS).equals(a)


def test_neighbours_inputs():
    rng = np.random.default_rng(4)
    X = random_unit(rng, 10, 8)
    as_list = pl.DataFrame({"id": [f"d{i}" for i in range(10)], "vector": X.tolist()})
    assert vectors_to_numpy(as_list).dtype == np.float32
    nb = neighbors(as_list, frame(X, "d"), 3, progress=False)
    assert nb.filter(pl.col("rank") == 1)["docid"].to_list() == [f"d{i}" for i in range(10)]
    empty = neighbors(frame(X[:0], "q"), frame(X, "d"), 3, progress=False)
    assert empty.height == 0 and empty.schema == pl.Schema(NEIGHBORS.columns)
    with pytest.raises(ValueError, match="4 dimensions, document vectors 8"):
        neighbors(frame(random_unit(rng, 2, 4), "q"), frame(X, "d"), 3, progress=False)
    with pytest.raises(ValueError, match="positive integer"):
        neighbors(frame(X, "q"), frame(X, "d"), 0, progress=False)


# ----------------------------------------------------------------------------------------------- bi-encoder
def wikiqa_pairs(shared_data, n: int = 64) -> tuple[list[str], list[str]]:
    """The first ``n`` (question, correct sentence) pairs of the WikiQA dev split (CRLF, tab-separated)."""
    path = shared_file(shared_data, "wikiqa", "WikiQA-dev.tsv")
    contexts, responses = [], []
    with open(path, encoding="utf-8", newline="") as fh:
        rows = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(rows)
        assert header[1] == "Question" and header[5] == "Sentence"
        for row in rows:
            if row[6].strip() == "1":
                contexts.append(row[1])
                responses.append(row[5])
                if len(contexts) == n:
                    break
    return contexts, responses


def full_batch_loss(contexts, responses, ctx_vecs, resp_vecs) -> float:
    c = torch.from_numpy(np.array(vectors_to_numpy(ctx_vecs)))
    r = torch.from_numpy(np.array(vectors_to_numpy(resp_vecs)))
    cc, rc = np.unique(contexts, return_inverse=True)[1], np.unique(responses, return_inverse=True)[1]
    same = (cc[:, None] == cc[None, :]) | (rc[:, None] == rc[None, :])
    np.fill_diagonal(same, False)
    return float(in_batch_loss(c, r, 20.0, torch.from_numpy(same)))


def rank_fixture() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Neighbours (top 5 of each query), qrels and queries by hand: t1's reply at rank 1, t2's at 3, t3's outside
    the top 5, d1's two replies at ranks 5 and 2, d2 has no relevant doc (rel 0 only)."""
    lists = {"t1": ["a", "x", "y", "z", "w"], "t2": ["x", "y", "b", "z", "w"], "t3": ["x", "y", "z", "w", "v"],
             "d1": ["x", "e", "y", "z", "f"], "d2": ["g", "x", "y", "z", "w"]}
    nb = pl.DataFrame([{"qid": q, "docid": d, "rank": r, "score": 1.0 - r / 10}
                       for q, docs in lists.items() for r, d in enumerate(docs, 1)],
                      schema=NEIGHBORS.columns)
    qrels = pl.DataFrame({"qid": ["t1", "t2", "t3", "d1", "d1", "d2"], "docid": ["a", "b", "c", "f", "e", "g"],
                          "rel": [1, 1, 1, 2, 1, 0]}, schema={"qid": pl.String, "docid": pl.String, "rel": pl.Int32})
    queries = pl.DataFrame({"qid": ["d1", "d2", "t1", "t2", "t3"], "split": ["dev", "dev", "train", "train", "train"]})
    return nb, qrels, queries


def test_positive_ranks_take_each_querys_best_relevant_doc():
    nb, qrels, queries = rank_fixture()
    ranks = positive_ranks(nb, qrels, queries)
    # d2 has no relevant doc (rel 0 < relevant_min): nothing to rank, so no row
    assert ranks.to_dicts() == [{"qid": "d1", "split": "dev", "rank": 2}, {"qid": "t1", "split": "train", "rank": 1},
                                {"qid": "t2", "split": "train", "rank": 3},
                                {"qid": "t3", "split": "train", "rank": None}]
    assert ranks.schema["rank"] == pl.Int32
    assert positive_ranks(nb.lazy(), qrels, queries).equals(ranks)  # a lazy scan gives the same rows
    # relevant_min=2: only d1's rel-2 reply (rank 5) counts; the rel-1 queries drop out
    assert positive_ranks(nb, qrels, queries, relevant_min=2).to_dicts() == [{"qid": "d1", "split": "dev", "rank": 5}]


def test_positive_rank_summary_counts_outside_top_k_as_k_plus_1():
    nb, qrels, queries = rank_fixture()
    out = positive_rank_summary(positive_ranks(nb, qrels, queries), k=5)
    check_table(out, POSITIVE_RANKS, "test")
    assert out["split"].to_list() == ["train", "dev"]  # split order, not alphabetical
    train, dev = out.to_dicts()
    # train ranks 1, 3, outside -> 1, 3, 6: median 3 (dropping the outside one would give 2)
    assert train == pytest.approx({"split": "train", "k": 5, "queries": 3, "median_rank": 3.0, "at_1": 1 / 3,
                                   "top_10": 2 / 3, "top_100": 2 / 3, "top_k": 2 / 3, "outside_k": 1 / 3})
    assert dev == pytest.approx({"split": "dev", "k": 5, "queries": 1, "median_rank": 2.0, "at_1": 0.0,
                                 "top_10": 1.0, "top_100": 1.0, "top_k": 1.0, "outside_k": 0.0})
    ranks = pl.DataFrame({"qid": [f"q{i}" for i in range(4)], "split": ["test"] * 4, "rank": [1, 40, 150, None]},
                         schema={"qid": pl.String, "split": pl.String, "rank": pl.Int32})
    (test,) = positive_rank_summary(ranks, k=200).to_dicts()
    assert test["median_rank"] == 95.0 and test["top_10"] == 0.25 and test["top_100"] == 0.5
    assert test["top_k"] == 0.75 and test["outside_k"] == 0.25
    with pytest.raises(ValueError, match="rank 150 > k=100"):
        positive_rank_summary(ranks, k=100)
    with pytest.raises(ValueError, match="positive integer"):
        positive_rank_summary(ranks, k=0)


def test_in_batch_loss_uses_the_diagonal_as_positives():
    e = torch.eye(4)
    assert float(in_batch_loss(e, e, 20.0)) < 1e-6
    assert float(in_batch_loss(e, e.flip(0), 20.0)) > 10
    same = torch.zeros(4, 4, dtype=torch.bool)
    same[0, 3] = True  # response 3 is a positive of context 0 too: not a negative
    r = e.clone()
    r[3] = e[0]
    assert float(in_batch_loss(e, r, 20.0, same)) < float(in_batch_loss(e, r, 20.0))


def test_length_chunks_pads_skewed_sides_in_sorted_groups_and_even_sides_whole():
    even = [64] * 30 + [60, 62]
    assert [g.tolist() for g in length_chunks(even, rows=8)] == [list(range(32))]
    skewed = [61, 12, 15, 9, 40, 20, 14, 18, 11, 25, 16, 13, 30, 10, 17, 19]
    groups = length_chunks(skewed, rows=4)
    assert sorted(np.concatenate(groups).tolist()) == list(range(16))  # every position once
    assert [len(g) for g in groups] == [4, 4, 4, 4]
    maxima = [max(skewed[i] for i in g) for g in groups]
    assert maxima == sorted(maxima) and maxima[0] == 12  # length order: the short ones share a short width
    assert length_chunks([5, 50], rows=8)[0].tolist() == [0, 1]  # no more rows than one group


def test_embed_in_chunks_gives_each_text_the_vector_of_the_whole_padded_batch():
    tokenizer = load_tokenizer("minilm")
    model = load_encoder("minilm", layers=1).eval()
    texts = TEXTS * 2 + ["yes", "no"]
    tokens = token_table(tokenizer, texts, 64)
    rows = np.random.default_rng(0).permutation(len(texts))
    assert len(length_chunks(tokens.lengths[rows])) > 1  # the chunked path is taken
    with torch.no_grad():
        whole = embed_batch(model, pad_rows(tokens, rows, tokenizer.pad_token_id, "cpu"))
        chunked = embed_in_chunks(model, tokens, rows, tokenizer.pad_token_id, "cpu")
    assert chunked.shape == whole.shape
    torch.testing.assert_close(chunked, whole, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_finetune_biencoder_lowers_the_in_batch_loss(shared_data, tmp_path):
    contexts, responses = wikiqa_pairs(shared_data)
    assert len(contexts) == 64
    kw = dict(steps=12, batch_size=16, lr=1e-4, max_length=48, layers=1, seed=7, device="cpu", progress=False)
    stats = finetune_biencoder(contexts, responses, "minilm", tmp_path / "ranker", **kw)
    out = tmp_path / "ranker"
    assert sorted(p.name for p in out.iterdir()) == ["biencoder.json", CONTEXT_DIR, RESPONSE_DIR]
    assert [p.name for p in tmp_path.iterdir()] == ["ranker"]  # no temporary folder left behind
    assert len(stats["losses"]) == 12 and stats["final_loss"] == stats["losses"][-1] and stats["seconds"] > 0
    assert json.loads((out / "biencoder.json").read_text())["losses"] == stats["losses"]

    ids = [f"p{i}" for i in range(len(contexts))]
    enc = dict(max_length=48, progress=False, device="cpu")
    base_c = encode(contexts, ids, "minilm", layers=1, **enc)
    base_r = encode(responses, ids, "minilm", layers=1, **enc)
    tuned_c = encode(contexts, ids, out / CONTEXT_DIR, **enc)
    tuned_r = encode(responses, ids, out / RESPONSE_DIR, **enc)
    before = full_batch_loss(contexts, responses, base_c, base_r)
    after = full_batch_loss(contexts, responses, tuned_c, tuned_r)
    assert after < before, (before, after)
    print(f"in-batch loss over 64 pairs: {before:.4f} -> {after:.4f}")
    # two encoders with separate weights, each kept at one layer
    ctx_model, resp_model = load_encoder(out / CONTEXT_DIR), load_encoder(out / RESPONSE_DIR)
    assert ctx_model.config.num_hidden_layers == resp_model.config.num_hidden_layers == 1
    assert not torch.equal(
        ctx_model.encoder.layer[0].attention.self.query.weight, resp_model.encoder.layer[0].attention.self.query.weight
    )

    # the same seed gives the same training run and the same saved model; a rerun replaces the folder
    again = finetune_biencoder(contexts, responses, "minilm", tmp_path / "ranker", **kw)
    assert again["losses"] == stats["losses"]
    assert encode(contexts, ids, out / CONTEXT_DIR, **enc).equals(tuned_c)
    assert [p.name for p in tmp_path.iterdir()] == ["ranker"]

"""The precompute stages file to file, on a few hundred real chitchat instances (the embedded default)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from curricula.data import chitchat
from curricula.data.ingest import ingest_paths, write_ingest
from curricula.plumbing.contracts import CANDIDATE_SCORES, NEIGHBORS, QUERIES, RUN, VECTORS, read_table
from curricula.retrieval import precompute
from curricula.stages import bm25 as bm25_stages
from curricula.stages import dense as dense_stages
from curricula.retrieval.biencoder import CONTEXT_DIR, RESPONSE_DIR
from tests.built_once import built_once

CAPS = {"train": 120, "dev": 30, "test": 30}
DENSE = {"model": "minilm", "layers": 2, "max_length": 48, "batch_size": 32, "device": "cpu", "precision": "fp32",
         "threads": 2, "query_truncation": "left"}
BM25 = {"k": 15, "k1": 0.9, "b": 0.4, "query_turns": None, "heap": "1g"}


def encode(kind: str, table: Path, out: Path, cfg: dict, biencoder: Path | None = None) -> int:
    """Rule dense_encode_shard on a whole table (one shard), with the bi-encoder's half when given."""
    inputs = {"table": table, **({"biencoder": biencoder} if biencoder else {})}
    return dense_stages.dense_encode_shard(inputs, {"vectors": out}, kind=kind, dense=cfg, threads=cfg["threads"])


def bm25_run(stage: dict[str, Path], index: Path, out: dict[str, Path]) -> int:
    """Rules bm25_run_shard (one shard) and bm25_run: the run and its TREC file (outputs run, trec)."""
    shard = out["run"].with_name("run.shard.parquet")
    bm25_stages.bm25_run_shard({**stage, "index": index}, {"run": shard}, bm25=BM25, threads=2)
    return bm25_stages.gather_run({"shards": [shard]}, out, k=BM25["k"])


@pytest.fixture(scope="module")
def stage(tmp_path_factory) -> dict[str, Path]:
    """The ingested tables (made once per session, tests.built_once)."""

    def build(root: Path) -> None:
        data = chitchat.load({}, max_instances=CAPS, seed=3, max_context_turns=6).validate("chitchat")
        write_ingest(data, ingest_paths(root / "data"))

    root = built_once(tmp_path_factory, "precompute", build)
    return {**ingest_paths(root / "data"), "root": root}


@pytest.fixture(scope="module")
def bm25_outputs(stage, tmp_path_factory) -> dict[str, Path]:
    """The BM25 stages' outputs on ``stage`` (made once per session; they start the JVM)."""
    names = {"index": "index", "run": "run.parquet", "trec": "run.trec", "scores": "candidate_scores.parquet"}

    def build(root: Path) -> None:
        out = {key: root / name for key, name in names.items()}
        bm25_stages.bm25_index(stage, out, threads=2, heap="1g")
        bm25_run(stage, out["index"], out)
        bm25_stages.bm25_candidate_scores_shard({**stage, "index": out["index"]}, out, bm25=BM25)

    root = built_once(tmp_path_factory, "precompute_bm25", build)
    return {key: root / name for key, name in names.items()}


@pytest.fixture(scope="module")
def dense_outputs(stage, tmp_path_factory) -> dict[str, Path]:
    """MiniLM's vectors of ``stage``'s queries and docs and their neighbours (made once per session: encoding the
    ~2,000 texts is 20 s of CPU)."""
    names = {"queries": "queries.parquet", "docs": "docs.parquet", "neighbors": "neighbors.parquet"}

    def build(root: Path) -> None:
        out = {key: root / name for key, name in names.items()}
        for kind in ("queries", "docs"):
            encode(kind, stage[kind], out[kind], DENSE)
        dense_stages.dense_neighbors_shard({**stage, "queries_vectors": out["queries"], "docs_vectors": out["docs"]},
                                           out, k=50, within_split=True, config={"dense": {"device": "cpu"}})

    root = built_once(tmp_path_factory, "precompute_dense", build)
    return {key: root / name for key, name in names.items()}


#: tests that start the JVM (the BM25 stages) or read MiniLM's vectors of ~2,000 texts: not in the fast tier
HEAVY = pytest.mark.slow


@HEAVY
def test_bm25_run_covers_every_split_with_gapless_ranks(stage, bm25_outputs):
    run = read_table(bm25_outputs["run"], RUN)
    queries = read_table(stage["queries"], QUERIES)
    assert set(run["qid"]) <= set(queries["qid"]) and run["qid"].n_unique() >= 0.95 * queries.height
    ranks = run.group_by("qid").agg(ok=(pl.col("rank") == pl.int_range(1, pl.len() + 1)).all(), n=pl.len())
    assert ranks["ok"].all() and ranks["n"].max() == 15
    trec = bm25_outputs["trec"].read_text().splitlines()
    assert len(trec) == run.height and trec[0].split(" ")[1] == "Q0"


@HEAVY
def test_every_candidate_has_a_bm25_score(stage, bm25_outputs):
    scores = read_table(bm25_outputs["scores"], CANDIDATE_SCORES)
    cands = pl.read_parquet(stage["candidates"])
    assert scores.height == cands.height == sum(CAPS.values()) * 10
    assert scores.join(cands, on=["qid", "docid"], how="anti").height == 0
    assert (scores["score"] >= 0).all() and (scores["score"] > 0).mean() > 0.5


@HEAVY
def test_vectors_are_unit_norm_and_cover_every_row(stage, dense_outputs):
    for kind, key in (("queries", "qid"), ("docs", "docid")):
        vecs = read_table(dense_outputs[kind], VECTORS)
        table = pl.read_parquet(stage[kind])
        assert vecs["id"].to_list() == table[key].to_list()
        m = vecs["vector"].to_numpy()
        assert m.shape[1] == 384 and np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)


@HEAVY
def test_neighbours_stay_in_their_split_and_match_brute_force(stage, dense_outputs):
    nb = read_table(dense_outputs["neighbors"], NEIGHBORS)
    queries = pl.read_parquet(stage["queries"])
    pools = precompute.split_doc_pools(queries, pl.read_parquet(stage["qrels"]), pl.read_parquet(stage["candidates"]))
    assert nb["qid"].n_unique() == queries.height
    with_split = nb.join(queries.select("qid", "split"), on="qid")
    for split, pool in pools.items():
        got = with_split.filter(pl.col("split") == split)
        assert got["docid"].is_in(pool.implode()).all(), f"{split} neighbours leave the split's pool"
        assert got.group_by("qid").len()["len"].unique().to_list() == [min(50, pool.len())]
    # one train query against brute force over the train pool
    qv = pl.read_parquet(dense_outputs["queries"])
    dv = pl.read_parquet(dense_outputs["docs"]).filter(pl.col("id").is_in(pools["train"].implode()))
    qid = queries.filter(pl.col("split") == "train")["qid"][0]
    q = qv.filter(pl.col("id") == qid)["vector"].to_numpy()[0]
    sims = dv["vector"].to_numpy() @ q
    top = np.argsort(-sims, kind="stable")[:50]
    mine = nb.filter(pl.col("qid") == qid).sort("rank")
    assert mine["docid"].to_list()[:10] == dv["id"].gather(top[:10]).to_list()
    assert np.allclose(mine["score"].to_numpy(), sims[top], atol=1e-5)


@HEAVY
def test_the_true_response_is_usually_a_near_neighbour(stage, dense_outputs):
    """Pre-trained MiniLM is a real ranker: the true next turn ranks far above chance among the split's docs."""
    nb = read_table(dense_outputs["neighbors"], NEIGHBORS)
    qrels = pl.read_parquet(stage["qrels"])
    hit = qrels.join(nb, on=["qid", "docid"], how="left")
    pool_train = precompute.split_doc_pools(pl.read_parquet(stage["queries"]), qrels,
                                            pl.read_parquet(stage["candidates"]))["train"].len()
    # 50 of ~1,200 train docs is a 4% chance; real similarity puts far more positives in the top 50
    assert hit["rank"].is_not_null().mean() > 0.15, pool_train


def test_left_truncation_keeps_the_latest_turns(stage, tmp_path):
    queries = pl.read_parquet(stage["queries"]).filter(pl.col("text").str.len_chars() > 200).head(4)
    assert queries.height == 4
    long_ctx = queries.with_columns(text=pl.lit("filler words " * 200) + pl.col("text"))
    path = tmp_path / "queries.parquet"
    from curricula.plumbing.contracts import write_table

    write_table(long_ctx, path, QUERIES)
    write_table(queries, tmp_path / "short.parquet", QUERIES)
    cfg = {**DENSE, "max_length": 16}
    for side in ("left", "right"):
        encode("queries", path, tmp_path / f"long-{side}.parquet", {**cfg, "query_truncation": side})
    encode("queries", tmp_path / "short.parquet", tmp_path / "short-v.parquet", {**cfg, "query_truncation": "left"})
    left = pl.read_parquet(tmp_path / "long-left.parquet")["vector"].to_numpy()
    right = pl.read_parquet(tmp_path / "long-right.parquet")["vector"].to_numpy()
    short = pl.read_parquet(tmp_path / "short-v.parquet")["vector"].to_numpy()
    # left truncation sees the same last 14 word pieces as the untouched context; right sees only filler
    assert np.allclose(left, short, atol=1e-5)
    assert not np.allclose(right, short, atol=1e-2)
    assert np.allclose(right, right[0], atol=1e-5)


def test_positive_pairs_are_train_only(stage):
    pairs = precompute.positive_pairs(pl.read_parquet(stage["queries"]), pl.read_parquet(stage["docs"]),
                                      pl.read_parquet(stage["qrels"]))
    assert pairs.height == CAPS["train"]
    assert pairs.columns == ["qid", "docid", "context", "response"]


@pytest.mark.slow
def test_finetuned_biencoder_encodes_queries_and_docs_with_its_own_halves(stage, tmp_path):
    cfg = {**DENSE, "finetune": {"enabled": True, "steps": 4, "batch_size": 8, "lr": 1e-4, "max_length": 32,
                                 "layers": 1}}
    stats = dense_stages.dense_biencoder(stage, {"biencoder": tmp_path / "biencoder"}, dense=cfg, seed=5,
                                         threads=cfg["threads"])
    assert stats["pairs"] == CAPS["train"] and stats["steps"] == 4 and stats["layers"] == 1
    for kind in ("queries", "docs"):
        encode(kind, stage[kind], tmp_path / f"{kind}.parquet", cfg, biencoder=tmp_path / "biencoder")
    q = pl.read_parquet(tmp_path / "queries.parquet")["vector"].to_numpy()
    assert q.shape == (sum(CAPS.values()), 384)
    # the two halves were trained apart: the same text gets different vectors from the context and response encoders
    from curricula.retrieval import dense

    text = ["is anyone there?"]
    a = dense.encode(text, ["x"], tmp_path / "biencoder" / CONTEXT_DIR, progress=False)["vector"].to_numpy()
    b = dense.encode(text, ["x"], tmp_path / "biencoder" / RESPONSE_DIR, progress=False)["vector"].to_numpy()
    assert not np.allclose(a, b, atol=1e-4)

    # dense.max_length null: G encodes contexts at the length it was fine-tuned at (32), not at 128
    queries = pl.read_parquet(stage["queries"])
    encode("queries", stage["queries"], tmp_path / "q-null.parquet", {**cfg, "max_length": None},
           biencoder=tmp_path / "biencoder")
    got = pl.read_parquet(tmp_path / "q-null.parquet")["vector"].to_numpy()
    at = [dense.encode(queries["text"].to_list(), queries["qid"].to_list(), tmp_path / "biencoder" / CONTEXT_DIR,
                       max_length=n, truncation_side="left", precision="fp32", progress=False)["vector"].to_numpy()
          for n in (32, 128)]
    assert np.allclose(got, at[0], atol=1e-5)
    assert not np.allclose(got, at[1], atol=1e-3)  # some contexts are longer than 32 word pieces


@HEAVY
def test_bm25_run_searched_in_blocks_and_neighbours_in_chunks_are_the_same_files(stage, bm25_outputs, dense_outputs,
                                                                                  tmp_path, monkeypatch):
    """The streamed stages write exactly what one batch search / one chunk writes."""
    monkeypatch.setattr(precompute, "SEARCH_BLOCK", 7)
    bm25_run(stage, bm25_outputs["index"], {"run": tmp_path / "run.parquet", "trec": tmp_path / "run.trec"})
    assert (tmp_path / "run.parquet").read_bytes() == bm25_outputs["run"].read_bytes()
    assert (tmp_path / "run.trec").read_bytes() == bm25_outputs["trec"].read_bytes()
    precompute.write_neighbors(dense_outputs["queries"], dense_outputs["docs"], stage, tmp_path / "n.parquet", k=50,
                               chunk_size=5)
    assert (tmp_path / "n.parquet").read_bytes() == dense_outputs["neighbors"].read_bytes()


def test_positive_ranks_stage_writes_and_logs_the_summary_per_split(tmp_path, caplog):
    """Rule dense_positive_ranks file to file, on hand-made tables: the summary per split, each row logged."""
    from curricula.plumbing.contracts import QRELS, write_table
    from curricula.plumbing.row_groups import write_grouped_table
    from curricula.retrieval.dense import POSITIVE_RANKS

    qids = ["d1", "d2", "t1", "t2"]
    write_table(pl.DataFrame({"qid": qids, "split": ["dev", "dev", "train", "train"], "text": qids,
                              "turns": [[q] for q in qids], "domain": None}), tmp_path / "queries.parquet", QUERIES)
    write_table(pl.DataFrame({"qid": qids, "docid": ["r1", "r2", "r3", "r4"], "rel": [1, 1, 1, 1]}),
                tmp_path / "qrels.parquet", QRELS)
    # top 3 of each query: d1's reply at rank 2, d2's outside, t1's at 1, t2's at 3
    lists = {"d1": ["x", "r1", "y"], "d2": ["x", "y", "z"], "t1": ["r3", "x", "y"], "t2": ["x", "y", "r4"]}
    nb = pl.DataFrame([{"qid": q, "docid": d, "rank": r, "score": 1.0 - r / 10}
                       for q, docs in lists.items() for r, d in enumerate(docs, 1)], schema=NEIGHBORS.columns)
    write_grouped_table([nb], tmp_path / "neighbors.parquet", NEIGHBORS, size=1)
    data = {name: tmp_path / f"{name}.parquet" for name in ("queries", "qrels")}
    out = tmp_path / "dense" / "positive_ranks.parquet"
    with caplog.at_level("INFO", logger="curricula.retrieval.precompute"):
        got = dense_stages.dense_positive_ranks({**data, "neighbors": tmp_path / "neighbors.parquet"},
                                                {"summary": out}, k=3)
    table = read_table(out, POSITIVE_RANKS)
    assert table.equals(got) and table["split"].to_list() == ["train", "dev"]
    assert table["median_rank"].to_list() == [2.0, 3.0] and table["outside_k"].to_list() == [0.0, 0.5]
    assert "G ranks the true reply of dev's 2 contexts: at 1 0.0%, top 10 50.0%" in caplog.text
    assert "outside 50.0%; median rank 3 (rank 1 = best, outside top 3 counted as 4)" in caplog.text

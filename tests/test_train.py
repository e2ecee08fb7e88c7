"""Curriculum shards, the sampler, negatives, losses, weights and the training loop on a few real chitchat instances."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import torch

from curricula.curriculum import ordering as cur
from curricula.curriculum.negatives import NegativeSampler, resolve_negatives
from curricula.curriculum.pacing import resolve_pacing
from curricula.data import chitchat
from curricula.data.ingest import candidate_pairs
from curricula.difficulty import difficulty_table
from curricula.experiments.spec import TrainSpec, parse_train_spec, spec_params, thaw
from curricula.experiments.specs import experiment_specs, merge_experiment, needed_tables, resolve_ranker
from curricula.experiments.train import PairEase, train_ranker
from curricula.plumbing.contracts import DEV_CURVE, DEV_CURVE_TEST, NEIGHBORS, RUN
from curricula.plumbing.row_groups import write_grouped_table
from curricula.training.losses import element_losses, weighted_mean

CAPS = {"train": 40, "dev": 8, "test": 8}
TRAIN = dict(model="minilm", layers=1, max_length=32, steps=6, batch_size=4, lr=1e-4, eps=1e-8, weight_decay=0.0,
             warmup=0.1, optimizer="adamw", loss="pointwise_ce", margin=1.0,
             negatives={"mode": "random", "m": 1, "depth": 100, "pacing": None}, eval_every=3, eval_metric="AP",
             dev_queries=None, checkpoint_every=2, score_batch_size=64, device="cpu", precision="fp32", threads=2)


@pytest.fixture(scope="module")
def data() -> dict[str, pl.DataFrame]:
    d = chitchat.load({}, max_instances=CAPS, seed=11, max_context_turns=3)
    return {name: df for name, (df, _) in d.tables().items()}


@pytest.fixture(scope="module")
def table(data) -> pl.DataFrame:
    pairs = candidate_pairs(data)
    return difficulty_table(pairs, data["queries"], data["docs"], ["random", "u_words"], seed=5)


def folder_for(table: pl.DataFrame, scoring: str, root: Path, shard_size: int = 7, seed: int = 0) -> Path:
    out = root / scoring
    cur.write_curriculum(cur.curriculum_order(cur.training_instances(table, scoring), seed), out, shard_size)
    return out


# --------------------------------------------------------------------------------------------- curriculum
def test_order_is_easy_first_with_seeded_ties():
    inst = pl.DataFrame({"qid": list("abcde"), "docid": list("vwxyz"), "difficulty": [0.5, 0.1, 0.5, 0.9, 0.5],
                         "raw": [0.0] * 5})
    a = cur.curriculum_order(inst, seed=1)
    assert a["difficulty"].to_list() == [0.1, 0.5, 0.5, 0.5, 0.9]
    assert a["position"].to_list() == [0, 1, 2, 3, 4]
    orders = {tuple(cur.curriculum_order(inst, seed=s)["qid"].to_list()) for s in range(20)}
    assert len(orders) > 1  # ties (a, c, e) are broken differently by different seeds
    assert all(o[0] == "b" and o[-1] == "d" for o in orders)
    assert cur.curriculum_order(inst, seed=1).equals(a)


def test_shards_index_threshold_and_take(table, tmp_path):
    folder = folder_for(table, "u_words", tmp_path, shard_size=7)
    c = cur.Curriculum(folder)
    assert len(c) == CAPS["train"]
    assert len(list(folder.glob("shard-*.parquet"))) == math.ceil(CAPS["train"] / 7)
    all_rows = c.take(np.arange(len(c)))
    d = all_rows["difficulty"].to_numpy()
    assert np.all(np.diff(d) >= 0) and all_rows["position"].to_list() == list(range(len(c)))
    for t in (-1.0, 0.0, float(np.median(d)), d[10], 2.0):
        assert c.count_at_most(t) == int((d <= t).sum())
    pos = np.array([39, 0, 7, 7, 13])
    assert c.take(pos)["position"].to_list() == pos.tolist()
    with pytest.raises(IndexError):
        c.take(np.array([40]))


def test_sampler_only_returns_instances_inside_the_allowed_prefix(table, tmp_path):
    c = cur.Curriculum(folder_for(table, "u_words", tmp_path))
    n = len(c)
    frac = cur.CurriculumSampler(c, resolve_pacing({"name": "root_2", "delta": 0.33, "T": 0.9}, 100), batch_size=5,
                                 seed=3)
    prev = 0
    for step in range(0, 100, 3):
        allowed = frac.allowed(step)
        assert allowed == max(5, math.ceil(frac.pace(step) * n - 1e-9)) and allowed >= prev
        prev = allowed
        assert frac.positions(step).max() < allowed
    assert frac.allowed(0) == math.ceil(0.33 * n) and frac.allowed(90) == n
    thr = cur.CurriculumSampler(c, resolve_pacing({"name": "hcl", "r0": 0.4, "T0": 0.1, "T": 0.9}, 100), batch_size=2,
                                seed=3)
    for step in range(0, 100, 7):
        batch = thr.batch(step)
        if thr.allowed(step) > thr.min_allowed:
            assert (batch["difficulty"] <= thr.pace(step) + 1e-12).all()
    assert frac.batch(17).equals(frac.batch(17))  # a pure function of (seed, step)
    assert not frac.batch(17).equals(frac.batch(18))


# --------------------------------------------------------------------------------------------- negatives
def sampler(data, spec, **kw) -> NegativeSampler:
    return NegativeSampler(resolve_negatives(spec, 100), queries=data["queries"], docs=data["docs"],
                           qrels=data["qrels"], candidates=data["candidates"], seed=4, **kw)


def relevant_of(data) -> dict[str, set[str]]:
    return {q: set(g["docid"]) for (q,), g in data["qrels"].filter(pl.col("rel") > 0).group_by("qid")}


def train_qids(data) -> list[str]:
    return data["queries"].filter(pl.col("split") == "train")["qid"].sort().to_list()


def train_pool(data) -> list[str]:
    """The training response pool's docids, sorted (the train queries' candidates)."""
    return sorted(set(data["candidates"].join(data["queries"].filter(pl.col("split") == "train"), on="qid")["docid"]))


def shuffled_neighbors(data, qids: list[str], depth: int = 30) -> pl.DataFrame:
    """A ``NEIGHBORS`` table ranking ``depth`` random pool docs per query (seeded; score = -rank)."""
    rng, pool = np.random.default_rng(3), train_pool(data)
    rows = [(q, d, r + 1, float(-r)) for q in qids for r, d in enumerate(rng.permutation(pool)[:depth])]
    return pl.DataFrame(rows, schema=dict(NEIGHBORS.columns), orient="row")


def test_random_and_candidate_negatives_are_never_relevant(data):
    rel, qids = relevant_of(data), train_qids(data)
    rs = sampler(data, {"mode": "random", "m": 3})
    pool = {rs.docids[c] for c in rs.pool}
    cands = {q: set(g["docid"]) for (q,), g in data["candidates"].group_by("qid")}
    cs = sampler(data, {"mode": "candidates", "m": 9})
    for step in range(5):
        for q, row in zip(qids, rs.sample(qids, step)):
            docs = [rs.docids[c] for c in row]
            assert not set(docs) & rel[q] and set(docs) <= pool and len(set(docs)) == 3
        for q, row in zip(qids, cs.sample(qids, step)):
            docs = {cs.docids[c] for c in row}
            assert docs <= cands[q] - rel[q] and len(docs) == 9  # all 9 distinct non-relevant candidates
    test_docs = set(data["candidates"].join(data["queries"].filter(pl.col("split") == "test"), on="qid")["docid"])
    assert not pool & (test_docs - set(data["candidates"].join(
        data["queries"].filter(pl.col("split") == "train"), on="qid")["docid"]))


def test_instance_level_negatives_come_from_the_allowed_top_k_and_never_the_positive(data):
    rel, qids = relevant_of(data), train_qids(data)
    rng = np.random.default_rng(0)
    pool_docs = train_pool(data)
    rows = []
    for q in qids:  # a synthetic similarity ranking of the whole train pool, relevant docs near the top
        order = list(rng.permutation(pool_docs))
        for d in rel[q]:
            order.remove(d)
            order.insert(int(rng.integers(0, 3)), d)
        rows += [(q, d, r + 1) for r, d in enumerate(order[:100])]
    neighbors = pl.DataFrame(rows, schema={"qid": pl.String, "docid": pl.String, "rank": pl.Int32}, orient="row")
    rank = {(q, d): r for q, d, r in rows}
    ns = sampler(data, {"mode": "neighbors", "m": 2, "pacing": {"kT": 1, "T": 50}}, neighbors=neighbors)
    assert ns.space(0) == ns.pool.size and ns.space(50) == 10 and ns.space(99) == 10
    for step in (50, 60, 99, 30):
        k = ns.space(step)
        for q, row in zip(qids, ns.sample(qids, step)):
            docs = [ns.docids[c] for c in row]
            assert not set(docs) & rel[q]
            if k <= 100:
                assert all(rank[(q, d)] <= k for d in docs), (step, k)
    assert ns.space(30) > 10  # k shrinks from |pool| to 10^kT
    run = neighbors.filter(pl.col("rank") <= 20)  # a 20-deep "BM25 run": negatives never come from beyond it
    bs = sampler(data, {"mode": "bm25", "m": 3, "depth": 15}, run=run)
    for step in (0, 50):
        for q, row in zip(qids, bs.sample(qids, step)):
            docs = [bs.docids[c] for c in row]
            assert not set(docs) & rel[q] and all(rank[(q, d)] <= 15 for d in docs)


def test_ranked_lists_from_a_file_read_only_the_row_groups_of_the_drawn_queries(data, tmp_path):
    """The training job reads the neighbour table lazily: the same draws as from the whole frame, and only the row
    groups holding the queries a step draws for are read (the table is never loaded whole)."""
    qids = train_qids(data)
    frame = shuffled_neighbors(data, qids)
    path = tmp_path / "neighbors.parquet"
    write_grouped_table([frame.slice(0, 500), frame.slice(500)], path, NEIGHBORS, by="qid", size=3)
    n_groups = -(-len(qids) // 3)
    assert pq.ParquetFile(path).metadata.num_row_groups == n_groups > 5
    spec = {"mode": "neighbors", "m": 2, "pacing": {"kT": 1, "T": 50}}
    eager, lazy = sampler(data, spec, neighbors=frame), sampler(data, spec, neighbors=path)
    assert lazy.lists.groups_read == 0  # opening reads the footer only
    asked = [qids[0], qids[1], qids[7]]  # groups 0, 0 and 2
    for step in (0, 40, 60, 99):
        assert np.array_equal(lazy.sample(asked, step), eager.sample(asked, step))
    assert lazy.lists.groups_read == 2
    for step in (10, 70):  # every query: still the same draws, each group read once (all fit in the cache)
        assert np.array_equal(lazy.sample(qids, step), eager.sample(qids, step))
    assert lazy.lists.groups_read == n_groups
    for q in range(len(qids)):
        assert np.array_equal(lazy.lists.row(q), eager.lists.row(q))
    run = frame.with_columns(pl.col("score").cast(pl.Float64))  # the BM25 run is read the same way, to its depth
    write_grouped_table([run], tmp_path / "run.parquet", RUN, by="qid", size=4)
    bm25 = {"mode": "bm25", "m": 3, "depth": 12}
    assert np.array_equal(sampler(data, bm25, run=tmp_path / "run.parquet").sample(qids, 5),
                          sampler(data, bm25, run=run).sample(qids, 5))


def guard_fixture(data, n_stored: int = 30, dim: int = 8, trained: bool = True):
    """Random dense vectors for the train queries and pool docs, and the exact top-``n_stored`` neighbour table
    they give (score = inner product, as the dense stage writes it). ``trained``: each query vector points at one
    sum of its relevant docs (a G that ranks the true reply near the top), else it is random too."""
    qids = train_qids(data)
    pool_docs = train_pool(data)
    rng = np.random.default_rng(9)
    Q, D = rng.standard_normal((len(qids), dim)), rng.standard_normal((len(pool_docs), dim))
    if trained:
        rel, row = relevant_of(data), {d: j for j, d in enumerate(pool_docs)}
        Q = np.stack([4 * sum(D[row[d]] for d in rel[q]) + Q[i] for i, q in enumerate(qids)])
    G = Q @ D.T
    rows = []
    for i, q in enumerate(qids):
        order = np.argsort(-G[i], kind="stable")[:n_stored]
        rows += [(q, pool_docs[j], r + 1, float(G[i, j])) for r, j in enumerate(order)]
    neighbors = pl.DataFrame(rows, schema=dict(NEIGHBORS.columns), orient="row")
    vec = pl.Array(pl.Float32, dim)
    qv = pl.DataFrame({"id": qids, "vector": Q.astype(np.float32)}, schema={"id": pl.String, "vector": vec})
    dv = pl.DataFrame({"id": pool_docs, "vector": D.astype(np.float32)}, schema={"id": pl.String, "vector": vec})
    Q32, D32 = Q.astype(np.float32), D.astype(np.float32)
    g = {(q, d): float(Q32[i] @ D32[j]) for i, q in enumerate(qids) for j, d in enumerate(pool_docs)}
    return neighbors, qv, dv, g


def test_false_negative_guard_never_draws_a_negative_above_the_ratio_of_the_true_reply(data, tmp_path):
    """Su et al.'s released code (yxuansu/HCL, Data.select_response) drops every negative with G(c, r) > 0.8 x
    G(c, r+); unguarded, the top-10 window is full of them."""
    rel, qids = relevant_of(data), train_qids(data)
    neighbors, qv, dv, g = guard_fixture(data, n_stored=60, trained=True)
    threshold = {q: 0.8 * min(g[(q, d)] for d in rel[q]) for q in qids}
    spec = {"mode": "neighbors", "m": 2, "pacing": {"kT": 1, "T": 50}}
    plain = sampler(data, spec, neighbors=neighbors)
    guarded = sampler(data, {**spec, "false_negative_guard": 0.8}, neighbors=neighbors, query_vectors=qv,
                      doc_vectors=dv)
    above = {"plain": 0, "guarded": 0}
    for step in (30, 60, 99):  # k = 10 from step 50 on; k > 60 stored at step 30
        for name, s in (("plain", plain), ("guarded", guarded)):
            for q, row in zip(qids, s.sample(qids, step)):
                docs = [s.docids[c] for c in row]
                assert not set(docs) & rel[q]
                above[name] += sum(g[(q, d)] > threshold[q] + 1e-6 for d in docs)
    assert above["plain"] > 20 and guarded.guard_unchecked == 0 and above["guarded"] == 0, above
    assert guarded.positive_score[guarded.q_of[qids[0]]] == pytest.approx(min(g[(qids[0], d)] for d in rel[qids[0]]),
                                                                          rel=1e-5)
    # from files (the training job's inputs), the same draws: the neighbour scores read lazily, vectors by id
    path = tmp_path / "neighbors.parquet"
    write_grouped_table([neighbors], path, NEIGHBORS, by="qid", size=4)
    qv.write_parquet(tmp_path / "queries.parquet")
    dv.write_parquet(tmp_path / "docs.parquet")
    lazy = sampler(data, {**spec, "false_negative_guard": 0.8}, neighbors=path,
                   query_vectors=tmp_path / "queries.parquet", doc_vectors=tmp_path / "docs.parquet")
    for step in (30, 99):
        assert np.array_equal(lazy.sample(qids, step), guarded.sample(qids, step))
    # a window where nothing passes falls back to pool docs that pass (counted), never to a guarded-out one
    strict = sampler(data, {**spec, "false_negative_guard": 1e-9}, neighbors=neighbors, query_vectors=qv,
                     doc_vectors=dv)
    strict.sample(qids, 99)
    assert strict.fallbacks > 0
    # an untrained G (random vectors): for many queries every stored neighbour outscores 0.8 x G(c, r+); the guard
    # never draws them, and the draws from past the list it cannot check are the only ones above (counted)
    neighbors, qv, dv, g = guard_fixture(data, trained=False)
    threshold = {q: 0.8 * min(g[(q, d)] for d in rel[q]) for q in qids}
    rough = sampler(data, {**spec, "false_negative_guard": 0.8}, neighbors=neighbors, query_vectors=qv,
                    doc_vectors=dv)
    stored = {q: set(neighbors.filter(pl.col("qid") == q)["docid"]) for q in qids}
    over = 0
    for step in (30, 99):
        for q, row in zip(qids, rough.sample(qids, step)):
            for d in (rough.docids[c] for c in row):
                assert not (d in stored[q] and g[(q, d)] > threshold[q] + 1e-6)
                over += g[(q, d)] > threshold[q] + 1e-6
    assert 0 < over <= rough.guard_unchecked
    with pytest.raises(ValueError, match="needs the dense query and doc vectors"):
        sampler(data, {**spec, "false_negative_guard": 0.8}, neighbors=neighbors)
    with pytest.raises(ValueError, match="mode .bm25. has no G scores"):
        sampler(data, {"mode": "bm25", "m": 1, "false_negative_guard": 0.8}, run=neighbors, query_vectors=qv,
                doc_vectors=dv)


def test_false_negative_guard_rule_is_strictly_above_the_ratio_of_the_raw_score():
    from curricula.curriculum.negatives import false_negative_guard

    assert false_negative_guard(np.array([0.7, 0.8, 0.81, 1.2]), 1.0, 0.8).tolist() == [True, True, False, False]
    # a negative true-reply score: the threshold 0.8 x -1 = -0.8 lies above it, as in the authors' code
    assert false_negative_guard(np.array([-0.9, -0.8, -0.7]), -1.0, 0.8).tolist() == [True, True, False]


#: sha256 of the draws of the code before the guard existed (random, candidates, neighbors, bm25 at 4 steps)
DRAWS_BEFORE_THE_GUARD = "89d729910bfc2580dd0c13511e0e1455a8f7723a11ff8fbf979abf71468abade"


def test_a_null_guard_leaves_every_draw_byte_identical(data):
    import hashlib

    qids = train_qids(data)
    frame = shuffled_neighbors(data, qids)
    out = []
    for spec in ({"mode": "neighbors", "m": 2, "pacing": {"kT": 1, "T": 50}}, {"mode": "random", "m": 3},
                 {"mode": "candidates", "m": 2}, {"mode": "bm25", "m": 2, "depth": 12}):
        s = sampler(data, {**spec, "false_negative_guard": None}, neighbors=frame, run=frame)
        assert s.positive_score is None
        out.append(np.stack([s.sample(qids, step) for step in (0, 30, 60, 99)]))
    assert hashlib.sha256(b"".join(o.tobytes() for o in out)).hexdigest() == DRAWS_BEFORE_THE_GUARD


def test_the_guard_is_validated_and_left_out_of_specs_unless_set():
    import yaml

    from curricula.plumbing.config import SCHEMA

    schema = yaml.safe_load(Path(SCHEMA).read_text())
    hcl = {"negatives": {"mode": "neighbors", "pacing": {"kT": 2}}}
    base = experiment_specs({"train": TRAIN, "experiments": {"hcl": hcl}}, schema)["hcl"]
    off = experiment_specs({"train": TRAIN, "experiments": {
        "hcl": {"negatives": {**hcl["negatives"], "false_negative_guard": None}}}}, schema)["hcl"]
    assert off == base and "false_negative_guard" not in spec_params(off)["negatives"]  # null: the same params
    on = experiment_specs({"train": TRAIN, "experiments": {
        "hcl": {"negatives": {**hcl["negatives"], "false_negative_guard": 0.8}}}}, schema)["hcl"]
    assert on.curriculum.negatives.get("false_negative_guard") == 0.8
    assert needed_tables(on) == {"neighbors", "query_vectors", "doc_vectors"} and needed_tables(base) == {"neighbors"}
    bad = [({"negatives": {"mode": "random", "false_negative_guard": 0.8}}, "mode 'random' has no G scores"),
           ({"negatives": {"mode": "bm25", "false_negative_guard": 0.8}}, "mode 'bm25' has no G scores"),
           ({"negatives": {"mode": "neighbors", "false_negative_guard": 0}}, "false_negative_guard: 0 is less"),
           ({"negatives": {"mode": "neighbors", "false_negative_guard": "high"}}, "false_negative_guard: 'high'")]
    for experiment, message in bad:
        with pytest.raises(ValueError, match=message):
            experiment_specs({"train": TRAIN, "experiments": {"x": experiment}}, schema)


# --------------------------------------------------------------------------------------------- losses, weights
def test_losses_against_hand_values():
    s = torch.tensor([[2.0, 0.5, 3.0]])
    assert element_losses("hinge", s, 1.0).tolist() == [[0.0, 2.0]]  # max(0, 1-2+0.5), max(0, 1-2+3)
    pair = element_losses("pairwise_ce", s)
    assert pair[0].tolist() == pytest.approx([math.log1p(math.exp(-1.5)), math.log1p(math.exp(1.0))])
    mse = element_losses("pointwise_mse", s)
    assert mse[0].tolist() == pytest.approx([1.0, 0.25, 9.0])
    ce = element_losses("pointwise_ce", s)
    assert ce[0].tolist() == pytest.approx([math.log1p(math.exp(-2.0)), math.log1p(math.exp(0.5)),
                                            math.log1p(math.exp(3.0))])
    w = torch.tensor([[1.0, 0.0, 0.5]])
    assert float(weighted_mean(mse, w)) == pytest.approx((1.0 + 0 + 4.5) / 3)  # per element, then the mean
    with pytest.raises(ValueError, match="unknown loss"):
        element_losses("listnet", s)


def test_pair_ease_pairwise_macavaney_and_query_level():
    table = pl.DataFrame({"qid": ["a", "a", "a"], "docid": ["p", "n1", "n2"], "rel": [1, 0, 0],
                          "recip_raw": [0.5, 1.0, 0.25], "recip": [0.5, 1.0, 0.25]})
    code = {"p": 0, "n1": 1, "n2": 2}
    ease = PairEase(table, "recip", {"a": 0}, code, 3)
    docs = np.array([[0, 1, 2]])
    # D_pair = (h(d+) - h(d-) + 1) / 2: (0.5 - 1 + 1)/2 = 0.25, (0.5 - 0.25 + 1)/2 = 0.625
    assert ease.ease(np.array([0]), docs, "pairwise_ce").tolist() == [[0.25, 0.625]]
    assert ease.ease(np.array([0]), docs, "pointwise_ce").tolist() == [[0.5, 0.0, 0.75]]
    qlevel = table.rename({"recip_raw": "turns_raw", "recip": "turns"}).with_columns(turns=pl.lit(0.2))
    e2 = PairEase(qlevel, "turns", {"a": 0}, code, 3)
    assert e2.ease(np.array([0]), docs, "hinge")[0].tolist() == pytest.approx([0.8, 0.8])
    with pytest.raises(KeyError, match="no 'recip' difficulty"):
        ease.ease(np.array([0]), np.array([[0, 1, 5]]), "hinge")


def bm25_weights_fixture(data, tmp_path, bm25_list: str = "run", depth: int = 30):
    """The ingest tables and a BM25 run (every train query: ``depth`` random docs of any split, scores falling with
    the rank) written to ``tmp_path``, and recip's training table from the difficulty stage with ``bm25_list``."""
    from curricula.data.ingest import INGEST_TABLES
    from curricula.plumbing.contracts import CANDIDATE_SCORES, write_table
    from curricula.stages.difficulty import difficulty_function

    paths = {name: tmp_path / f"{name}.parquet" for name in [*INGEST_TABLES, "candidate_scores", "run"]}
    for name, spec in INGEST_TABLES.items():
        write_table(data[name], paths[name], spec)
    rng, docids = np.random.default_rng(5), data["docs"]["docid"].to_list()
    rows = [(q, d, r + 1, 20.0 - r / 2)
            for q in train_qids(data) for r, d in enumerate(rng.permutation(docids)[:depth])]
    run = pl.DataFrame(rows, schema=dict(RUN.columns), orient="row")
    write_table(run, paths["run"], RUN)
    scores = data["candidates"].with_columns(score=pl.Series(rng.uniform(0, 20, data["candidates"].height)))
    write_table(scores, paths["candidate_scores"], CANDIDATE_SCORES)
    table = difficulty_function(paths, {"table": tmp_path / "recip.parquet"}, function="recip",
                                knobs={"bm25_list": bm25_list})
    return run, table


def test_pair_ease_covers_every_negative_a_bm25_sampler_draws(data, tmp_path):
    """With bm25_list: run, recip's table holds every (training query, doc) that negatives {mode: bm25} draws, with
    raw = 1 / rank in the run (eq. 5); over the candidates alone (bm25_list: candidates) PairEase misses them."""
    run, table = bm25_weights_fixture(data, tmp_path)
    rank = {(q, d): r for q, d, r in run.select("qid", "docid", "rank").iter_rows()}
    rel, qids = relevant_of(data), train_qids(data)
    negs = sampler(data, {"mode": "bm25", "m": 3, "depth": 25}, run=run)
    ease = PairEase(table, "recip", negs.q_of, negs.code_of, len(negs.docids))
    q = np.array([negs.q_of[x] for x in qids])
    pos = np.array([negs.code_of[sorted(rel[x])[0]] for x in qids])
    drawn = set()
    for step in range(20):
        group = np.concatenate([pos[:, None], negs.sample(qids, step)], axis=1)
        assert not negs.last_fallback.any()
        pointwise = ease.ease(q, group, "pointwise_ce", negs.last_fallback)
        pair = ease.ease(q, group, "pairwise_ce", negs.last_fallback)
        for i, x in enumerate(qids):
            h_pos = 1 / rank[(x, negs.docids[pos[i]])] if (x, negs.docids[pos[i]]) in rank else 0.0
            for j, c in enumerate(group[i, 1:]):
                h = 1 / rank[(x, negs.docids[c])]  # every negative is from the run, never beyond depth 25
                drawn.add((x, negs.docids[c]))
                assert pointwise[i, j + 1] == pytest.approx(1 - h)  # D_point of a negative: 1 - recip
                assert pair[i, j] == pytest.approx((h_pos - h + 1) / 2)  # eq. 7
    assert ease.unlisted == 0 and len(drawn) > 3 * len(qids)
    _, listed = bm25_weights_fixture(data, tmp_path / "candidates", bm25_list="candidates")
    narrow = PairEase(listed, "recip", negs.q_of, negs.code_of, len(negs.docids))
    with pytest.raises(KeyError, match="no 'recip' difficulty"):
        narrow.ease(q, np.concatenate([pos[:, None], negs.sample(qids, 0)], axis=1), "pairwise_ce")


def test_pool_fallback_negatives_outside_the_table_weigh_as_unranked(data, tmp_path):
    """A query whose BM25 list has no training negative draws pool docs (the sampler's fallback): PairEase weighs
    those outside recip's table with h = 0 (unranked, no score); unmarked, a missing pair raises."""
    run, table = bm25_weights_fixture(data, tmp_path)
    rel, qids = relevant_of(data), train_qids(data)
    lonely = qids[0]  # its run holds nothing but its own positive: nothing to draw from
    run = pl.concat([run.filter(pl.col("qid") != lonely),
                     pl.DataFrame({"qid": [lonely], "docid": [sorted(rel[lonely])[0]], "rank": [1], "score": [9.0]},
                                  schema=dict(RUN.columns))])
    negs = sampler(data, {"mode": "bm25", "m": 3, "depth": 25}, run=run)
    ease = PairEase(table, "recip", negs.q_of, negs.code_of, len(negs.docids))
    listed = set(zip(table["qid"], table["docid"]))
    q = np.array([negs.q_of[lonely]] * 8)
    pos = np.array([negs.code_of[sorted(rel[lonely])[0]]] * 8)
    group = np.concatenate([pos[:, None], negs.sample([lonely] * 8, 3)], axis=1)
    assert negs.last_fallback.all() and negs.fallbacks == 8
    outside = np.array([[(lonely, negs.docids[c]) not in listed for c in row] for row in group[:, 1:]])
    assert outside.any()  # pool docs that are neither its candidates nor in its run
    got = ease.ease(q, group, "pairwise_ce", negs.last_fallback)
    h_pos = table.filter((pl.col("qid") == lonely) & (pl.col("docid") == sorted(rel[lonely])[0]))["recip_raw"][0]
    assert np.allclose(got[outside], (h_pos - 0.0 + 1) / 2) and ease.unlisted == int(outside.sum())
    with pytest.raises(KeyError, match="no 'recip' difficulty"):
        ease.ease(q, group, "pairwise_ce")  # not marked as fallback draws: a missing pair is an error


# --------------------------------------------------------------------------------------------- experiments
def test_experiment_specs_baseline_merge_and_errors():
    cfg = {"train": TRAIN, "experiments": {
        "root2": {"scoring": "bert_pred", "pacing": {"name": "root_2"}},
        "mix": {"scoring": "bert_pred", "pacing": {"name": "root_2"}, "weighting": {"scoring": "u_words", "m": "inf"},
                "negatives": {"mode": "neighbors", "pacing": {"kT": 3}}, "loss": "hinge"}}}
    specs = experiment_specs(cfg)
    assert list(specs) == ["baseline", "root2", "mix"]
    assert specs["baseline"].curriculum.scoring == "random" and specs["baseline"].curriculum.weighting is None
    assert thaw(specs["baseline"].curriculum.pacing) == {"name": "standard"}
    assert thaw(specs["mix"].curriculum.negatives) == {"mode": "neighbors", "m": 1, "depth": 100, "pacing": {"kT": 3}}
    assert needed_tables(specs["mix"]) == {"weights", "neighbors"} and needed_tables(specs["baseline"]) == set()
    assert "threads" not in spec_params(specs["mix"])
    assert merge_experiment(TRAIN, {"steps": 9})["steps"] == 9
    bad = [({"x": {"scoring": "nope"}}, "experiments.x.scoring"),
           ({"x": {"pacing": {"name": "zigzag"}}}, "experiments.x.pacing"),
           ({"x": {"weighting": {"scoring": "kde"}}}, "needs the difficulty of every negative"),
           ({"baseline": {"scoring": "turns"}}, "baseline has no curriculum")]
    for experiments, message in bad:
        with pytest.raises(ValueError, match=message):
            experiment_specs({"train": TRAIN, "experiments": experiments})


def test_pair_level_weights_with_bm25_negatives_need_the_run_list_and_a_deep_enough_run():
    """MacAvaney §4.3 draws negatives from the BM25 top 100: a pair-level weighting accepts negatives.mode: bm25
    exactly when difficulty.bm25_list is run (the difficulty tables then hold the run's pairs), with the run at least
    as deep as the negatives (bm25.k >= negatives.depth)."""
    arm = {"w": {"weighting": {"scoring": "recip", "m": 5}, "negatives": {"mode": "bm25", "depth": 100}}}
    run_list = {"train": TRAIN, "experiments": arm, "difficulty": {"bm25_list": "run"}, "bm25": {"k": 100}}
    specs = experiment_specs(run_list)
    assert specs["w"].curriculum.negatives.get("mode") == "bm25" and needed_tables(specs["w"]) == {"weights", "run"}
    assert experiment_specs({**run_list, "bm25": {"k": 1000}})["w"] == specs["w"]
    nulled = {"w": {**arm["w"], "negatives": {"mode": "bm25", "depth": None}}}  # null depth: the whole run
    assert thaw(experiment_specs({**run_list, "experiments": nulled})["w"].curriculum.negatives)["depth"] is None
    for refused in ({**run_list, "difficulty": {"bm25_list": "candidates"}}, {**run_list, "difficulty": {}},
                    {"train": TRAIN, "experiments": arm}):
        with pytest.raises(ValueError, match=r"experiments\.w: .*'recip'.*difficulty\.bm25_list: run"):
            experiment_specs(refused)
    for mode in ("random", "neighbors"):  # the run list does not cover these negatives
        other = {"w": {**arm["w"], "negatives": {"mode": mode}}}
        with pytest.raises(ValueError, match="set negatives.mode: candidates, or negatives.mode: bm25"):
            experiment_specs({**run_list, "experiments": other})
    with pytest.raises(ValueError, match=r"experiments\.w\.negatives\.depth: 100 .*bm25\.k: 50"):
        experiment_specs({**run_list, "bm25": {"k": 50}})
    query_level = {"w": {**arm["w"], "weighting": {"scoring": "turns"}}}  # one value per query: any negatives
    assert experiment_specs({**run_list, "bm25": {"k": 50}, "experiments": query_level})["w"].curriculum.weighting
    candidates = {"w": {**arm["w"], "negatives": {"mode": "candidates"}}}
    assert experiment_specs({**run_list, "bm25": {"k": 50}, "experiments": candidates})["w"]


def test_resolve_ranker_gives_each_ranker_its_schedule_unless_the_config_sets_one():
    from curricula.models import DEFAULT_SCHEDULE

    # MacAvaney et al. 2020 §4 / OpenNIR: constant Adam for ConvKNRM; BERT fine-tuning's warm-up + decay otherwise
    assert resolve_ranker(spec_of(ranker="convknrm"))["schedule"] == "constant"
    assert resolve_ranker(spec_of(ranker="cross_encoder"))["schedule"] == "linear"
    assert resolve_ranker(spec_of(ranker="convknrm", schedule=None))["schedule"] == "constant"
    assert resolve_ranker(spec_of(ranker="convknrm", schedule="linear"))["schedule"] == "linear"
    assert resolve_ranker(spec_of(ranker="cross_encoder", schedule="constant"))["schedule"] == "constant"
    # Wang et al. 2020 §5.1.2 state no schedule: the QA networks (and so the active-learning ranker) keep linear
    assert DEFAULT_SCHEDULE == {"cross_encoder": "linear", "convknrm": "constant", "cnn_qa": "linear",
                                "lstm_qa": "linear"}
    # the resolved value is in the train job's params, so a changed default re-runs the jobs it changes
    specs = experiment_specs({"train": {**TRAIN, "ranker": "convknrm"}, "experiments": {}})
    assert spec_params(specs["baseline"])["schedule"] == "constant"


def test_train_ranker_counts_patience_after_the_grids_min_steps(monkeypatch, tmp_path):
    import curricula.experiments.train as train_module

    class Built(Exception):
        pass

    lengths = []

    def of(fit, length=None, **overrides):
        lengths.append(length)
        raise Built  # the FitConfig is all this test needs: stop before any data is read

    monkeypatch.setattr(train_module.FitConfig, "of", staticmethod(of))
    weighted = {"weighting": {"scoring": "u_words", "m": 20, "iteration_steps": 32}, "steps": 400}
    for spec in (train_spec(steps=400, min_steps=640), train_spec(**weighted), train_spec(steps=400)):
        with pytest.raises(Built):
            train_ranker({}, spec, 1, curriculum_dir=tmp_path, model_out=tmp_path / "m", checkpoint_dir=tmp_path / "c")
    # the pipeline's min_steps when set (experiment_runs), else the spec's own curriculum (tests, bench scripts)
    assert lengths == [640, 640, 400]


# --------------------------------------------------------------------------------------------- training
def spec_of(**over) -> dict:
    return merge_experiment(TRAIN, over)


def train_spec(**over) -> TrainSpec:
    """The typed spec of :func:`spec_of`'s run mapping, the ranker's defaults filled (what train_ranker takes)."""
    return parse_train_spec(resolve_ranker(spec_of(**over)))


SMALL = {"cross_encoder": {}, "convknrm": {"channels": 8, "hidden": 8, "kernels": 5},
         "lstm_qa": {"channels": 8, "hidden": 8, "dropout": 0.5}}


@pytest.mark.slow
@pytest.mark.parametrize("ranker", list(SMALL))
def test_training_is_deterministic_and_resumes_to_the_same_weights(data, table, tmp_path, ranker):
    """Every ranker (dropout included: the torch RNG is checkpointed) resumes to the uninterrupted weights."""
    folder = folder_for(table, "u_words", tmp_path)
    spec = train_spec(scoring="u_words", pacing={"name": "root_2"},
                      weighting={"scoring": "u_words", "m": 2, "iteration_steps": 2},
                      ranker=ranker, architecture=SMALL[ranker])
    kw = dict(curriculum_dir=folder, weights=table, progress=False)
    a = train_ranker(data, spec, 7, model_out=tmp_path / "a", checkpoint_dir=tmp_path / "a.ckpt", **kw)
    b = train_ranker(data, spec, 7, model_out=tmp_path / "b", checkpoint_dir=tmp_path / "b.ckpt", **kw)
    assert a.columns == list(DEV_CURVE.columns) and a["step"].to_list() == [3, 6]
    assert a.equals(b)  # no wall-clock column: same config and seed give identical curves
    assert not (tmp_path / "a.ckpt").exists()  # cleared after a finished run

    class Killed(Exception):
        pass

    def kill_at_5(done: int) -> None:
        if done == 5:
            raise Killed

    with pytest.raises(Killed):
        train_ranker(data, spec, 7, model_out=tmp_path / "c", checkpoint_dir=tmp_path / "c.ckpt",
                     on_step=kill_at_5, **kw)
    assert not (tmp_path / "c").exists()
    state = torch.load(tmp_path / "c.ckpt" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 4 and [r["step"] for r in state["curve"]] == [3]
    c = train_ranker(data, spec, 7, model_out=tmp_path / "c", checkpoint_dir=tmp_path / "c.ckpt", **kw)
    assert c.equals(a)
    from safetensors.torch import load_file

    wa, wc = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "c" / "model.safetensors")
    assert wa.keys() == wc.keys() and all(torch.equal(wa[k], wc[k]) for k in wa)
    assert json.loads((tmp_path / "a" / "ranker.json").read_text())["ranker"] == ranker
    other = train_ranker(data, spec, 8, model_out=tmp_path / "d", checkpoint_dir=tmp_path / "d.ckpt", **kw)
    assert not other["value"].equals(a["value"]) or not other["train_loss"].equals(a["train_loss"])


@pytest.mark.slow
def test_checkpoint_of_another_config_is_ignored(data, table, tmp_path):
    folder = folder_for(table, "random", tmp_path)
    spec = train_spec(steps=4, eval_every=4)
    kw = dict(curriculum_dir=folder, progress=False)

    def stop(done: int) -> None:
        if done == 3:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        train_ranker(data, spec, 1, model_out=tmp_path / "m", checkpoint_dir=tmp_path / "ck", on_step=stop, **kw)
    assert (tmp_path / "ck" / "checkpoint.pt").exists()
    changed = train_spec(steps=4, eval_every=4, lr=2e-4)
    fresh = train_ranker(data, changed, 1, model_out=tmp_path / "m2", checkpoint_dir=tmp_path / "m2ck", **kw)
    resumed = train_ranker(data, changed, 1, model_out=tmp_path / "m", checkpoint_dir=tmp_path / "ck", **kw)
    assert resumed.equals(fresh)


@pytest.mark.slow
def test_early_stopping_records_why_and_resumes_after_a_kill(data, table, tmp_path):
    """max_steps is the budget, steps the curriculum's length (pacing reaches all instances there), patience counts
    evaluations after it; the curve marks the kept evaluation and why training ended; a kill resumes exactly."""
    folder = folder_for(table, "u_words", tmp_path)
    spec = train_spec(scoring="u_words", pacing={"name": "linear"}, ranker="convknrm",
                      architecture=SMALL["convknrm"], lr=1e-3, steps=4, max_steps=60, patience=2,
                      eval_every=2, checkpoint_every=2)
    kw = dict(curriculum_dir=folder, progress=False)
    a = train_ranker(data, spec, 3, model_out=tmp_path / "a", checkpoint_dir=tmp_path / "a.ckpt", **kw)
    steps = a["step"].to_list()
    assert a["stopped"].to_list() == [None] * (len(steps) - 1) + ["patience"] and steps[-1] < 60
    best = a.filter(pl.col("best"))
    assert best.height == 1 and best["value"][0] == a["value"].max()
    assert best["step"][0] == a.filter(pl.col("value") == a["value"].max())["step"].min()  # the first on ties
    after = [s for s in steps if s > max(best["step"][0], 4)]  # evaluations counted by patience
    assert len(after) == 2
    # the curriculum ends at `steps` (not at max_steps): every later evaluation allows all 40 train instances
    assert set(a.filter(pl.col("step") > 4)["allowed"]) == {40} and a["allowed"][0] < 40

    class Killed(Exception):
        pass

    def kill(done: int) -> None:
        if done == steps[-1] - 1:
            raise Killed

    with pytest.raises(Killed):
        train_ranker(data, spec, 3, model_out=tmp_path / "b", checkpoint_dir=tmp_path / "b.ckpt", on_step=kill, **kw)
    b = train_ranker(data, spec, 3, model_out=tmp_path / "b", checkpoint_dir=tmp_path / "b.ckpt", **kw)
    assert b.equals(a)
    from safetensors.torch import load_file

    wa, wb = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    budget_only = train_ranker(data, spec.with_fit(patience=None, max_steps=6), 3, model_out=tmp_path / "c",
                               checkpoint_dir=tmp_path / "c.ckpt", **kw)
    assert budget_only["step"].to_list() == [2, 4, 6] and budget_only["stopped"][-1] == "budget"


def pinned_training(data, table, tmp_path, **over) -> tuple[str, pl.DataFrame, dict[str, torch.Tensor]]:
    """A tiny training and a sha256 of its dev curve rows and kept weights (``over`` overrides its spec). The digest
    was checked equal before and after weight averaging and the diagnostic column existed (a58556b), but it is not
    pinned here: float bits differ between CPU classes (AVX2, AVX512), on which CI may run."""
    import hashlib

    from safetensors.torch import load_file

    spec = train_spec(ranker="convknrm", architecture=SMALL["convknrm"], lr=1e-3, steps=8,
                      eval_every=2, checkpoint_every=4, **over)
    curve = train_ranker(data, spec, 5, curriculum_dir=folder_for(table, "random", tmp_path), progress=False,
                         model_out=tmp_path / "m", checkpoint_dir=tmp_path / "m.ckpt")
    weights = load_file(tmp_path / "m" / "model.safetensors")
    digest = hashlib.sha256(repr(curve.select(list(DEV_CURVE.columns)).rows()).encode())
    for key in sorted(weights):
        digest.update(key.encode() + weights[key].numpy().tobytes())
    return digest.hexdigest(), curve, weights


@pytest.mark.slow
def test_the_default_training_is_the_training_with_idle_knobs(data, table, tmp_path):
    digest, curve, _ = pinned_training(data, table, tmp_path / "a")
    assert curve.columns == list(DEV_CURVE.columns) and curve["step"].to_list() == [2, 4, 6, 8]
    assert digest == pinned_training(data, table, tmp_path / "b", averaging="none", diagnostic_test=False)[0]


@pytest.mark.slow
def test_the_diagnostic_test_column_never_changes_selection_or_the_kept_model(data, table, tmp_path):
    """diagnostic_test records the test metric at every evaluation and nothing else: the same kept step, dev values,
    train losses and weights as without it, and the kept evaluation's test value is the kept model's test AP."""
    from curricula.experiments.train import dev_metric
    from curricula.models import load_ranker
    from curricula.models.runtime import start_job

    _, off, weights_off = pinned_training(data, table, tmp_path / "off")
    _, on, weights_on = pinned_training(data, table, tmp_path / "on", diagnostic_test=True)
    assert on.columns == [*DEV_CURVE_TEST.columns, "dev_query_values"] and on["test_value"].null_count() == 0
    # steps, dev values, train losses, the kept (best) row, the stop
    assert on.drop("test_value", "dev_query_values").equals(off)
    # each dev query's value at each evaluation (qid order), whose mean is the dev value that selected
    dev_queries = candidate_pairs(data, splits=("dev",))["qid"].n_unique()
    assert on["dev_query_values"].list.len().to_list() == [dev_queries] * on.height
    assert on["dev_query_values"].list.mean().to_list() == pytest.approx(on["value"].to_list(), abs=1e-12)
    assert weights_on.keys() == weights_off.keys() and all(torch.equal(weights_on[k], weights_off[k])
                                                           for k in weights_on)
    spec = train_spec(ranker="convknrm", architecture=SMALL["convknrm"])
    test = candidate_pairs(data, splits=("test",))
    kept = load_ranker(tmp_path / "on" / "m", device="cpu")
    runtime = start_job(spec.runtime, transformer=False, what="test")
    assert on.filter(pl.col("best"))["test_value"][0] == dev_metric(kept, test, data["qrels"], spec.evaluation,
                                                                    runtime)
    assert not on["test_value"].equals(on["value"])


@pytest.mark.slow
def test_a_diagnostic_run_with_shadow_averages_writes_their_columns_and_keeps_the_plain_model(data, table, tmp_path):
    """diagnostic_averages adds ema_/swa_ value and test_value columns to the diagnostic curve (its contract
    checked on write and read) and changes nothing of the trained run: its own columns and kept weights."""
    from curricula.plumbing.contracts import dev_curve_spec, read_dev_curve, write_table

    _, plain, weights_plain = pinned_training(data, table, tmp_path / "plain", max_steps=12, diagnostic_test=True)
    _, shadow, weights = pinned_training(data, table, tmp_path / "shadow", max_steps=12, diagnostic_test=True,
                                         diagnostic_averages=["ema", "swa"])
    extra = [f"{kind}_{key}" for kind in ("ema", "swa") for key in ("value", "test_value", "dev_query_values")]
    assert shadow.columns == [*DEV_CURVE_TEST.columns, "dev_query_values", *extra]
    assert shadow.drop(extra).equals(plain)
    assert shadow["swa_dev_query_values"].list.mean().to_list() == pytest.approx(shadow["swa_value"].to_list())
    assert all(torch.equal(weights[k], weights_plain[k]) for k in weights_plain)
    # before the averages start (the curriculum's end, step 8) they read the trained weights; after, their own
    early, late = shadow.filter(pl.col("step") < 8), shadow.filter(pl.col("step") > 8)
    assert early["swa_value"].equals(early["value"], check_names=False)
    assert late["swa_test_value"].to_list() != late["test_value"].to_list()
    write_table(shadow, tmp_path / "curve.parquet", dev_curve_spec(shadow.columns))
    assert read_dev_curve(tmp_path / "curve.parquet").equals(shadow)


@pytest.mark.slow
def test_weight_averaging_changes_only_evaluations_after_the_curriculum_and_resumes_after_a_kill(data, table,
                                                                                                 tmp_path):
    """SWA from the curriculum's end (step 8 of a 12-step budget): the evaluations at 2..6 are the plain run's; those
    at 8..12 evaluate the average; a killed run resumes (the checkpoint holds the average) to the same curve and
    kept weights."""
    _, plain, _ = pinned_training(data, table, tmp_path / "plain", max_steps=12)
    _, swa, weights = pinned_training(data, table, tmp_path / "swa", max_steps=12, averaging="swa")
    assert swa["step"].to_list() == plain["step"].to_list() == [2, 4, 6, 8, 10, 12]
    columns = ["step", "value", "train_loss", "allowed", "negatives_k"]
    assert swa.filter(pl.col("step") <= 6).select(columns).equals(plain.filter(pl.col("step") <= 6).select(columns))
    # step 8's average is the weights of step 8 alone; 10 and 12 average 2 and 3 evaluations' weights
    assert swa["value"][3] == plain["value"][3] and swa["value"][4:].to_list() != plain["value"][4:].to_list()
    assert swa["train_loss"].to_list() == plain["train_loss"].to_list()  # the average never steers training

    class Killed(Exception):
        pass

    def kill(done: int) -> None:
        if done == 11:
            raise Killed

    spec = train_spec(ranker="convknrm", architecture=SMALL["convknrm"], lr=1e-3, steps=8,
                      eval_every=2, checkpoint_every=4, max_steps=12, averaging="swa")
    kw = dict(curriculum_dir=folder_for(table, "random", tmp_path / "kill"), progress=False,
              model_out=tmp_path / "kill" / "m", checkpoint_dir=tmp_path / "kill" / "m.ckpt")
    with pytest.raises(Killed):
        train_ranker(data, spec, 5, on_step=kill, **kw)
    state = torch.load(tmp_path / "kill" / "m.ckpt" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 8 and state["average"]["kind"] == "swa" and state["average"]["count"] == 1
    resumed = train_ranker(data, spec, 5, **kw)
    assert resumed.equals(swa)
    from safetensors.torch import load_file

    again = load_file(tmp_path / "kill" / "m" / "model.safetensors")
    assert all(torch.equal(again[k], weights[k]) for k in weights)


def test_the_selection_knobs_stay_out_of_specs_while_idle_and_are_the_grids():
    from curricula.experiments.specs import active_spec, experiment_runs

    experiments = {"root2": {"scoring": "u_words", "pacing": {"name": "root_2"}}}
    before = experiment_specs({"train": TRAIN, "experiments": experiments})
    idle = experiment_specs({"train": {**TRAIN, "diagnostic_test": False, "averaging": "none", "ema_decay": 0.99},
                             "experiments": experiments})
    assert idle == before  # the schema's defaults: the same specs, params and checkpoint fingerprints as before
    on = experiment_specs({"train": {**TRAIN, "diagnostic_test": True, "averaging": "swa", "ema_decay": 0.99,
                                     "steps": 6, "max_steps": 20}, "experiments": experiments})
    assert all(params["diagnostic_test"] is True and params["averaging"] == "swa" and "ema_decay" not in params
               for params in map(spec_params, on.values()))  # ema_decay changes nothing under swa: out of the params
    assert {spec.fit.min_steps for spec in on.values()} == {6}  # averaging needs the grid's min_steps, patience or not
    ema = experiment_specs({"train": {**TRAIN, "averaging": "ema", "ema_decay": 0.99}, "experiments": {}})
    assert spec_params(ema["baseline"])["ema_decay"] == 0.99 and ema["baseline"].fit.min_steps == TRAIN["steps"]
    assert before["baseline"].fit.min_steps is None and spec_params(before["baseline"])["min_steps"] is None
    shadows = experiment_specs({"train": {**TRAIN, "diagnostic_test": True, "diagnostic_averages": ["ema", "swa"],
                                          "ema_decay": 0.99, "steps": 6, "max_steps": 20}, "experiments": experiments})
    # the shadow EMA reads ema_decay; the replays read min_steps
    assert all(params["diagnostic_averages"] == ["ema", "swa"] and params["ema_decay"] == 0.99
               and params["min_steps"] == 6 for params in map(spec_params, shadows.values()))
    assert experiment_specs({"train": {**TRAIN, "diagnostic_averages": []}, "experiments": experiments}) == before
    assert experiment_specs({"train": {**TRAIN, "keep": "best"}, "experiments": experiments}) == before
    last = experiment_specs({"train": {**TRAIN, "keep": "last", "patience": None}, "experiments": experiments})
    assert {spec_params(spec)["keep"] for spec in last.values()} == {"last"}
    with pytest.raises(ValueError, match="experiments.baseline: train.keep last with patience=2: early stopping "
                                         "selects a model on dev"):
        experiment_runs({"train": {**TRAIN, "keep": "last", "patience": 2}, "experiments": experiments})
    for key, value in (("averaging", "ema"), ("diagnostic_test", True), ("diagnostic_averages", ["swa"]),
                       ("keep", "last")):
        with pytest.raises(ValueError, match=f"experiments.root2.{key}: every arm of a grid is selected alike"):
            experiment_runs({"train": TRAIN, "experiments": {"root2": {**experiments["root2"], key: value}}})
    with pytest.raises(ValueError, match="min_steps=12 is above max_steps=6"):
        experiment_specs({"train": {**TRAIN, "averaging": "swa", "min_steps": 12}, "experiments": {}})
    # the active-learning ranker keeps its own selection: the grid's knobs in `train` are not its
    config = {"train": {**TRAIN, "averaging": "ema", "diagnostic_test": True, "keep": "last"}, "active": {}}
    assert not {"averaging", "diagnostic_test", "ema_decay", "keep"} & set(spec_params(active_spec(config)))

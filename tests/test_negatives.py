"""The negative sampler (curricula.curriculum.negatives) on a few real chitchat instances: random, candidate,
neighbour and BM25 negatives are never relevant and come from the allowed window, ranked lists are read lazily by row
group, and the false-negative guard never draws above its ratio of the true reply's score, leaves every draw as it
was when null, and is checked in the specs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from curricula.experiments.spec import spec_params
from curricula.experiments.specs import experiment_specs, needed_tables
from curricula.plumbing.contracts import NEIGHBORS, RUN
from curricula.plumbing.row_groups import write_grouped_table
from tests.train_data import TRAIN, guard_fixture, relevant_of, sampler, train_pool, train_qids
from tests.train_data import data  # noqa: F401 (a module-scoped fixture: pytest finds it here)


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

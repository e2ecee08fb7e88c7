"""Scatter/gather shards: the cuts cover every row once, and gathered shards equal the unsharded table bitwise."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from curricula.models import build_ranker, score_pair_rows, score_pairs
from curricula.plumbing.contracts import CANDIDATE_SCORES, DOCS, VECTORS, read_table, write_table
from curricula.plumbing.errors import SchemaError
from curricula.plumbing.shards import (
    WHOLE,
    Shard,
    batch_shard,
    block,
    gather_tables,
    length_batches,
    parse_scatteritem,
    shard_rows,
)
from curricula.retrieval.dense import encode
from curricula.stages.common import gather_table
from curricula.stages.dense import gather_vectors
from curricula.training.spec import RankerSpec


def test_parse_scatteritem_is_one_based_like_snakemake():
    assert parse_scatteritem("1-of-1") == WHOLE
    assert parse_scatteritem("3-of-4") == Shard(2, 4)
    assert parse_scatteritem(None) == WHOLE
    for bad in ("0-of-4", "5-of-4", "1of4", "a-of-b", "1-of-0"):
        with pytest.raises(ValueError, match="expected"):
            parse_scatteritem(bad)


@pytest.mark.parametrize("n", [0, 1, 3, 10, 17])
@pytest.mark.parametrize("count", [1, 2, 4, 7])
def test_blocks_cover_every_row_once_in_order(n, count):
    rows = np.concatenate([np.arange(n)[block(n, Shard(i, count))] for i in range(count)])
    assert rows.tolist() == list(range(n))
    sizes = [len(range(n)[block(n, Shard(i, count))]) for i in range(count)]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_batches_are_sorted_by_length_and_shards_take_whole_batches():
    lengths = [5, 1, 9, 3, 3, 7, 2]
    batches = length_batches(lengths, 3)
    assert [b.tolist() for b in batches] == [[1, 6, 3], [4, 0, 5], [2]]
    assert [b.tolist() for b in length_batches(lengths, 3, longest_first=True)][0] == [2, 5, 0]
    parts = [batch_shard(batches, Shard(i, 2)) for i in range(2)]
    assert [[b.tolist() for b in p] for p in parts] == [[[1, 6, 3], [4, 0, 5]], [[2]]]
    assert shard_rows(parts[0]).tolist() == [0, 1, 3, 4, 5, 6]
    assert shard_rows(batch_shard(batches, Shard(3, 4))).tolist() == []  # more shards than batches: empty
    with pytest.raises(ValueError, match="batch_size"):
        length_batches(lengths, 0)


TEXTS = ["a glacier cave", "how are glacier caves formed? " * 4, "", "ok", "ice facade", "the titlis glacier",
         "a long " * 20, "x"]
IDS = [f"t{i}" for i in range(len(TEXTS))]


def test_sharded_encoding_gathers_to_the_unsharded_vectors_bitwise(tmp_path):
    whole = encode(TEXTS, IDS, "minilm", layers=1, batch_size=2, progress=False)
    paths = []
    for i in range(3):
        part = encode(TEXTS, IDS, "minilm", layers=1, batch_size=2, progress=False, shard=Shard(i, 3))
        paths.append(write_table(part, tmp_path / f"v{i}.parquet", VECTORS))
    docs = write_table(pl.DataFrame({"docid": IDS, "text": TEXTS}), tmp_path / "docs.parquet", DOCS)
    gather_vectors({"shards": paths, "table": docs}, {"vectors": tmp_path / "all.parquet"}, kind="docs")
    assert read_table(tmp_path / "all.parquet", VECTORS).equals(whole)
    # a lost shard is an error naming the shard files, never a table with holes
    with pytest.raises(ValueError, match="missing"):
        gather_vectors({"shards": paths[:2], "table": docs}, {"vectors": tmp_path / "bad.parquet"}, kind="docs")
    assert not (tmp_path / "bad.parquet").exists()


def test_sharded_scoring_equals_unsharded_logits_bitwise():
    ranker = build_ranker(RankerSpec(ranker="cross_encoder", model="minilm", layers=1, max_length=32), seed=1)
    contexts, responses = TEXTS * 2, list(reversed(TEXTS)) * 2
    whole = score_pairs(ranker, contexts, responses, batch_size=3, progress=False)
    rows, scores = [], []
    for i in range(4):
        r, s = score_pair_rows(ranker, contexts, responses, batch_size=3, progress=False, shard=Shard(i, 4))
        rows.append(r)
        scores.append(s)
    rows = np.concatenate(rows)
    assert sorted(rows.tolist()) == list(range(len(contexts)))
    assert np.array_equal(np.concatenate(scores)[np.argsort(rows)], whole)


def test_gather_sorts_and_rejects_overlapping_shards(tmp_path):
    a = pl.DataFrame({"qid": ["q2", "q2"], "docid": ["d2", "d1"], "score": [1.0, 2.0]})
    b = pl.DataFrame({"qid": ["q1"], "docid": ["d9"], "score": [0.5]})
    paths = [write_table(f, tmp_path / f"s{i}.parquet", CANDIDATE_SCORES) for i, f in enumerate((a, b))]
    gather_table({"shards": paths}, tmp_path / "out.parquet", table="candidate_scores")
    out = read_table(tmp_path / "out.parquet", CANDIDATE_SCORES)
    assert out.rows() == [("q1", "d9", 0.5), ("q2", "d1", 2.0), ("q2", "d2", 1.0)]
    dup = write_table(a.head(1), tmp_path / "dup.parquet", CANDIDATE_SCORES)
    with pytest.raises(SchemaError, match="duplicate key"):
        gather_tables([paths[0], dup], CANDIDATE_SCORES, ["qid", "docid"])
    with pytest.raises(ValueError, match="no shard files"):
        gather_tables([], CANDIDATE_SCORES, ["qid"])


def test_cross_fitted_teacher_scoring_refuses_shards(tmp_path):
    """folds > 1 trains the fold teachers inside the scoring job: sharding it would train them once per shard."""
    from curricula.stages.teacher import teacher_score_shard
    from curricula.plumbing.contracts import CANDIDATES, QRELS, QUERIES

    data = {
        "queries": write_table(pl.DataFrame({"qid": ["q1"], "split": ["train"], "text": ["hi"], "turns": [["hi"]],
                                             "domain": [None]}, schema_overrides={"domain": pl.String}),
                               tmp_path / "queries.parquet", QUERIES),
        "docs": write_table(pl.DataFrame({"docid": ["d1"], "text": ["hello"]}), tmp_path / "docs.parquet", DOCS),
        "qrels": write_table(pl.DataFrame({"qid": ["q1"], "docid": ["d1"], "rel": [1]}), tmp_path / "qrels.parquet",
                             QRELS),
        "candidates": write_table(pl.DataFrame({"qid": ["q1"], "docid": ["d1"]}), tmp_path / "cands.parquet",
                                  CANDIDATES),
    }
    with pytest.raises(ValueError, match="shards.teacher to 1"):
        teacher_score_shard({**data, "model": tmp_path / "no-model"}, {"scores": tmp_path / "out.parquet"},
                            teacher={"folds": 2}, seed=42, scatteritem="1-of-2")
    assert not (tmp_path / "out.parquet").exists()

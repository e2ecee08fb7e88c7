"""The Parquet contracts (curricula.plumbing.contracts, curricula.plumbing.row_groups): exact checks on write and
read, atomic writes, byte-identical output."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from curricula.plumbing.contracts import (
    NEIGHBORS,
    QRELS,
    QUERIES,
    RUN,
    VECTORS,
    check_table,
    read_table,
    write_table,
    write_trec_run,
)
from curricula.plumbing.row_groups import KeyedRowGroups, iter_row_groups, write_grouped_table
from curricula.plumbing.errors import SchemaError


def qrels(**cols):
    base = {"qid": ["q1", "q2"], "docid": ["d1", "d2"], "rel": [1, 0]}
    base.update(cols)
    return pl.DataFrame(base, schema_overrides={"rel": pl.Int32})


def test_write_then_read_roundtrip(tmp_path):
    path = write_table(qrels(), tmp_path / "sub" / "qrels.parquet", QRELS)
    assert read_table(path, QRELS).equals(qrels())
    assert oct(os.stat(path).st_mode & 0o777) != oct(0o600)
    assert [p.name for p in path.parent.iterdir()] == ["qrels.parquet"]


def test_write_casts_and_orders_columns(tmp_path):
    df = pl.DataFrame({"rel": [1], "docid": ["d"], "qid": ["q"], "extra": [0]})  # rel is Int64 here
    out = read_table(write_table(df, tmp_path / "q.parquet", QRELS), QRELS)
    assert out.columns == ["qid", "docid", "rel"] and out.schema["rel"] == pl.Int32


def test_same_rows_give_same_bytes(tmp_path):
    a = write_table(qrels(), tmp_path / "a.parquet", QRELS).read_bytes()
    b = write_table(qrels(), tmp_path / "b.parquet", QRELS).read_bytes()
    assert a == b


@pytest.mark.parametrize(
    "df, message",
    [
        (pl.DataFrame({"qid": ["q"], "rel": [1], "docid": ["d"]}), "has columns"),
        (pl.DataFrame({"qid": ["q"], "docid": ["d"], "rel": ["1"]}), "column 'rel' of 'qrels' has type String"),
        (qrels(docid=["d1", None]), "column 'docid' of 'qrels' has 1 null"),
        (qrels(qid=["q1", "q1"], docid=["d1", "d1"]), "duplicate key {'qid': 'q1', 'docid': 'd1'}"),
    ],
)
def test_check_names_the_problem(df, message):
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace("{", r"\{")):
        check_table(df, QRELS, "some.parquet")


def test_allowed_values_and_nullable():
    queries = pl.DataFrame(
        {"qid": ["a"], "split": ["valid"], "text": ["t"], "turns": [["t"]], "domain": [None]},
        schema_overrides={"domain": pl.String},
    )
    with pytest.raises(SchemaError, match="'split' of 'queries' has value 'valid'"):
        check_table(queries, QUERIES, "x")
    check_table(queries.with_columns(split=pl.lit("dev")), QUERIES, "x")  # null domain is allowed


def test_vector_contract_accepts_any_width():
    df = pl.DataFrame({"id": ["a", "b"], "vector": [[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]]},
                      schema={"id": pl.String, "vector": pl.Array(pl.Float32, 3)})
    check_table(df, VECTORS, "v")
    with pytest.raises(SchemaError, match="expected Array"):
        check_table(df.with_columns(pl.col("vector").cast(pl.List(pl.Float64))), VECTORS, "v")


def test_failed_write_leaves_nothing(tmp_path):
    bad = pl.DataFrame({"qid": ["q"], "docid": ["d"], "rank": ["x"], "score": [1.0]})
    with pytest.raises(Exception):
        write_table(bad, tmp_path / "n.parquet", NEIGHBORS)
    assert list(tmp_path.iterdir()) == []


def test_interrupted_write_keeps_old_file_and_no_temp(tmp_path, monkeypatch):
    path = write_table(qrels(), tmp_path / "q.parquet", QRELS)
    before = path.read_bytes()

    def boom(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pl.DataFrame, "write_parquet", boom)
    with pytest.raises(KeyboardInterrupt):
        write_table(qrels(rel=[0, 0]), path, QRELS)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["q.parquet"]


def test_read_missing_table_says_which(tmp_path):
    with pytest.raises(FileNotFoundError, match="table 'qrels' not found"):
        read_table(tmp_path / "nope.parquet", QRELS)


def test_a_write_removes_temporaries_a_killed_writer_left(tmp_path):
    """SIGKILL skips cleanup: the next write of the same table removes the stale temporaries, and only those."""
    from curricula.plumbing.atomic import write_dir_atomically
    from curricula.plumbing.contracts import CANDIDATES, write_table

    target = tmp_path / "candidates.parquet"
    stale_file = tmp_path / ".candidates.parquet.k3j2.tmp"
    stale_file.write_bytes(b"PAR1 half")
    stale_dir = tmp_path / ".candidates.parquet.x9.tmp"
    stale_dir.mkdir()
    (stale_dir / "part").write_text("x")
    other = tmp_path / ".other.parquet.a1.tmp"
    other.write_text("not ours")
    write_table(pl.DataFrame({"qid": ["q"], "docid": ["d"]}), target, CANDIDATES)
    assert not stale_file.exists() and not stale_dir.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.parquet.a1.tmp", "candidates.parquet"]
    (tmp_path / ".model.zz.tmp").mkdir()
    write_dir_atomically(tmp_path / "model", lambda d: (d / "w").write_text("1"))
    assert not (tmp_path / ".model.zz.tmp").exists() and (tmp_path / "model" / "w").read_text() == "1"


def test_write_trec_run(tmp_path):
    run = pl.DataFrame({"qid": ["q2", "q1", "q1", "q1"], "docid": ["a", "c", "b", "a"], "rank": [1, 3, 2, 1],
                        "score": [1 / 3, 0.1 + 0.2, 2.5, 2.5]})
    path = write_trec_run(run, tmp_path / "bm25.run", tag="bm25")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["q1 Q0 a 1 2.5 bm25", "q1 Q0 b 2 2.5 bm25"]  # by qid, then rank
    parsed = pl.DataFrame([line.split(" ") for line in lines], schema=["qid", "q0", "docid", "rank", "score", "tag"],
                          orient="row")
    assert set(parsed["q0"]) == {"Q0"} and set(parsed["tag"]) == {"bm25"}
    back = parsed.select("qid", "docid", pl.col("rank").cast(pl.Int32), pl.col("score").cast(pl.Float64))
    assert back.equals(check_table(run.cast({"rank": pl.Int32}), RUN, "run").sort("qid", "rank"))  # scores round-trip
    assert oct(os.stat(path).st_mode & 0o777) != oct(0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["bm25.run"]
    bad = run.head(1).with_columns(docid=pl.lit("has space"))
    with pytest.raises(ValueError, match="whitespace"):
        write_trec_run(bad, tmp_path / "bad.run", tag="bm25")
    with pytest.raises(ValueError, match="run tag"):
        write_trec_run(run, tmp_path / "bad.run", tag="bm 25")
    assert [p.name for p in tmp_path.iterdir()] == ["bm25.run"]


# ------------------------------------------------------------------------------ query-keyed tables in row groups
def ranked(n_queries: int, seed: int = 0) -> pl.DataFrame:
    """A NEIGHBORS-shaped table: 1..9 rows per query (qids sorted), ranks 1..n."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 10, n_queries)
    qids = [f"q{i:03d}" for i, c in enumerate(counts) for _ in range(c)]
    ranks = [r + 1 for c in counts for r in range(c)]
    return pl.DataFrame({"qid": qids, "docid": [f"d{r}" for r in ranks], "rank": ranks,
                         "score": rng.random(len(qids))}).with_columns(pl.col("rank").cast(pl.Int32),
                                                                         pl.col("score").cast(pl.Float32))


def test_grouped_table_is_the_same_file_whatever_frames_it_arrives_in(tmp_path):
    df = ranked(40)
    whole = tmp_path / "whole.parquet"
    assert write_grouped_table([df], whole, NEIGHBORS, by="qid", size=6) == df.height
    cuts = [0, 1, 17, 18, 100, 101, df.height]  # cuts inside queries too: a query's rows may arrive in two frames
    parts = tmp_path / "parts.parquet"
    write_grouped_table((df.slice(a, b - a) for a, b in zip(cuts, cuts[1:])), parts, NEIGHBORS, by="qid", size=6)
    assert whole.read_bytes() == parts.read_bytes()
    assert read_table(whole, NEIGHBORS).equals(df)
    meta = pq.ParquetFile(whole).metadata
    assert meta.num_row_groups == 7  # 40 queries, 6 per group
    sizes = [pl.from_arrow(pq.ParquetFile(whole).read_row_group(i))["qid"].n_unique() for i in range(7)]
    assert sizes == [6] * 6 + [4]
    assert list(iter_row_groups(whole, NEIGHBORS))[3].equals(df.filter(pl.col("qid").is_in(
        [f"q{i:03d}" for i in range(18, 24)])))


def test_grouped_table_refuses_unsorted_rows_and_leaves_nothing(tmp_path):
    df = ranked(10)
    out = tmp_path / "n.parquet"
    with pytest.raises(ValueError, match="not sorted by 'qid'"):
        write_grouped_table([df.slice(20), df.slice(0, 20)], out, NEIGHBORS, by="qid", size=3)
    assert not list(tmp_path.iterdir())
    dup = pl.concat([df.head(1), df.head(1)])
    with pytest.raises(SchemaError, match="duplicate key"):
        write_grouped_table([dup], out, NEIGHBORS, by="qid", size=3)
    with pytest.raises(ValueError, match="part of its key"):
        write_grouped_table([df], out, NEIGHBORS, by="rank", size=3)
    assert not list(tmp_path.iterdir())


def test_keyed_row_groups_read_only_the_groups_of_a_key(tmp_path):
    df = ranked(30, seed=2)
    path = tmp_path / "n.parquet"
    write_grouped_table([df], path, NEIGHBORS, by="qid", size=4)
    reader = KeyedRowGroups(path, NEIGHBORS, cache=2)
    assert reader.num_row_groups == 8 and reader.groups_read == 0
    assert reader.rows("q013").equals(df.filter(pl.col("qid") == "q013"))
    assert reader.groups_of("q013") == [3] and reader.groups_read == 1
    assert reader.rows("q012").height and reader.groups_read == 1  # same group: from the cache
    assert reader.rows("nope").height == 0 and reader.groups_read == 1
    uncached = KeyedRowGroups(path, NEIGHBORS, cache=0)  # a caller with its own cache (LazyRankedLists)
    assert uncached.rows("q013").equals(reader.rows("q013")) and uncached.rows("q012").height
    assert uncached.groups_read == 2
    # a file written by another writer may hold a key in two row groups: both are read
    other = tmp_path / "other.parquet"
    df.write_parquet(other, row_group_size=7, statistics=True)
    spans = KeyedRowGroups(other, NEIGHBORS)
    key = df["qid"][6]  # row 6 and 7 are in different groups when the query has rows on both sides
    assert spans.rows(key).equals(df.filter(pl.col("qid") == key))
    df.reverse().write_parquet(other, row_group_size=7, statistics=True)
    with pytest.raises(SchemaError, match="not sorted by 'qid'"):
        KeyedRowGroups(other, NEIGHBORS)


def test_read_table_columns_checks_the_file_and_reads_only_those(tmp_path):
    df = ranked(5)
    write_table(df, tmp_path / "n.parquet", NEIGHBORS)
    part = read_table(tmp_path / "n.parquet", NEIGHBORS, columns=["qid", "rank"])
    assert part.columns == ["qid", "rank"] and part.equals(df.select("qid", "rank"))
    with pytest.raises(SchemaError, match="expected Float64"):
        read_table(tmp_path / "n.parquet", RUN, columns=["qid", "rank"])  # the file is not a run (score Float32)
    with pytest.raises(ValueError, match="no column"):
        read_table(tmp_path / "n.parquet", NEIGHBORS, columns=["qid", "text"])


def test_trec_run_from_row_groups_equals_the_whole_frame(tmp_path):
    run = ranked(12).with_columns(pl.col("score").cast(pl.Float64))
    write_grouped_table([run], tmp_path / "run.parquet", RUN, by="qid", size=5)
    write_trec_run(run, tmp_path / "whole.trec", "t")
    write_trec_run(iter_row_groups(tmp_path / "run.parquet", RUN), tmp_path / "groups.trec", "t")
    assert (tmp_path / "whole.trec").read_bytes() == (tmp_path / "groups.trec").read_bytes()

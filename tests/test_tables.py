"""The Parquet contracts: exact checks on write and read, atomic writes, byte-identical output."""

from __future__ import annotations

import os

import polars as pl
import pytest

from curricula.errors import SchemaError
from curricula.tables import (
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
    from curricula.tables import CANDIDATES, write_dir_atomically, write_table

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

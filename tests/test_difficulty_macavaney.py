"""MacAvaney et al. 2020 eq. 5-11 (curricula.difficulty.macavaney) against hand-computed values and scipy's KDE."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy.stats import gaussian_kde

from curricula.difficulty import macavaney as mac


def scipy_cdf(ref: np.ndarray, x: float) -> float:
    return float(gaussian_kde(ref).integrate_box_1d(-np.inf, x))


def erf_cdf(ref: list[float], x: float) -> float:
    """The Gaussian KDE CDF written out: Scott's h = std(ddof 1) * n^(-1/5), mean of Phi((x - x_j) / h)."""
    n = len(ref)
    mean = sum(ref) / n
    h = math.sqrt(sum((r - mean) ** 2 for r in ref) / (n - 1)) * n ** (-1 / 5)
    return sum(0.5 * (1 + math.erf((x - r) / (h * math.sqrt(2)))) for r in ref) / n


# ------------------------------------------------------------------------------------------- primitives
def test_reciprocal_rank_eq5():
    got = mac.reciprocal_rank([1, 2, 4, None, 0, float("nan")])
    assert got.tolist() == [1.0, 0.5, 0.25, 0.0, 0.0, 0.0]
    assert mac.reciprocal_rank(pl.Series([3, None], dtype=pl.Int32)).tolist() == [1 / 3, 0.0]
    with pytest.raises(ValueError, match="negative"):
        mac.reciprocal_rank([1, -2])


def test_minmax_norm_clips_and_handles_flat_lists():
    got = mac.minmax_norm([10.0, 8.0, 4.0, 2.0, 12.0], 4.0, 10.0)
    assert got.tolist() == pytest.approx([1.0, 2 / 3, 0.0, 0.0, 1.0], abs=1e-15)
    # max == min: ties-or-above the only score -> 1, below -> 0
    assert mac.minmax_norm([5.0, 6.0, 4.9], [5.0, 5.0, 5.0], [5.0, 5.0, 5.0]).tolist() == [1.0, 1.0, 0.0]
    # per-row bounds; NaN score or unknown bounds propagate as NaN
    got = mac.minmax_norm([1.0, np.nan, 3.0], [0.0, 0.0, np.nan], [2.0, 2.0, np.nan])
    assert got[0] == 0.5 and np.isnan(got[1]) and np.isnan(got[2])


def test_pointwise_pairwise_and_difficulty_eq6_to_11():
    h = np.array([1.0, 1.0, 0.0, 0.25])
    rel = np.array([True, False, False, True])
    # relevant at rank 1 -> D 1 (easy); non-relevant at rank 1 -> 0 (hard); non-relevant unretrieved -> 1
    assert mac.pointwise(h, rel).tolist() == [1.0, 0.0, 1.0, 0.25]
    assert mac.difficulty_from_ease(mac.pointwise(h, rel)).tolist() == [0.0, 1.0, 0.0, 0.75]
    # d+ at rank 1 vs d- at rank 2: (1 - 1/2 + 1) / 2; d+ unretrieved vs d- at rank 2: (0 - 1/2 + 1) / 2
    assert mac.pairwise(np.array([1.0, 0.0, 0.3]), np.array([0.5, 0.5, 0.3])).tolist() == [0.75, 0.25, 0.5]
    assert mac.pairwise(1.0, 0.0) == 1.0 and mac.pairwise(0.0, 1.0) == 0.0
    # polars Series and expressions give the same numbers
    s = mac.pointwise(pl.Series("h", h), pl.Series(rel))
    assert s.name == "h" and s.to_list() == [1.0, 0.0, 1.0, 0.25]
    frame = pl.DataFrame({"h": h, "rel": rel}).select(mac.pointwise(pl.col("h"), pl.col("rel")).alias("d"))
    assert frame["d"].to_list() == [1.0, 0.0, 1.0, 0.25]
    assert mac.pairwise(pl.Series([1.0]), pl.Series([0.5])).to_list() == [0.75]


# ------------------------------------------------------------------------------------------- KDE
def test_kde_cdf_equals_scipy_on_random_groups_of_2_to_150():
    rng = np.random.default_rng(7)
    sizes = np.concatenate([[2, 3, 150], rng.integers(2, 151, size=27)])
    refs = [rng.gamma(shape=2.0 + i % 3, scale=1.0 + i, size=s) + rng.normal(0, 5) for i, s in enumerate(sizes)]
    ref_values = np.concatenate(refs)
    ref_groups = np.repeat([f"q{i}" for i in range(len(sizes))], sizes)
    perm = rng.permutation(ref_values.size)  # references need not be grouped or sorted
    # evaluation points: every reference score, plus points in and far outside each group's range
    val_groups, values = [], []
    for i, r in enumerate(refs):
        extra = np.concatenate([r, rng.uniform(r.min() - 3 * r.std(), r.max() + 3 * r.std(), size=20),
                                [r.min() - 1e3, r.max() + 1e3]])
        values.append(extra)
        val_groups += [f"q{i}"] * extra.size
    values = np.concatenate(values)
    order = rng.permutation(values.size)
    values, val_groups = values[order], np.array(val_groups)[order]

    got = mac.kde_cdf(values, val_groups, ref_values[perm], ref_groups[perm], chunk_rows=97)
    expected = np.array([scipy_cdf(refs[int(g[1:])], v) for v, g in zip(values, val_groups)])
    assert got.shape == values.shape and np.isfinite(got).all()
    assert np.abs(got - expected).max() < 1e-9
    assert np.array_equal(got, mac.kde_cdf(values, val_groups, ref_values[perm], ref_groups[perm], chunk_rows=1))


def test_kde_cdf_equals_scipy_on_bm25_like_lists():
    # a BM25 top-k with a few high scores, a long flat tail and tied scores (cf. the paper's Figure 2a)
    q1 = [50.7211, 47.7075, 38.8433, 38.6889, 38.5592, 37.8726, 36.5659, 36.4361, 36.3571, 35.9309, 35.1551,
          34.8328, 34.73, 34.4367, 34.1918, 33.9593, 33.6791, 33.6692, 33.5, 33.3216, 33.278, 32.9977, 32.9702,
          32.493, 32.4313, 32.3253, 31.9629, 31.9318, 31.9188, 31.8754, 31.8446, 31.7637, 31.7425, 31.7425,
          31.7425, 31.7195, 31.6523, 31.6352, 31.6193, 31.3474]
    q2 = [21.02, 19.87, 16.4, 16.4, 15.93, 15.5, 15.49, 15.12, 14.88, 14.88, 14.2, 13.91, 13.9, 13.75, 13.1]
    ref = pl.DataFrame({"qid": ["q1"] * len(q1) + ["q2"] * len(q2), "score": q1 + q2})
    values = pl.Series([*q1, 20.0, 60.0, *q2, 5.0, 0.0])
    groups = pl.Series(["q1"] * (len(q1) + 2) + ["q2"] * (len(q2) + 2))
    got = mac.kde_cdf(values, groups, ref["score"], ref["qid"])
    expected = [scipy_cdf(np.array(q1 if g == "q1" else q2), v) for v, g in zip(values, groups)]
    assert np.abs(got - np.array(expected)).max() < 1e-9
    assert got[0] == pytest.approx(erf_cdf(q1, q1[0]), abs=1e-12)
    # monotone in the score within a query, and the tied scores get identical values
    assert got[1] < got[0] and got[32] == got[33] == got[34]


def test_kde_cdf_degenerate_and_unknown_groups():
    # scipy refuses both: one score, and zero spread
    with pytest.raises(ValueError):
        gaussian_kde(np.array([5.0]))
    with pytest.raises(np.linalg.LinAlgError):
        gaussian_kde(np.array([2.0, 2.0, 2.0]))
    got = mac.kde_cdf(
        [4.0, 5.0, 6.0, 1.9, 2.0, 2.1, 3.0, 3.0, np.nan, np.inf, -np.inf],
        ["one", "one", "one", "flat", "flat", "flat", "unknown", None, "flat", "two", "two"],
        [5.0, 2.0, 2.0, 2.0, 0.0, 1.0, np.nan], ["one", "flat", "flat", "flat", "two", "two", "two"],
    )
    assert got[:6].tolist() == [0.0, 0.5, 1.0, 0.0, 0.5, 1.0]
    assert np.isnan(got[6:9]).all()  # unknown group, null group, NaN value
    assert got[9:].tolist() == [1.0, 0.0]
    assert np.isnan(mac.kde_cdf([1.0], ["a"], [], [])).all()
    assert mac.kde_cdf([], [], [1.0, 2.0], ["a", "a"]).shape == (0,)
    with pytest.raises(ValueError, match="chunk_rows"):
        mac.kde_cdf([1.0], ["a"], [1.0, 2.0], ["a", "a"], chunk_rows=0)


# ------------------------------------------------------------------------------------------- frame level
REFERENCE = pl.DataFrame({"qid": ["q1", "q1", "q1", "q1", "q2", "q1"], "score": [10.0, 8.0, 6.0, 4.0, 5.0, None]})
PAIRS = pl.DataFrame(
    {
        "qid": ["q2", "q1", "q3", "q1", "q1", "q1", "q1"],
        "docid": ["d7", "d2", "d8", "d1", "d5", "d3", "d4"],
        "rel": [0, 0, 1, 1, 1, 0, 0],
        "score": [5.0, 8.0, 3.0, 10.0, 2.0, 4.0, None],
        "rank": [1, 2, None, 1, None, 4, None],
        "extra": ["a", "b", "c", "d", "e", "f", "g"],
    },
    schema_overrides={"rel": pl.Int32, "rank": pl.Int32},
)
Q1 = [10.0, 8.0, 6.0, 4.0]


def test_macavaney_heuristics_hand_computed():
    out = mac.macavaney_heuristics(PAIRS, REFERENCE)
    assert out.columns == [*PAIRS.columns, "recip", "recip_point", "norm", "norm_point", "kde", "kde_point"]
    assert all(out.schema[c] == pl.Float64 for c in out.columns[6:])
    assert out.select(PAIRS.columns).equals(PAIRS)  # row order and input columns kept
    rows = {r["docid"]: r for r in out.iter_rows(named=True)}

    # d1: relevant at rank 1 with the top score -> easy (D = 1)
    assert (rows["d1"]["recip"], rows["d1"]["recip_point"]) == (1.0, 1.0)
    assert (rows["d1"]["norm"], rows["d1"]["norm_point"]) == (1.0, 1.0)
    # d2: non-relevant at rank 2, score 8 of [4, 10] -> norm 2/3, D = 1/3
    assert (rows["d2"]["recip"], rows["d2"]["recip_point"]) == (0.5, 0.5)
    assert rows["d2"]["norm"] == pytest.approx(2 / 3) and rows["d2"]["norm_point"] == pytest.approx(1 / 3)
    # d3: non-relevant at rank 4, the lowest score -> norm 0, D = 1 (easy negative)
    assert (rows["d3"]["recip_point"], rows["d3"]["norm"], rows["d3"]["norm_point"]) == (0.75, 0.0, 1.0)
    # d4: non-relevant, not retrieved, no score -> everything 0, D = 1 (easy)
    assert [rows["d4"][c] for c in out.columns[6:]] == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    # d5: relevant, not retrieved, score 2 below the list -> recip 0 and norm 0 (hardest), but KDE > 0 from its score
    assert (rows["d5"]["recip_point"], rows["d5"]["norm_point"]) == (0.0, 0.0)
    assert 0.0 < rows["d5"]["kde"] < 0.1 and rows["d5"]["kde_point"] == rows["d5"]["kde"]
    assert rows["d5"]["kde"] == pytest.approx(erf_cdf(Q1, 2.0), abs=1e-12)
    assert rows["d5"]["kde"] == pytest.approx(scipy_cdf(np.array(Q1), 2.0), abs=1e-9)
    for d, s in (("d1", 10.0), ("d2", 8.0), ("d3", 4.0)):
        assert rows[d]["kde"] == pytest.approx(scipy_cdf(np.array(Q1), s), abs=1e-9)
    assert rows["d2"]["kde_point"] == pytest.approx(1 - scipy_cdf(np.array(Q1), 8.0), abs=1e-9)
    # d7: non-relevant at rank 1 of a one-doc list -> recip and norm D = 0 (hard); KDE step -> 0.5
    assert [rows["d7"][c] for c in out.columns[6:]] == [1.0, 0.0, 1.0, 0.0, 0.5, 0.5]
    # d8: query without a ranked list -> recip 0, norm and kde null
    assert (rows["d8"]["recip"], rows["d8"]["recip_point"]) == (0.0, 0.0)
    assert [rows["d8"][c] for c in ("norm", "norm_point", "kde", "kde_point")] == [None] * 4

    # pairwise (eq. 7 / 9) on the rows' h: d1 vs d2, d5 vs d2, d2 vs itself
    assert mac.pairwise(rows["d1"]["recip"], rows["d2"]["recip"]) == 0.75
    assert mac.pairwise(rows["d5"]["recip"], rows["d2"]["recip"]) == 0.25
    assert mac.pairwise(rows["d1"]["norm"], rows["d2"]["norm"]) == pytest.approx(2 / 3)
    assert mac.pairwise(rows["d2"]["kde"], rows["d2"]["kde"]) == 0.5


def test_macavaney_heuristics_relevant_min_and_errors():
    out = mac.macavaney_heuristics(PAIRS, REFERENCE, relevant_min=2)
    d1 = out.filter(pl.col("docid") == "d1").row(0, named=True)
    assert (d1["recip_point"], d1["norm_point"]) == (0.0, 0.0)  # grade 1 is now non-relevant: rank 1 = hard
    with pytest.raises(ValueError, match="missing column"):
        mac.macavaney_heuristics(PAIRS.drop("rank"), REFERENCE)
    with pytest.raises(ValueError, match="null rel"):
        mac.macavaney_heuristics(PAIRS.with_columns(pl.lit(None, pl.Int32).alias("rel")), REFERENCE)


def test_heuristic_subsets_and_difficulty_from_ease():
    full = mac.macavaney_heuristics(PAIRS, REFERENCE)
    for h in mac.HEURISTICS:
        part = mac.macavaney_heuristics(PAIRS, REFERENCE, heuristics=(h,))
        assert part.columns == [*PAIRS.columns, h, f"{h}_point"]
        assert part.equals(full.select(part.columns))
    with pytest.raises(ValueError, match="unknown heuristic"):
        mac.macavaney_heuristics(PAIRS, REFERENCE, heuristics=("bm25",))
    # the registered function: raw = h, difficulty = 1 - D_point, over the candidates' own BM25 list
    pairs = PAIRS.filter(pl.col("score").is_not_null()).select("qid", "docid", "rel")
    scores = PAIRS.filter(pl.col("score").is_not_null()).select("qid", "docid", "score")
    got = mac.heuristic_difficulty(pairs, scores, None, "candidates", "recip")
    with_bm25, ref = mac.bm25_lists(pairs, scores, None, "candidates")
    h = mac.macavaney_heuristics(with_bm25, ref)
    assert got.columns == ["qid", "docid", "recip_raw", "recip"]
    assert got["recip_raw"].to_list() == h["recip"].to_list()
    assert got["recip"].to_list() == [1.0 - d for d in h["recip_point"].to_list()]
    with pytest.raises(ValueError, match="needs the BM25 run"):
        mac.heuristic_difficulty(pairs, scores, None, "run", "kde")


# ------------------------------------------------------------------------------------------- bm25_list: run
def bm25_run_fixture(tmp_path):
    """Ingest tables of two training queries and a dev one, their candidates' BM25 scores and a BM25 run, written
    where :func:`curricula.stages.difficulty.difficulty_function` reads them. The training pool is d1-d4 (the train
    queries' candidates); d6 is a dev doc, which a training negative never is."""
    from curricula.plumbing.contracts import CANDIDATE_SCORES, CANDIDATES, DOCS, QRELS, QUERIES, RUN, write_table

    frames = {
        "queries": (pl.DataFrame({"qid": ["q1", "q2", "q3"], "split": ["train", "train", "dev"],
                                  "text": ["a b", "c", "d e f"], "turns": [["a b"], ["c"], ["d e", "f"]],
                                  "domain": [None, None, None]}, schema_overrides={"domain": pl.String}), QUERIES),
        "docs": (pl.DataFrame({"docid": [f"d{i}" for i in range(1, 7)], "text": ["x"] * 6}), DOCS),
        "qrels": (pl.DataFrame({"qid": ["q1", "q2", "q3"], "docid": ["d1", "d3", "d5"], "rel": [1, 1, 1]},
                               schema_overrides={"rel": pl.Int32}), QRELS),
        "candidates": (pl.DataFrame({"qid": ["q1", "q1", "q2", "q2", "q3", "q3"],
                                     "docid": ["d1", "d2", "d3", "d4", "d5", "d6"]}), CANDIDATES),
        "candidate_scores": (pl.DataFrame({"qid": ["q1", "q1", "q2", "q2", "q3", "q3"],
                                           "docid": ["d1", "d2", "d3", "d4", "d5", "d6"],
                                           "score": [8.0, 4.0, 6.0, 1.0, 5.0, 2.0]}), CANDIDATE_SCORES),
        # q1's run: d4 (pool, not its candidate) first, its positive d1 second, d6 (a dev doc) third, ...
        "run": (pl.DataFrame({"qid": ["q1"] * 5 + ["q2"] * 2 + ["q3"],
                              "docid": ["d4", "d1", "d6", "d2", "d3", "d1", "d3", "d3"],
                              "rank": [1, 2, 3, 4, 5, 1, 2, 1],
                              "score": [9.0, 8.0, 7.0, 4.0, 3.0, 7.0, 6.0, 9.0]},
                             schema_overrides={"rank": pl.Int32}), RUN),
    }
    paths = {}
    for name, (frame, spec) in frames.items():
        paths[name] = tmp_path / f"{name}.parquet"
        write_table(frame, paths[name], spec)
    return paths


def test_bm25_list_run_scores_the_training_queries_run_pairs_with_eq5(tmp_path):
    """With bm25_list: run, recip's training table holds every (training query, pool doc) of the BM25 run, with
    raw = 1 / rank (eq. 5) and difficulty = 1 - D_point (eq. 6, 1 = hardest); a query-level function, the test
    split and bm25_list: candidates keep the candidate pairs; the joined table spreads the query's value."""
    from curricula.difficulty import combine_difficulty, scores_run_pairs
    from curricula.stages.difficulty import difficulty_function

    paths = bm25_run_fixture(tmp_path)
    run_knobs = {"bm25_list": "run"}
    recip = difficulty_function(paths, {"table": tmp_path / "recip.parquet"}, function="recip", knobs=run_knobs)
    want = {  # (rel, raw = 1 / rank, difficulty = 1 - D_point)
        ("q1", "d1"): (1, 1 / 2, 1 / 2),  # relevant at rank 2: D = recip = 1/2
        ("q1", "d2"): (0, 1 / 4, 1 / 4),  # candidate at rank 4: D = 1 - 1/4, difficulty 1/4
        ("q1", "d3"): (0, 1 / 5, 1 / 5),  # run only (q2's positive, a pool doc) at rank 5
        ("q1", "d4"): (0, 1.0, 1.0),      # run only, ranked first: the hardest negative
        ("q2", "d1"): (0, 1.0, 1.0),      # run only, rank 1
        ("q2", "d3"): (1, 1 / 2, 1 / 2),
        ("q2", "d4"): (0, 0.0, 0.0),      # a candidate BM25 did not retrieve: the easiest negative
    }  # no d6 (a dev doc) and no dev query q3
    got = list(zip(recip["qid"], recip["docid"]))
    assert got == sorted(want)
    assert recip["rel"].to_list() == [want[k][0] for k in got]
    assert recip["recip_raw"].to_list() == [want[k][1] for k in got]
    assert recip["recip"].to_list() == pytest.approx([want[k][2] for k in got], abs=1e-12)
    assert scores_run_pairs("recip", run_knobs) and not scores_run_pairs("recip", {"bm25_list": "candidates"})
    assert not scores_run_pairs("turns", {})

    # the run-only rows' scores are the run's: norm of q1's d4 = 1 (the top of [3, 9]), d3 = 0 (the bottom)
    norm = difficulty_function(paths, {"table": tmp_path / "norm.parquet"}, function="norm", knobs=run_knobs)
    raw = dict(zip(zip(norm["qid"], norm["docid"]), norm["norm_raw"]))
    assert raw[("q1", "d4")] == 1.0 and raw[("q1", "d3")] == 0.0 and raw[("q1", "d1")] == pytest.approx(5 / 6)

    # the candidate rows are those of a table scored on the candidates alone
    from curricula.data.ingest import candidate_pairs, read_ingest
    from curricula.difficulty import difficulty_table
    from curricula.plumbing.contracts import CANDIDATE_SCORES, RUN, read_table

    ingest = read_ingest(paths)
    alone = difficulty_table(candidate_pairs(ingest), ingest["queries"], ingest["docs"], ["recip"],
                             candidate_scores=read_table(paths["candidate_scores"], CANDIDATE_SCORES),
                             run=read_table(paths["run"], RUN), bm25_list="run")
    assert recip.join(alone.select("qid", "docid"), on=["qid", "docid"]).equals(alone)

    cands = {("q1", "d1"), ("q1", "d2"), ("q2", "d3"), ("q2", "d4")}
    listed = difficulty_function(paths, {"table": tmp_path / "c.parquet"}, function="recip",
                                 knobs={"bm25_list": "candidates"})
    turns = difficulty_function(paths, {"table": tmp_path / "turns.parquet"}, function="turns", knobs={})
    for table in (listed, turns):
        assert set(zip(table["qid"], table["docid"])) == cands
    dev_split = difficulty_function(paths, {"table": tmp_path / "d.parquet"}, function="recip", knobs=run_knobs,
                                    split="dev")
    assert set(zip(dev_split["qid"], dev_split["docid"])) == {("q3", "d5"), ("q3", "d6")}  # only training is extended

    joint = combine_difficulty([turns, recip], ["turns", "recip"])
    assert joint.select("qid", "docid", "rel", "recip_raw", "recip").equals(recip)
    per_query = dict(zip(turns["qid"], turns["turns"]))
    assert [per_query[q] for q in joint["qid"]] == joint["turns"].to_list()
    with pytest.raises(ValueError, match="rows, expected"):  # a pair-level table missing candidate pairs
        combine_difficulty([turns, recip.head(3)], ["turns", "recip"])

"""Penha & Hauff's Table 2 functions, HCL's eq. 2 and the difficulty table, against hand-computed values."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from curricula.difficulty import difficulty_spec, difficulty_table, hcl, needed_inputs, penha
from curricula.plumbing.contracts import check_table

QUERIES = pl.DataFrame(
    {
        "qid": ["q1", "q2", "q3"],
        "split": ["train"] * 3,
        "text": ["hi there\nhow are you today", "one", "a b c\nd e\nf g h i"],
        "turns": [["hi there", "how are you today"], ["one"], ["a b c", "d e", "f g h i"]],
        "domain": [None, None, None],
    },
    schema_overrides={"domain": pl.String},
)
DOCS = pl.DataFrame({"docid": ["d1", "d2", "d3", "d4", "d5", "d6"],
                     "text": ["fine thanks", "the weather is nice today", "one two", "x", "y z", "w"]})
PAIRS = pl.DataFrame({"qid": ["q1", "q1", "q2", "q2", "q3", "q3"],
                      "docid": ["d1", "d2", "d3", "d4", "d5", "d6"], "rel": [1, 0, 1, 0, 1, 0]})


def test_context_and_response_lengths():
    assert penha.turns(QUERIES).sort("qid")["turns_raw"].to_list() == [2.0, 1.0, 3.0]
    # words per utterance: (2 + 4) / 2, 1 / 1, (3 + 2 + 4) / 3
    assert penha.u_words(QUERIES).sort("qid")["u_words_raw"].to_list() == [3.0, 1.0, 3.0]
    # words per candidate: (2 + 5) / 2, (2 + 1) / 2, (2 + 1) / 2
    assert penha.r_words(PAIRS, DOCS).sort("qid")["r_words_raw"].to_list() == [3.5, 1.5, 1.5]


def test_sigma_bm25_is_the_sample_std_of_all_candidate_scores():
    scores = pl.DataFrame({"qid": ["q1", "q1", "q2", "q2", "q3", "q3"], "docid": ["d1", "d2", "d3", "d4", "d5", "d6"],
                           "score": [4.0, 2.0, 1.0, 1.0, 3.0, 0.0]})
    got = penha.sigma_bm25(PAIRS, scores).sort("qid")["sigma_bm25_raw"].to_list()
    assert got == pytest.approx([np.std([4, 2], ddof=1), 0.0, np.std([3, 0], ddof=1)])


def test_bert_pred_is_the_negated_probability_margin_and_bert_loss_the_mean_loss():
    teacher = pl.DataFrame({"qid": ["q1", "q1", "q2", "q2"], "docid": ["d1", "d2", "d3", "d4"],
                            "score": [2.0, -1.0, 0.0, 0.5], "loss": [0.1, 0.3, 0.7, 0.9]})
    pairs = PAIRS.head(4)
    pred = penha.bert_pred(pairs, teacher).sort("qid")["bert_pred_raw"].to_list()
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    # q1: the teacher is confident and right -> easy (negative raw); q2: it prefers the negative -> hard (positive)
    assert pred == pytest.approx([-(sig(2.0) - sig(-1.0)), -(sig(0.0) - sig(0.5))])
    assert pred[0] < 0 < pred[1]
    assert penha.bert_loss(pairs, teacher).sort("qid")["bert_loss_raw"].to_list() == pytest.approx([0.2, 0.8])


def test_semantic_match_is_the_mean_pairwise_word_cosine():
    rng = np.random.default_rng(0)
    u, r = rng.normal(size=(4, 8)), rng.normal(size=(3, 8))
    un, rn = u / np.linalg.norm(u, axis=1, keepdims=True), r / np.linalg.norm(r, axis=1, keepdims=True)
    brute = np.mean([[a @ b for b in rn] for a in un])
    assert penha.semantic_match(un.mean(0)[None], rn.mean(0)[None])[0] == pytest.approx(brute)


def test_sigma_sm_uses_the_first_k_word_pieces():
    from curricula.models.hf import load_encoder, load_tokenizer

    tok = load_tokenizer("minilm")
    emb = load_encoder("minilm").embeddings.word_embeddings.weight.detach().numpy()
    v = penha.first_word_vectors(["good morning , friend", "good morning friend !!", "?!"], tok, emb, k=3)
    assert np.allclose(v[0], v[1])  # punctuation skipped, first 3 word pieces equal
    assert not v[2].any()  # nothing word-like: zero vector
    got = penha.sigma_sm(PAIRS, QUERIES, DOCS, tok, emb).sort("qid")
    assert got.height == 3 and (got["sigma_sm_raw"] >= 0).all()


def test_percentile_difficulty_orders_and_shares_ties():
    s = pl.Series("x", [3.0, 1.0, 2.0, 2.0])
    assert penha.percentile_difficulty(s).to_list() == pytest.approx([1.0, 0.0, 0.5, 0.5])
    assert penha.percentile_difficulty(pl.Series("x", [7.0])).to_list() == [0.5]


def test_random_is_seeded_and_depends_only_on_the_qid_set():
    a = penha.random_score(pl.Series(["b", "a", "c"]), seed=1)
    b = penha.random_score(pl.Series(["c", "a", "b"]), seed=1)
    assert dict(zip(["b", "a", "c"], a)) == dict(zip(["c", "a", "b"], b))
    assert not a.equals(penha.random_score(pl.Series(["b", "a", "c"]), seed=2))


def test_hcl_corpus_difficulty_eq2():
    # f_d = 1 - G / max G: the most similar pair is easiest (0), a pair half as similar is 0.5
    assert hcl.hcl_corpus_difficulty(np.array([0.8, 0.4, 0.0])).tolist() == pytest.approx([0.0, 0.5, 1.0])
    assert hcl.hcl_corpus_difficulty(np.array([0.5, -0.5])).tolist() == pytest.approx([0.0, 1.0])  # clipped


def test_hcl_corpus_from_vectors():
    def vecs(ids, rows):
        m = np.asarray(rows, dtype=np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        return pl.DataFrame({"id": ids, "vector": pl.Series(m)})

    qv = vecs(["q1", "q2", "q3"], [[1, 0], [1, 0], [1, 0]])
    dv = vecs(["d1", "d2", "d3", "d4", "d5", "d6"], [[1, 0], [0, 1], [1, 1], [0, 1], [0, 1], [1, 0]])
    got = hcl.hcl_corpus(PAIRS, qv, dv).sort("qid")
    assert got["hcl_corpus_raw"].to_list() == pytest.approx([1.0, 2 ** -0.5, 0.0], abs=1e-6)
    assert got["hcl_corpus"].to_list() == pytest.approx([0.0, 1 - 2 ** -0.5, 1.0], abs=1e-6)


def test_hcl_guard_and_corpus_difficulty_read_the_same_g_of_the_true_reply():
    """G(c, r+) has one definition (curricula.retrieval.similarity): the false-negative guard's reference score of
    each training query is exactly the G that HCL's corpus-level difficulty f_d is computed from."""
    from curricula.data import chitchat
    from curricula.data.ingest import candidate_pairs
    from tests.train_data import CAPS, guard_fixture, sampler

    loaded = chitchat.load({}, max_instances=CAPS, seed=11, max_context_turns=3)
    data = {name: df for name, (df, _) in loaded.tables().items()}
    neighbors, qv, dv, _ = guard_fixture(data)
    guarded = sampler(data, {"mode": "neighbors", "m": 2, "pacing": {"kT": 1, "T": 50}, "false_negative_guard": 0.8},
                      neighbors=neighbors, query_vectors=qv, doc_vectors=dv)
    pairs = candidate_pairs(data).filter(pl.col("qid").is_in(qv["id"].implode()))
    corpus = hcl.hcl_corpus(pairs, qv, dv)
    single = pairs.filter(pl.col("rel") > 0).group_by("qid").len().filter(pl.col("len") == 1)["qid"]
    assert single.len() > 10
    for qid, g in corpus.filter(pl.col("qid").is_in(single.implode())).select("qid", "hcl_corpus_raw").iter_rows():
        assert guarded.positive_score[guarded.q_of[qid]] == g  # the same float64, not merely close


def test_table_has_raw_and_difficulty_per_function_with_query_level_values_broadcast():
    fns = ["random", "turns", "u_words", "r_words"]
    table = difficulty_table(PAIRS, QUERIES, DOCS, fns, seed=3)
    check_table(table, difficulty_spec(fns), "difficulty")
    assert table.height == PAIRS.height
    assert table.filter(pl.col("qid") == "q3")["turns"].to_list() == [1.0, 1.0]  # most turns: hardest
    assert table.filter(pl.col("qid") == "q2")["turns"].to_list() == [0.0, 0.0]
    for f in fns:
        assert table[f].min() >= 0 and table[f].max() <= 1
    assert table.equals(difficulty_table(PAIRS, QUERIES, DOCS, fns, seed=3))


def test_unknown_function_and_needed_inputs():
    with pytest.raises(ValueError, match="unknown difficulty function"):
        needed_inputs(["turns", "nope"])
    assert needed_inputs(["turns", "bert_loss"]) == {"teacher"}
    assert needed_inputs(["kde"]) == {"candidate_scores"}
    assert needed_inputs(["kde"], "run") == {"candidate_scores", "run"}


def test_spearman_matrix_is_symmetric_with_unit_diagonal():
    from curricula.difficulty import spearman_matrix

    t = pl.DataFrame({"a": [0.1, 0.2, 0.3, 0.4], "b": [0.4, 0.3, 0.2, 0.1], "c": [0.5] * 4})
    m = spearman_matrix(t, ["a", "b", "c"])
    assert m["function"].to_list() == ["a", "b"]  # a constant column has no rank correlation
    assert m["a"].to_list() == pytest.approx([1.0, -1.0]) and m["b"].to_list() == pytest.approx([-1.0, 1.0])


def test_per_function_tables_combine_into_the_joint_table():
    from curricula.difficulty import combine_difficulty, function_knobs

    fns = ["random", "turns", "u_words"]
    joint = difficulty_table(PAIRS, QUERIES, DOCS, fns, seed=3)
    parts = [difficulty_table(PAIRS, QUERIES, DOCS, [f], seed=3) for f in fns]
    assert combine_difficulty(parts, fns).equals(joint)  # one job per function gives the same table
    with pytest.raises(ValueError, match="rows, expected"):
        combine_difficulty([parts[0], parts[1].head(2)], fns[:2])
    two_values = parts[1].with_columns(pl.col("turns") + pl.int_range(pl.len()) * 1e-3)  # per pair, not per query
    with pytest.raises(ValueError, match="turns: a query-level function with more than one value for a query"):
        combine_difficulty([parts[0], two_values], fns[:2])
    cfg = {"bm25_list": "run", "sm_words": 20, "sm_model": "minilm"}
    assert function_knobs("kde", cfg, 7) == {"bm25_list": "run"}
    assert function_knobs("random", cfg, 7) == {"seed": 7}
    assert function_knobs("turns", cfg, 7) == {}  # no knob: a changed seed or list never re-runs it


# ----------------------------------------------------------------------------------------------- the registry
#: the papers' functions in registration order (a function added later may come anywhere: the test reads them only)
PAPERS = ["random", "turns", "u_words", "r_words", "sigma_sm", "sigma_bm25", "bert_pred", "bert_loss", "recip", "norm",
          "kde", "hcl_corpus"]


def test_builtin_registry_order_levels_and_seed():
    from curricula.difficulty import FUNCTIONS

    papers = {f: FUNCTIONS[f] for f in FUNCTIONS if f in PAPERS}
    assert list(papers) == PAPERS
    assert [f for f, fn in papers.items() if fn.pair_level] == ["recip", "norm", "kde"]
    assert [f for f, fn in papers.items() if fn.uses_seed] == ["random"]
    assert FUNCTIONS["hcl_corpus"].citation == "Su et al. 2021, eq. 2"
    assert all(fn.citation and fn.name == f for f, fn in FUNCTIONS.items())


def test_builtin_registry_orientation_range_and_run_pairs():
    """What the raw values are (the papers' units): MacAvaney's h in [0, 1] (1 = ranked high, so a relevant doc is
    easy and a negative hard), the only values a pairwise loss may weigh by, and the only functions that score the
    BM25 run's pairs; Penha's larger = harder; HCL's G, a cosine, larger = easier."""
    from curricula.difficulty import FUNCTIONS, scores_run_pairs

    papers = {f: FUNCTIONS[f] for f in PAPERS}
    assert {f for f, fn in papers.items() if fn.orientation == "relevance"} == {"recip", "norm", "kde"}
    assert {f for f, fn in papers.items() if fn.orientation == "easier"} == {"hcl_corpus"}
    assert [f for f, fn in papers.items() if fn.macavaney_h] == [f for f, fn in papers.items() if fn.run_pairs] == [
        "recip", "norm", "kde"]
    assert (FUNCTIONS["turns"].range_text, FUNCTIONS["bert_pred"].range_text) == ("[0, inf)", "[-1, 1]")
    assert FUNCTIONS["random"].raw_in_unit_interval and not FUNCTIONS["random"].macavaney_h  # query-level
    assert FUNCTIONS["kde"].weighs_by_raw(pointwise=False) and not FUNCTIONS["kde"].weighs_by_raw(pointwise=True)
    assert not FUNCTIONS["turns"].weighs_by_raw(pointwise=False)  # one value per query: the difficulty column
    assert scores_run_pairs("kde", {"bm25_list": "run"}) and not scores_run_pairs("kde", {"bm25_list": "candidates"})
    assert not scores_run_pairs("turns", {})
    # the raw values of the built-in functions lie in their registered ranges
    table = difficulty_table(PAIRS, QUERIES, DOCS, ["random", "turns", "u_words", "r_words"], seed=5)
    for f in ("random", "turns", "u_words", "r_words"):
        low, high = FUNCTIONS[f].raw_range
        assert table[f"{f}_raw"].min() >= low and table[f"{f}_raw"].max() <= high


@pytest.fixture
def toy():
    """A toy pair-level function (docid length), registered for one test and removed afterwards."""
    from curricula.difficulty import FUNCTIONS, register, unregister

    def compute(x):
        n = x.pairs.select("qid", "docid", (pl.col("docid").str.len_chars() * x.knobs["toy_k"] + x.knobs["seed"])
                           .cast(pl.Float64).alias("toy_raw"))
        return n.with_columns(toy=penha.percentile_difficulty(n["toy_raw"]))

    fn = register("toy", "Toy et al. 2024, eq. 1", level="pair", compute=compute, inputs=("teacher",),
                  conditional_inputs={"run": {"toy_list": "run"}}, knobs=("toy_k", "toy_list"), uses_seed=True)
    yield fn
    unregister("toy")
    assert "toy" not in FUNCTIONS


def test_registered_metadata_drives_needed_inputs_and_function_knobs(toy):
    from curricula.difficulty import FUNCTIONS, function_knobs, pair_level

    assert list(FUNCTIONS)[-1] == "toy" and pair_level("toy") and toy.key == ("qid", "docid")
    assert needed_inputs(["toy"]) == {"teacher"}
    assert needed_inputs(["toy"], knobs={"toy_list": "run"}) == {"teacher", "run"}
    assert needed_inputs(["toy", "kde"], "run", knobs={"toy_list": "candidates"}) == {"teacher", "candidate_scores",
                                                                                      "run"}
    cfg = {"toy_k": 2, "toy_list": "candidates", "bm25_list": "run", "sm_words": 20}
    assert function_knobs("toy", cfg, 5) == {"toy_k": 2, "toy_list": "candidates", "seed": 5}
    teacher = pl.DataFrame({"qid": ["q1"], "docid": ["d1"], "score": [0.0], "loss": [0.0]})
    table = difficulty_table(PAIRS, QUERIES, DOCS, ["toy", "turns"], seed=5, teacher=teacher,
                             knobs={"toy_k": 2, "toy_list": "candidates"})
    check_table(table, difficulty_spec(["toy", "turns"]), "difficulty")
    assert table["toy_raw"].to_list() == [9.0] * 6  # len("d1") * 2 + seed 5
    with pytest.raises(ValueError, match=r"needs the table\(s\) \['teacher'\]"):
        difficulty_table(PAIRS, QUERIES, DOCS, ["toy"], knobs={"toy_k": 2, "toy_list": "candidates"})
    with pytest.raises(ValueError, match=r"no value for knob\(s\) \['toy_k'\]"):
        difficulty_table(PAIRS, QUERIES, DOCS, ["toy"], teacher=teacher, knobs={"toy_list": "candidates"})


def test_register_rejects_bad_metadata(toy):
    from curricula.difficulty import register, unregister

    def reg(name="toy2", **kw):
        return register(name, "x", **{"level": "query", "compute": lambda x: x.pairs, **kw})

    with pytest.raises(ValueError, match="already registered"):
        reg("toy")
    with pytest.raises(ValueError, match="level must be"):
        reg(level="corpus")
    with pytest.raises(ValueError, match="unknown input table"):
        reg(inputs=("bm25",))
    with pytest.raises(ValueError, match="undeclared knob"):
        reg(conditional_inputs={"run": {"bm25_list": "run"}})
    with pytest.raises(ValueError, match="uses_seed"):
        reg(knobs=("seed",))
    with pytest.raises(ValueError, match="orientation must be one of"):
        reg(orientation="up")
    with pytest.raises(ValueError, match="orientation 'relevance' describes a document, so needs level='pair'"):
        reg(orientation="relevance")
    with pytest.raises(ValueError, match=r"raw_range must be \(low, high\) with low <= high"):
        reg(raw_range=(1.0, 0.0))
    with pytest.raises(ValueError, match=r"raw_range must be \(low, high\), got 1"):
        reg(raw_range=1)
    with pytest.raises(ValueError, match="run_pairs=True needs level='pair', 'candidate_scores' in inputs"):
        reg(level="pair", run_pairs=True)  # it reads neither the run nor the candidates' BM25 scores
    ok = reg(level="pair", inputs=("candidate_scores",), conditional_inputs={"run": {"bm25_list": "run"}},
             knobs=("bm25_list",), run_pairs=True, orientation="relevance", raw_range=(0, 1))
    assert ok.run_pairs and ok.macavaney_h and ok.raw_range == (0.0, 1.0)
    unregister("toy2")


def test_unknown_function_is_a_clear_value_error():
    from curricula.difficulty import function_knobs, lookup, pair_level, unregister

    for call in (lambda: function_knobs("nope", {}, 1), lambda: pair_level("nope"), lambda: lookup("nope"),
                 lambda: unregister("nope"), lambda: difficulty_table(PAIRS, QUERIES, DOCS, ["turns", "nope"])):
        with pytest.raises(ValueError, match=r"unknown difficulty function.*nope.*known: \['random'"):
            call()

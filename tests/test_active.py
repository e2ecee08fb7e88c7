"""DASL's uncertainty (Algorithm 1), self-paced selection (eq. 14), and the acquisition functions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from curricula.active.acquisition import (
    bald,
    dcg_of_order,
    expected_loss,
    k_center_greedy,
    normalise_passes,
    passes_agree_on_top,
    pseudo_positive,
    quantile_lambda0,
    random_pick,
    self_paced_indicators,
    spl_lambda,
    top_uncertain,
)
from curricula.data.ingest import candidate_pairs


def test_dcg_matches_equation_3_by_hand():
    y = np.array([0.5, 0.2, 0.3])
    order = np.array([0, 2, 1])  # pi(0) = 1, pi(2) = 2, pi(1) = 3
    want = (2**0.5 - 1) / math.log2(2) + (2**0.3 - 1) / math.log2(3) + (2**0.2 - 1) / math.log2(4)
    assert dcg_of_order(y, order) == pytest.approx(want)


def test_normalisation_is_per_pass_and_ignores_padding():
    passes = np.array([[[1.0, 3.0, 9.0], [2.0, 2.0, 9.0]]])
    mask = np.array([[True, True, False]])
    y = normalise_passes(passes, mask)
    np.testing.assert_allclose(y, [[[0.25, 0.75, 0.0], [0.5, 0.5, 0.0]]])
    with pytest.raises(ValueError, match="non-negative"):
        normalise_passes(-passes)


def test_el_is_zero_when_every_pass_orders_alike():
    one = np.array([0.9, 0.5, 0.1, 0.3])
    passes = np.stack([one * s for s in (1.0, 0.7, 1.3)])[None]  # same ordering, different scales
    assert expected_loss(passes)[0] == pytest.approx(0.0, abs=1e-12)


def test_el_grows_with_disagreement_and_c1_ge_c2_always():
    rng = np.random.default_rng(0)
    base = np.array([0.8, 0.6, 0.4, 0.2])
    els = []
    for noise in (0.0, 0.1, 0.3, 0.6):
        passes = np.clip(base + noise * rng.standard_normal((400, base.size)), 0.01, None)[None]
        els.append(expected_loss(passes)[0])
    assert els[0] == pytest.approx(0.0, abs=1e-12)
    assert all(a < b for a, b in zip(els, els[1:])), els
    # c1 >= c2 on arbitrary positive scores (EL is never clipped by more than rounding)
    from curricula.active.acquisition import _descending

    for _ in range(50):
        p = rng.random((3, 7, 5)) + 1e-3
        y = normalise_passes(p)
        c1 = dcg_of_order(y, _descending(y)).mean(axis=1)
        star = np.broadcast_to(_descending(y.mean(axis=1))[:, None, :], y.shape)
        c2 = dcg_of_order(y, star).mean(axis=1)
        assert np.all(c1 >= c2 - 1e-12)


def test_el_with_padding_equals_el_of_the_unpadded_query():
    rng = np.random.default_rng(1)
    short = rng.random((1, 6, 3)) + 0.05
    padded = np.concatenate([short, np.full((1, 6, 2), 7.0)], axis=2)
    mask = np.array([[True, True, True, False, False]])
    assert expected_loss(padded, mask)[0] == pytest.approx(expected_loss(short)[0])


def test_self_paced_selection_honours_lambda_and_the_pace_grows():
    el = np.array([0.0, 0.01, 0.02, 0.05])
    assert self_paced_indicators(el, 0.02).tolist() == [True, True, False, False]
    assert spl_lambda(0.01, 2.0, 0) == 0.01 and spl_lambda(0.01, 2.0, 3) == pytest.approx(0.08)
    with pytest.raises(ValueError):
        spl_lambda(0.01, 1.0, 1)


def test_a_quantile_lambda0_pseudo_labels_about_that_fraction_at_the_first_pace():
    el = np.random.default_rng(4).random(1000) * 0.004  # EL of 10-candidate queries is of order 1e-3
    lam0 = quantile_lambda0(el, 0.3)
    assert self_paced_indicators(el, lam0).mean() == pytest.approx(0.3, abs=0.002)
    # EL is exactly 0 for queries whose passes order the candidates alike: with 40% of them tied at 0 the 10%
    # quantile is 0, and only the authors' EL <= lambda pseudo-labels anything (eq. 14's < never would)
    tied = np.concatenate([np.zeros(400), el[:600]])
    lam0 = quantile_lambda0(tied, 0.1)
    assert lam0 == 0.0 and not self_paced_indicators(tied, lam0).any()
    assert self_paced_indicators(tied, lam0, inclusive=True).sum() == 400
    assert quantile_lambda0(el, 1.0) == el.max() and quantile_lambda0(np.array([]), 0.3) == 0.0
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="quantile"):
            quantile_lambda0(el, bad)


def test_agreement_is_every_pass_putting_the_same_real_candidate_on_top():
    passes = np.array([[[0.1, 0.9, 0.5], [0.2, 0.8, 0.7], [0.3, 0.6, 0.5]],    # all passes: candidate 1
                       [[0.1, 0.9, 0.5], [0.2, 0.4, 0.7], [0.3, 0.6, 0.5]],    # one pass prefers candidate 2
                       [[0.9, 0.2, 0.99], [0.8, 0.3, 0.99], [0.7, 0.1, 0.99]]])  # 2 is padding: candidate 0
    mask = np.array([[True, True, True], [True, True, True], [True, True, False]])
    assert passes_agree_on_top(passes, mask).tolist() == [True, False, True]
    assert passes_agree_on_top(passes).tolist() == [True, False, True]  # without the mask, 2 wins every pass
    # under agreement the pseudo answer (top of the mean) is the unanimous top, as in the authors' code
    assert pseudo_positive(passes.mean(axis=1), mask)[[0, 2]].tolist() == [1, 0]


def test_pseudo_label_is_the_top_of_the_mean_ordering_among_real_candidates():
    scores = np.array([[0.1, 0.9, 0.95], [0.3, 0.2, 0.1]])
    mask = np.array([[True, True, False], [True, True, True]])
    assert pseudo_positive(scores, mask).tolist() == [1, 0]


def test_bald_is_zero_for_agreement_and_positive_for_disagreement():
    agree = np.tile(np.array([0.9, 0.1, 0.1]), (5, 1))[None]
    assert bald(agree)[0] == pytest.approx(0.0, abs=1e-12)
    disagree = np.array([[[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]]])
    assert bald(disagree)[0] > 0.5


def test_acquisitions_never_pick_a_labeled_query():
    rng = np.random.default_rng(3)
    labeled = np.zeros(30, dtype=bool)
    labeled[rng.choice(30, 12, replace=False)] = True
    scores = rng.random(30)
    scores[labeled] = 10.0  # the most uncertain are labeled already: still never picked
    for picks in (top_uncertain(scores, ~labeled, 5, rng), random_pick(~labeled, 5, rng),
                  k_center_greedy(rng.random((30, 4)), labeled, 5)):
        assert len(picks) == 5 and not labeled[picks].any() and len(set(picks.tolist())) == 5
    assert len(top_uncertain(scores, ~labeled, 100, rng)) == 18  # capped by the pool
    assert len(k_center_greedy(rng.random((30, 4)), labeled, 100)) == 18


def test_top_uncertain_takes_the_highest_scores():
    scores = np.array([0.1, 0.9, 0.5, 0.7, 0.3])
    eligible = np.array([True, True, True, False, True])
    assert top_uncertain(scores, eligible, 2, np.random.default_rng(0)).tolist() == [1, 2]


def test_core_set_greedy_matches_brute_force_on_a_tiny_example():
    rng = np.random.default_rng(7)
    pts = rng.random((9, 2))
    labeled = np.zeros(9, dtype=bool)
    labeled[[0, 4]] = True

    def cover_radius(centres) -> float:
        return max(min(np.linalg.norm(pts[i] - pts[c]) for c in centres) for i in range(len(pts)))

    picks = k_center_greedy(pts, labeled, 3)
    # each greedy step is the brute-force farthest point from the current centres
    centres = [0, 4]
    for p in picks:
        far = max((i for i in range(9) if i not in centres),
                  key=lambda i: min(np.linalg.norm(pts[i] - pts[c]) for c in centres))
        assert p == far
        centres.append(int(p))
    # and its covering radius is within the 2-approximation of the exhaustive optimum
    best = min(cover_radius([0, 4, *extra]) for extra in itertools.combinations([1, 2, 3, 5, 6, 7, 8], 3))
    assert best <= cover_radius(centres) <= 2 * best + 1e-12


# --------------------------------------------------------------------------------------------- the loop
@pytest.fixture(scope="module")
def tiny():
    from curricula.data import chitchat

    d = chitchat.load({}, max_instances={"train": 30, "dev": 6, "test": 6}, seed=0, max_context_turns=4)
    t = {name: df for name, (df, _) in d.tables().items()}
    split = lambda s: candidate_pairs(t, splits=(s,))  # noqa
    return {"train": split("train"), "dev": split("dev"), "test": split("test"), "qrels": t["qrels"]}


def tiny_spec():
    from curricula.experiments.spec import parse_train_spec
    from curricula.experiments.specs import merge_experiment, resolve_ranker

    train = dict(ranker="lstm_qa", architecture={"channels": 8, "hidden": 8, "query_length": 16, "doc_length": 16},
                 model="minilm", layers=None, max_length=32, steps=3, batch_size=4, lr=None, eps=1e-8,
                 weight_decay=0.0, warmup=0.0, optimizer="adamw", loss="pointwise_ce", margin=1.0,
                 negatives={"mode": "candidates", "m": 1}, eval_every=3, eval_metric="RR", dev_queries=None,
                 score_batch_size=64, device="cpu", precision="fp32", threads=1)
    return parse_train_spec(resolve_ranker(merge_experiment(train, {})))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["random", "dal", "dasl", "bald", "coreset"])
def test_loop_grows_the_labeled_set_by_the_budget_and_resumes(tiny, tmp_path, method):
    from curricula.active.loop import ActiveSettings, run_active

    settings = ActiveSettings(rounds=3, initial=0.2, budget=0.2, passes=4, lambda0=1.0, lambda0_quantile=None,
                              require_agreement=False, mu=2.0, spl_iterations=2)
    emb = np.random.default_rng(0).random((tiny["train"]["qid"].n_unique(), 5))
    kw = dict(train=tiny["train"], dev=tiny["dev"], test=tiny["test"], qrels=tiny["qrels"], spec=tiny_spec(),
              settings=settings, embeddings=emb)
    done = run_active(method, 1, state_dir=tmp_path / "a", **kw)
    curve = done.curve
    n = tiny["train"]["qid"].n_unique()
    # per-query test values of every round, whose means are the curve's test columns
    n_test = tiny["test"]["qid"].n_unique()
    assert done.test_metrics.height == 3 * n_test * 2
    means = done.test_metrics.group_by("round", "measure").agg(pl.col("value").mean())
    for r, measure, value in means.iter_rows():
        assert value == pytest.approx(curve.filter(pl.col("round") == r)[f"test_{measure}"][0], abs=1e-12)
    assert curve["round"].to_list() == [0, 1, 2]
    assert curve["labeled"].to_list() == [round(0.2 * n) + k * round(0.2 * n) for k in range(3)]
    if method == "dasl":  # lambda0 = 1 is above any EL: after iteration 0 every unlabeled query is pseudo-labeled;
        # the kept model is iteration 1's (trained with them) only when it improved dev
        for row in curve.iter_rows(named=True):
            want = n - row["labeled"] if row["spl_iterations"] == 2 else 0
            assert row["pseudo_labeled"] == want
    else:
        assert curve["pseudo_labeled"].to_list() == [0, 0, 0]

    class Killed(Exception):
        pass

    def kill(r):
        if r == 1:
            raise Killed

    with pytest.raises(Killed):
        run_active(method, 1, state_dir=tmp_path / "b", on_round=kill, **kw)
    resumed = run_active(method, 1, state_dir=tmp_path / "b", **kw)
    assert resumed.curve.equals(curve)
    assert resumed.test_metrics.equals(done.test_metrics)  # the resumed job kept round 0's per-query values


@pytest.mark.slow  # trains the ranker of every round
def test_dasl_with_a_lambda0_quantile_pseudo_labels_that_share_of_the_unlabeled_queries(tiny, caplog):
    import re

    from curricula.active.loop import ActiveSettings, run_active

    caplog.set_level("INFO", logger="curricula.active.loop")

    settings = ActiveSettings(rounds=2, initial=0.2, budget=0.2, passes=4, lambda0=1e-12, lambda0_quantile=0.5,
                              require_agreement=False, mu=2.0, spl_iterations=2)
    done = run_active("dasl", 1, train=tiny["train"], dev=tiny["dev"], test=tiny["test"], qrels=tiny["qrels"],
                      spec=tiny_spec(), settings=settings)
    n = tiny["train"]["qid"].n_unique()
    # the fixed lambda0 (1e-12) would pseudo-label nothing; the median of EL (the authors' sorted[int(0.5 n)], with
    # their EL <= lambda) labels the lower half and the median itself at each round's first pace
    first_pace = [tuple(map(int, m.groups())) for m in (re.search(r"spl iteration 0: .* (\d+) pseudo-labeled of (\d+)",
                                                                    r.getMessage()) for r in caplog.records) if m]
    assert [unlabeled for _, unlabeled in first_pace] == [n - x for x in done.curve["labeled"].to_list()]
    assert all(pseudo == unlabeled // 2 + 1 for pseudo, unlabeled in first_pace)
    for row in done.curve.iter_rows(named=True):  # kept only with the model they trained, when it improved dev
        assert row["pseudo_labeled"] == ((n - row["labeled"]) // 2 + 1 if row["spl_iterations"] == 2 else 0)


@pytest.mark.slow  # trains the ranker of every round
def test_dasl_requiring_agreement_pseudo_labels_only_queries_whose_passes_agree(tiny, caplog):
    """Wang et al.'s code pseudo-labels a query only when all its MC-dropout passes pick the same top answer."""
    import re

    from curricula.active.loop import ActiveSettings, run_active

    caplog.set_level("INFO", logger="curricula.active.loop")
    settings = ActiveSettings(rounds=2, initial=0.2, budget=0.2, passes=4, lambda0=1.0, lambda0_quantile=None,
                              require_agreement=True, mu=2.0, spl_iterations=2)
    run_active("dasl", 1, train=tiny["train"], dev=tiny["dev"], test=tiny["test"], qrels=tiny["qrels"],
               spec=tiny_spec(), settings=settings)
    text = "\n".join(r.getMessage() for r in caplog.records)
    agree = [tuple(map(int, m)) for m in re.findall(r"agree on the top answer for (\d+) of (\d+)", text)]
    pseudo = [int(m) for m in re.findall(r"spl iteration \d+: .* (\d+) pseudo-labeled of", text)]
    assert agree and len(agree) == len(pseudo)
    # lambda0 = 1 is above every EL: without the rule all unlabeled queries would be pseudo-labeled
    assert [a for a, _ in agree] == pseudo
    assert any(a < unlabeled for a, unlabeled in agree)


def test_dasl_defaults_are_the_quantile_rule_with_agreement_in_code_and_schema():
    import yaml

    from curricula.active.loop import ActiveSettings
    from curricula.plumbing.config import SCHEMA

    props = yaml.safe_load(SCHEMA.read_text())["properties"]["active"]["properties"]
    defaults = ActiveSettings()
    assert defaults.lambda0_quantile == props["lambda0_quantile"]["default"] == 0.1  # no silent DAL
    assert defaults.require_agreement is props["require_agreement"]["default"] is True
    assert ActiveSettings.from_config({"lambda0_quantile": None, "lambda0": 0.01}).lambda0_quantile is None


@pytest.mark.slow  # trains the ranker of every round
def test_all_data_is_one_round_with_every_query_labeled(tiny, tmp_path):
    from curricula.active.loop import ActiveSettings, run_active

    curve = run_active("all", 1, train=tiny["train"], dev=tiny["dev"], test=tiny["test"], qrels=tiny["qrels"],
                       spec=tiny_spec(), settings=ActiveSettings()).curve
    assert curve.height == 1 and curve["labeled_fraction"][0] == 1.0


def test_pseudo_labeled_pairs_mark_only_the_model_answer(tiny):
    from curricula.active.loop import QueryPool, labeled_pairs

    pool = QueryPool(tiny["train"])
    labeled = np.zeros(len(pool), dtype=bool)
    labeled[0] = True
    out = labeled_pairs(pool, labeled, {1: 2, 2: 0})
    q1, q2 = pool.qids[1], pool.qids[2]
    got1 = out.filter(pl.col("qid") == q1)["rel"].to_list()
    assert got1 == [0, 0, 1] + [0] * (len(got1) - 3)
    assert out.filter(pl.col("qid") == q2)["rel"].to_list()[0] == 1
    assert out.filter(pl.col("qid") == pool.qids[0])["rel"].sum() >= 1  # true labels kept
    assert set(out["qid"].unique().to_list()) == {pool.qids[0], q1, q2}


def test_label_fraction_table_finds_the_first_fraction_reaching_all_data():
    from curricula.plumbing.contracts import check_table
    from curricula.report.active import ACTIVE_TABLE, label_fraction_table

    rows = []
    for seed, shift in ((1, 0.0), (2, 0.02)):
        rows.append({"method": "all", "seed": seed, "round": 0, "labeled_fraction": 1.0, "pseudo_labeled": 0,
                     "test_RR": 0.60 + shift})
        for r, (frac, a, b) in enumerate([(0.1, 0.40, 0.50), (0.2, 0.55, 0.62), (0.3, 0.58, 0.64)]):
            for method, rr in (("fast", b), ("slow", a)):
                rows.append({"method": method, "seed": seed, "round": r, "labeled_fraction": frac,
                             "pseudo_labeled": 0, "test_RR": rr + shift})
    table = check_table(label_fraction_table(pl.DataFrame(rows), "test_RR"), ACTIVE_TABLE, "t").sort("method")
    assert table["all_data"][0] == pytest.approx(0.61)
    fast, slow = table.row(0, named=True), table.row(1, named=True)
    assert fast["fraction_needed"] == pytest.approx(0.2)  # mean 0.63 >= 0.61 first at 20%
    assert slow["fraction_needed"] is None and slow["best"] == pytest.approx(0.59)
    assert slow["best_fraction"] == pytest.approx(0.3) and fast["seeds"] == 2


def test_learning_curve_table_averages_each_round_over_seeds():
    from curricula.plumbing.contracts import check_table
    from curricula.report.active import ACTIVE_CURVES, learning_curve_table

    rows = [{"method": "dasl", "seed": seed, "round": r, "labeled_fraction": 0.1 * (r + 1),
             "pseudo_labeled": pseudo, "test_RR": rr}
            for seed, r, pseudo, rr in ((1, 0, 4, 0.5), (2, 0, 6, 0.7), (1, 1, 10, 0.6), (2, 1, 20, 0.6))]
    rows.append({"method": "all", "seed": 1, "round": 0, "labeled_fraction": 1.0, "pseudo_labeled": 0,
                 "test_RR": 0.65})
    means = check_table(learning_curve_table(pl.DataFrame(rows), "test_RR"), ACTIVE_CURVES, "t")
    dasl = means.filter(pl.col("method") == "dasl").sort("round")
    assert dasl["mean"].to_list() == pytest.approx([0.6, 0.6])
    assert dasl["pseudo_labeled"].to_list() == [5.0, 15.0] and dasl["seeds"].to_list() == [2, 2]
    assert dasl["sd"].to_list() == pytest.approx([0.1414, 0.0], abs=1e-4)
    assert means.filter(pl.col("method") == "all")["sd"].to_list() == [None]  # one seed: no SD

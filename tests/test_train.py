"""Curriculum shards and the sampler, losses, pair-level weights and the experiment specs, on a few real chitchat
instances (the negative sampler: tests/test_negatives.py; train_ranker's runs: tests/test_train_runs.py)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import torch

from curricula.curriculum import ordering as cur
from curricula.curriculum.pacing import resolve_pacing
from curricula.experiments.spec import spec_params, thaw
from curricula.experiments.specs import experiment_specs, merge_experiment, needed_tables, resolve_ranker
from curricula.experiments.train import PairEase, train_ranker
from curricula.plumbing.contracts import RUN
from curricula.training.losses import element_losses, weighted_mean
from tests.train_data import CAPS, TRAIN, folder_for, relevant_of, sampler, spec_of, train_qids, train_spec
from tests.train_data import data, table  # noqa: F401 (module-scoped fixtures: pytest finds them here)


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

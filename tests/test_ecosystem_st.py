"""The curricula inside sentence-transformers' ``CrossEncoderTrainer``: the batch sampler yields, for a seed, the
pipeline's own curriculum batches in the same order (resumed epochs too), the weighted loss equals the pipeline's
weighted loss on the same batch, the dataset builder's negatives are the pipeline's (HCL's guard respected), and a
short training runs. On a tiny results tree built in-process (tests/ecosystem_tree.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch

from curricula.curriculum.ordering import CurriculumSampler
from curricula.ecosystem.curriculum_data import (
    draw_negatives,
    ease_matrix,
    instance_dataset,
    instance_table,
    negative_sampler,
    run_curriculum,
)
from curricula.ecosystem.frames import read_data
from curricula.ecosystem.sentence_transformers import CurriculumLoss, run_batch_sampler, weighted_group_loss
from tests.ecosystem_tree import build_tree, write_dense, write_difficulty, write_run

# looked up, not imported: importing sentence-transformers takes seconds, which every worker would pay at collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                                reason="sentence-transformers is in requirements.lock; these tests drive its trainer")

BASE = {"scoring": "u_words", "batch_size": 4, "steps": 8, "negatives": {"mode": "candidates", "m": 2}}
#: the runs of the tree: Penha's order x pacing, HCL's corpus threshold with guarded neighbours, MacAvaney's
#: weights on a pointwise loss (a query-level function) and on a pairwise one (a pair-level function's D_pair)
RUNS = {
    "penha": {**BASE, "pacing": {"name": "root_2"}, "loss": "pairwise_ce", "negatives": {"mode": "candidates"}},
    "hcl": {**BASE, "pacing": {"name": "hcl", "r0": 0.4, "T0": 0.1, "T": 0.5}, "loss": "hinge",
            "negatives": {"mode": "neighbors", "m": 2, "pacing": {"kT": 0.5, "T": 0.5}, "false_negative_guard": 0.8}},
    "macavaney_point": {**BASE, "loss": "pointwise_ce",
                        "weighting": {"scoring": "u_words", "m": 2, "iteration_steps": 2}},
    "macavaney_pair": {**BASE, "loss": "pairwise_ce", "weighting": {"scoring": "recip", "m": 2, "iteration_steps": 2}},
}
SEED = 1


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    layout, data = build_tree(tmp_path_factory.mktemp("eco_st"))
    write_dense(layout, data)
    write_difficulty(layout, data)
    for name, values in RUNS.items():
        write_run(layout, name, SEED, values)
    return layout


def test_a_run_reads_back_its_curriculum(tree):
    run = run_curriculum(tree.root, "hcl", SEED)
    assert run.folder == Path(tree.curriculum("u_words")) and run.arm.pacing.mode == "threshold"
    assert run.arm.negatives.guard == 0.8 and run.spec.objective.batch_size == 4
    assert set(run.table_paths()) == {"neighbors", "query_vectors", "doc_vectors"}
    assert set(run_curriculum(tree.root, "macavaney_pair", SEED).table_paths()) == {"weights"}


def test_the_dataset_rows_are_the_curriculum_with_the_pipelines_guarded_negatives(tree):
    run = run_curriculum(tree.root, "hcl", SEED)
    step = 2  # early in HCL's instance pacing: a window wider than the stored neighbours
    table = instance_table(run, step)
    assert table["position"].to_list() == list(range(len(run.curriculum())))
    data = read_data(tree.root)
    sampler = negative_sampler(run, data)
    assert sampler.space(step) > 12  # the 12 stored neighbours and unseen ranks past them
    codes, _ = draw_negatives(table.select("qid", "docid"), sampler, step)
    drawn = [[sampler.docids[c] for c in row] for row in codes.tolist()]
    assert table["negative_docids"].to_list() == drawn  # the pipeline's own draw at that step
    relevant = data["qrels"].filter(pl.col("rel") > 0).group_by("qid").agg("docid")
    relevant = dict(zip(relevant["qid"].to_list(), relevant["docid"].to_list()))
    neighbours = pl.read_parquet(tree.dense()["neighbors"])
    vectors = {r["id"]: np.asarray(r["vector"]) for r in pl.read_parquet(tree.dense_vectors("docs")).iter_rows(
        named=True)}
    queries = {r["id"]: np.asarray(r["vector"]) for r in pl.read_parquet(tree.dense_vectors("queries")).iter_rows(
        named=True)}
    listed = 0
    for row in table.iter_rows(named=True):
        assert not set(row["negative_docids"]) & set(relevant[row["qid"]])
        g_pos = min(float(queries[row["qid"]] @ vectors[d]) for d in relevant[row["qid"]])
        stored = set(neighbours.filter(pl.col("qid") == row["qid"])["docid"].to_list())
        for d in row["negative_docids"]:
            if d in stored:  # HCL's guard: never a neighbour above 0.8 x G(c, r+)
                listed += 1
                assert float(queries[row["qid"]] @ vectors[d]) <= 0.8 * g_pos + 1e-6
    assert listed > 0
    last = run.arm.length - 1  # HCL's smallest window at the run's end: k = 10^0.5 -> the top 3 neighbours
    fresh = negative_sampler(run, data)
    assert fresh.space(last) == 3
    codes, fell = draw_negatives(table.select("qid", "docid"), fresh, last)
    for qid, row, fallback in zip(table["qid"].to_list(), codes.tolist(), fell.tolist()):
        top = neighbours.filter(pl.col("qid") == qid).sort("rank")["docid"].to_list()[:3]
        assert fallback or {fresh.docids[c] for c in row} <= set(top)  # none of the 3 left: the pool's
    assert not fell.all()
    dataset = instance_dataset(run, step)
    assert dataset.column_names == ["query", "positive", "negative_1", "negative_2"]
    assert dataset["query"] == table["query"].to_list() and dataset["negative_2"] == table["negative_2"].to_list()


def test_weighted_runs_carry_each_elements_ease_as_the_label(tree):
    point = instance_dataset(run_curriculum(tree.root, "macavaney_point", SEED))
    pair = instance_dataset(run_curriculum(tree.root, "macavaney_pair", SEED))
    assert point.column_names[-1] == pair.column_names[-1] == "label"
    assert {len(x) for x in point["label"]} == {3} and {len(x) for x in pair["label"]} == {2}  # 1 + m, m
    assert all(0.0 <= v <= 1.0 for row in pair["label"] for v in row)
    assert "label" not in instance_dataset(run_curriculum(tree.root, "penha", SEED)).column_names


@pytest.fixture(scope="module")
def model_folder(tree, tmp_path_factory):
    """A 1-layer mean-pooled cross-encoder saved as the pipeline saves one (its folder loads in
    sentence-transformers)."""
    from curricula.models import build_ranker

    spec = run_curriculum(tree.root, "penha", SEED).spec
    folder = tmp_path_factory.mktemp("ce") / "model"
    build_ranker(spec.ranker, seed=3).save(folder)
    return folder


def peer(folder: Path):
    """sentence-transformers' own CrossEncoder loaded from a folder this pipeline saved."""
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(folder), device="cpu", local_files_only=True)


def trainer_for(model, run, dataset, loss, tmp_path: Path, seed: int = SEED, **extra):
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments

    args = CrossEncoderTrainingArguments(
        output_dir=str(tmp_path / "st"), per_device_train_batch_size=run.spec.objective.batch_size, seed=seed,
        batch_sampler=run_batch_sampler(run), use_cpu=True, report_to="none", save_strategy="no",
        disable_tqdm=True, dataloader_num_workers=0, learning_rate=1e-3, logging_steps=1, **extra)
    callbacks = [loss.step_callback()] if isinstance(loss, CurriculumLoss) else []
    return CrossEncoderTrainer(model=model, args=args, train_dataset=dataset, loss=loss, callbacks=callbacks)


def pipeline_rows(run, dataset, seed: int, steps: range) -> list[list[tuple[str, str]]]:
    """The (query, positive) texts of the pipeline's own curriculum batches at ``steps``."""
    sampler = CurriculumSampler(run.curriculum(), run.arm.pacing, run.spec.objective.batch_size, seed)
    return [[(dataset[i]["query"], dataset[i]["positive"]) for i in sampler.positions(s).tolist()] for s in steps]


def loader_rows(batches) -> list[list[tuple[str, str]]]:
    return [list(zip(b["query"], b["positive"])) for b in batches]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["penha", "hcl"])
def test_the_trainer_draws_the_pipelines_batches_in_order_and_resumes(tree, model_folder, tmp_path, name):
    from accelerate import skip_first_batches

    run = run_curriculum(tree.root, name, SEED)
    dataset = instance_dataset(run)
    model = peer(model_folder)
    loss = CurriculumLoss(model, run.spec.objective.loss)
    loader = trainer_for(model, run, dataset, loss, tmp_path).get_train_dataloader()
    steps = run.arm.length
    assert len(loader) == steps
    assert loader_rows(loader) == pipeline_rows(run, dataset, SEED, range(steps))
    loader.set_epoch(1)  # the trainer's second epoch: the pipeline's steps after the first `steps`
    assert loader_rows(loader) == pipeline_rows(run, dataset, SEED, range(steps, 2 * steps))
    loader.set_epoch(0)  # a run resumed after 3 steps: the trainer skips the batches it trained
    assert loader_rows(skip_first_batches(loader, 3)) == pipeline_rows(run, dataset, SEED, range(3, steps))
    other = trainer_for(model, run, dataset, loss, tmp_path, seed=SEED + 1).get_train_dataloader()
    assert loader_rows(other) == pipeline_rows(run, dataset, SEED + 1, range(steps)) != loader_rows(loader)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["macavaney_point", "macavaney_pair"])
def test_the_weighted_loss_equals_the_pipelines_on_the_same_batch(tree, model_folder, name):
    from curricula.curriculum.weighting import PairEase
    from curricula.difficulty import difficulty_spec
    from curricula.experiments.train import RankerSteps, train_texts
    from curricula.models import load_ranker
    from curricula.models.runtime import JobRuntime
    from curricula.plumbing.contracts import read_table

    run = run_curriculum(tree.root, name, SEED)
    data = read_data(tree.root)
    ranker = load_ranker(model_folder, device="cpu")
    negs = negative_sampler(run, data)
    table = read_table(run.table_paths()["weights"], difficulty_spec([run.arm.weighting.scoring]))
    ease = PairEase.from_weighting(table, run.arm.weighting, negs.q_of, negs.code_of, len(negs.docids))
    context_of, doc_texts = train_texts(data["queries"], data["docs"])
    runtime = JobRuntime(torch.device("cpu"), None, "fp32", torch.get_num_threads(), {})
    sampler = CurriculumSampler(run.curriculum(), run.arm.pacing, run.spec.objective.batch_size, SEED)
    steps = RankerSteps(run.spec, runtime, ranker, sampler, negs, ease, context_of, doc_texts, None, None,
                        data["qrels"], 1)
    model = peer(model_folder).eval()  # dropout off on both sides: one function of the batch
    loss = CurriculumLoss(model, run.spec.objective.loss, run.arm.weighting)
    mirror = negative_sampler(run, data)  # the same seed: the same draws at the same step
    for step in (0, 3, 5):  # W = D at iteration 0, between at 1, 1 from iteration m = 2 on
        theirs = float(steps.step_loss(step).detach())
        batch = sampler.batch(step)
        codes, fell = draw_negatives(batch, mirror, step)
        labels = torch.from_numpy(ease_matrix(run, mirror, batch, codes, fell))
        inputs = [[context_of[q] for q in batch["qid"].to_list()],
                  [doc_texts[negs.code_of[d]] for d in batch["docid"].to_list()],
                  *[[doc_texts[c] for c in codes[:, j]] for j in range(codes.shape[1])]]
        loss.step = step
        with torch.inference_mode():
            ours = float(loss(inputs, list(labels)))
            width = len(inputs) - 1  # the positive and its m negatives
            logits = ranker.pair_logits([q for q in inputs[0] for _ in range(width)],
                                        [col[i] for i in range(len(inputs[0])) for col in inputs[1:]],
                                        torch.device("cpu"), "fp32").view(len(inputs[0]), width)
            same_scores = float(weighted_group_loss(logits, loss.loss, ease=labels, weighting=run.arm.weighting,
                                                    step=step))
        assert same_scores == theirs  # the same logits: the same loss, exactly
        assert abs(ours - theirs) <= 1e-5, (step, ours, theirs)  # the peer's logits agree to 1e-5


@pytest.mark.slow
def test_a_short_training_runs_and_its_model_loads_in_the_pipeline(tree, model_folder, tmp_path):
    from sentence_transformers.cross_encoder.losses import RankNetLoss

    from curricula.models import load_ranker, score_pairs

    run = run_curriculum(tree.root, "macavaney_pair", SEED)
    model = peer(model_folder)
    loss = CurriculumLoss(RankNetLoss(model), weighting=run.arm.weighting)
    assert loss.loss == "pairwise_ce"
    before = [p.detach().clone() for p in model.parameters()]
    trainer = trainer_for(model, run, instance_dataset(run), loss, tmp_path, max_steps=4)
    trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert len(losses) == 4 and all(np.isfinite(losses)) and loss.step == 3  # the callback gave it each step
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    out = tmp_path / "trained"
    model.save(str(out))
    pairs = [("hello there", "hi, how are you"), ("what do you do", "i teach at a school")]
    ours = score_pairs(load_ranker(out, device="cpu", max_length=run.spec.ranker.max_length), *zip(*pairs),
                       batch_size=2, precision="fp32", progress=False)
    theirs = model.predict(pairs, activation_fn=torch.nn.Identity(), show_progress_bar=False)
    assert np.abs(np.asarray(theirs) - ours).max() <= 1e-5

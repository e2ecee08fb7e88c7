"""train_ranker's runs on a few real chitchat instances: every ranker trains deterministically and resumes after a
kill to the same weights, a checkpoint of another config is ignored, early stopping records why it stopped and
resumes, idle knobs change nothing, the diagnostic test column and shadow averages leave the kept model as it was,
and weight averaging changes only the evaluations after the curriculum."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch

from curricula.data.ingest import candidate_pairs
from curricula.experiments.train import train_ranker
from curricula.plumbing.contracts import DEV_CURVE, DEV_CURVE_TEST
from tests.train_data import folder_for, train_spec
from tests.train_data import data, table  # noqa: F401 (module-scoped fixtures: pytest finds them here)


SMALL = {"cross_encoder": {}, "convknrm": {"channels": 8, "hidden": 8, "kernels": 5},
         "lstm_qa": {"channels": 8, "hidden": 8, "dropout": 0.5}}


@pytest.mark.slow
@pytest.mark.parametrize("ranker", list(SMALL))
def test_training_is_deterministic_and_resumes_to_the_same_weights(data, table, tmp_path, ranker):
    """Every ranker (dropout included: the torch RNG is checkpointed) resumes to the uninterrupted weights."""
    folder = folder_for(table, "u_words", tmp_path)
    spec = train_spec(scoring="u_words", pacing={"name": "root_2"},
                      weighting={"scoring": "u_words", "m": 2, "iteration_steps": 2},
                      ranker=ranker, architecture=SMALL[ranker])
    kw = dict(curriculum_dir=folder, weights=table, progress=False)
    a = train_ranker(data, spec, 7, model_out=tmp_path / "a", checkpoint_dir=tmp_path / "a.ckpt", **kw)
    b = train_ranker(data, spec, 7, model_out=tmp_path / "b", checkpoint_dir=tmp_path / "b.ckpt", **kw)
    assert a.columns == list(DEV_CURVE.columns) and a["step"].to_list() == [3, 6]
    assert a.equals(b)  # no wall-clock column: same config and seed give identical curves
    assert not (tmp_path / "a.ckpt").exists()  # cleared after a finished run

    class Killed(Exception):
        pass

    def kill_at_5(done: int) -> None:
        if done == 5:
            raise Killed

    with pytest.raises(Killed):
        train_ranker(data, spec, 7, model_out=tmp_path / "c", checkpoint_dir=tmp_path / "c.ckpt",
                     on_step=kill_at_5, **kw)
    assert not (tmp_path / "c").exists()
    state = torch.load(tmp_path / "c.ckpt" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 4 and [r["step"] for r in state["curve"]] == [3]
    c = train_ranker(data, spec, 7, model_out=tmp_path / "c", checkpoint_dir=tmp_path / "c.ckpt", **kw)
    assert c.equals(a)
    from safetensors.torch import load_file

    wa, wc = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "c" / "model.safetensors")
    assert wa.keys() == wc.keys() and all(torch.equal(wa[k], wc[k]) for k in wa)
    assert json.loads((tmp_path / "a" / "ranker.json").read_text())["ranker"] == ranker
    other = train_ranker(data, spec, 8, model_out=tmp_path / "d", checkpoint_dir=tmp_path / "d.ckpt", **kw)
    assert not other["value"].equals(a["value"]) or not other["train_loss"].equals(a["train_loss"])


@pytest.mark.slow
def test_checkpoint_of_another_config_is_ignored(data, table, tmp_path):
    folder = folder_for(table, "random", tmp_path)
    spec = train_spec(steps=4, eval_every=4)
    kw = dict(curriculum_dir=folder, progress=False)

    def stop(done: int) -> None:
        if done == 3:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        train_ranker(data, spec, 1, model_out=tmp_path / "m", checkpoint_dir=tmp_path / "ck", on_step=stop, **kw)
    assert (tmp_path / "ck" / "checkpoint.pt").exists()
    changed = train_spec(steps=4, eval_every=4, lr=2e-4)
    fresh = train_ranker(data, changed, 1, model_out=tmp_path / "m2", checkpoint_dir=tmp_path / "m2ck", **kw)
    resumed = train_ranker(data, changed, 1, model_out=tmp_path / "m", checkpoint_dir=tmp_path / "ck", **kw)
    assert resumed.equals(fresh)


@pytest.mark.slow
def test_early_stopping_records_why_and_resumes_after_a_kill(data, table, tmp_path):
    """max_steps is the budget, steps the curriculum's length (pacing reaches all instances there), patience counts
    evaluations after it; the curve marks the kept evaluation and why training ended; a kill resumes exactly."""
    folder = folder_for(table, "u_words", tmp_path)
    spec = train_spec(scoring="u_words", pacing={"name": "linear"}, ranker="convknrm",
                      architecture=SMALL["convknrm"], lr=1e-3, steps=4, max_steps=60, patience=2,
                      eval_every=2, checkpoint_every=2)
    kw = dict(curriculum_dir=folder, progress=False)
    a = train_ranker(data, spec, 3, model_out=tmp_path / "a", checkpoint_dir=tmp_path / "a.ckpt", **kw)
    steps = a["step"].to_list()
    assert a["stopped"].to_list() == [None] * (len(steps) - 1) + ["patience"] and steps[-1] < 60
    best = a.filter(pl.col("best"))
    assert best.height == 1 and best["value"][0] == a["value"].max()
    assert best["step"][0] == a.filter(pl.col("value") == a["value"].max())["step"].min()  # the first on ties
    after = [s for s in steps if s > max(best["step"][0], 4)]  # evaluations counted by patience
    assert len(after) == 2
    # the curriculum ends at `steps` (not at max_steps): every later evaluation allows all 40 train instances
    assert set(a.filter(pl.col("step") > 4)["allowed"]) == {40} and a["allowed"][0] < 40

    class Killed(Exception):
        pass

    def kill(done: int) -> None:
        if done == steps[-1] - 1:
            raise Killed

    with pytest.raises(Killed):
        train_ranker(data, spec, 3, model_out=tmp_path / "b", checkpoint_dir=tmp_path / "b.ckpt", on_step=kill, **kw)
    b = train_ranker(data, spec, 3, model_out=tmp_path / "b", checkpoint_dir=tmp_path / "b.ckpt", **kw)
    assert b.equals(a)
    from safetensors.torch import load_file

    wa, wb = load_file(tmp_path / "a" / "model.safetensors"), load_file(tmp_path / "b" / "model.safetensors")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    budget_only = train_ranker(data, spec.with_fit(patience=None, max_steps=6), 3, model_out=tmp_path / "c",
                               checkpoint_dir=tmp_path / "c.ckpt", **kw)
    assert budget_only["step"].to_list() == [2, 4, 6] and budget_only["stopped"][-1] == "budget"


def pinned_training(data, table, tmp_path, **over) -> tuple[str, pl.DataFrame, dict[str, torch.Tensor]]:
    """A tiny training and a sha256 of its dev curve rows and kept weights (``over`` overrides its spec). The digest
    was checked equal before and after weight averaging and the diagnostic column existed (a58556b), but it is not
    pinned here: float bits differ between CPU classes (AVX2, AVX512), on which CI may run."""
    import hashlib

    from safetensors.torch import load_file

    spec = train_spec(ranker="convknrm", architecture=SMALL["convknrm"], lr=1e-3, steps=8,
                      eval_every=2, checkpoint_every=4, **over)
    curve = train_ranker(data, spec, 5, curriculum_dir=folder_for(table, "random", tmp_path), progress=False,
                         model_out=tmp_path / "m", checkpoint_dir=tmp_path / "m.ckpt")
    weights = load_file(tmp_path / "m" / "model.safetensors")
    digest = hashlib.sha256(repr(curve.select(list(DEV_CURVE.columns)).rows()).encode())
    for key in sorted(weights):
        digest.update(key.encode() + weights[key].numpy().tobytes())
    return digest.hexdigest(), curve, weights


@pytest.mark.slow
def test_the_default_training_is_the_training_with_idle_knobs(data, table, tmp_path):
    digest, curve, _ = pinned_training(data, table, tmp_path / "a")
    assert curve.columns == list(DEV_CURVE.columns) and curve["step"].to_list() == [2, 4, 6, 8]
    assert digest == pinned_training(data, table, tmp_path / "b", averaging="none", diagnostic_test=False)[0]


@pytest.mark.slow
def test_the_diagnostic_test_column_never_changes_selection_or_the_kept_model(data, table, tmp_path):
    """diagnostic_test records the test metric at every evaluation and nothing else: the same kept step, dev values,
    train losses and weights as without it, and the kept evaluation's test value is the kept model's test AP."""
    from curricula.experiments.train import dev_metric
    from curricula.models import load_ranker
    from curricula.models.runtime import start_job

    _, off, weights_off = pinned_training(data, table, tmp_path / "off")
    _, on, weights_on = pinned_training(data, table, tmp_path / "on", diagnostic_test=True)
    assert on.columns == [*DEV_CURVE_TEST.columns, "dev_query_values"] and on["test_value"].null_count() == 0
    # steps, dev values, train losses, the kept (best) row, the stop
    assert on.drop("test_value", "dev_query_values").equals(off)
    # each dev query's value at each evaluation (qid order), whose mean is the dev value that selected
    dev_queries = candidate_pairs(data, splits=("dev",))["qid"].n_unique()
    assert on["dev_query_values"].list.len().to_list() == [dev_queries] * on.height
    assert on["dev_query_values"].list.mean().to_list() == pytest.approx(on["value"].to_list(), abs=1e-12)
    assert weights_on.keys() == weights_off.keys() and all(torch.equal(weights_on[k], weights_off[k])
                                                           for k in weights_on)
    spec = train_spec(ranker="convknrm", architecture=SMALL["convknrm"])
    test = candidate_pairs(data, splits=("test",))
    kept = load_ranker(tmp_path / "on" / "m", device="cpu")
    runtime = start_job(spec.runtime, transformer=False, what="test")
    assert on.filter(pl.col("best"))["test_value"][0] == dev_metric(kept, test, data["qrels"], spec.evaluation,
                                                                    runtime)
    assert not on["test_value"].equals(on["value"])


@pytest.mark.slow
def test_a_diagnostic_run_with_shadow_averages_writes_their_columns_and_keeps_the_plain_model(data, table, tmp_path):
    """diagnostic_averages adds ema_/swa_ value and test_value columns to the diagnostic curve (its contract
    checked on write and read) and changes nothing of the trained run: its own columns and kept weights."""
    from curricula.plumbing.contracts import dev_curve_spec, read_dev_curve, write_table

    _, plain, weights_plain = pinned_training(data, table, tmp_path / "plain", max_steps=12, diagnostic_test=True)
    _, shadow, weights = pinned_training(data, table, tmp_path / "shadow", max_steps=12, diagnostic_test=True,
                                         diagnostic_averages=["ema", "swa"])
    extra = [f"{kind}_{key}" for kind in ("ema", "swa") for key in ("value", "test_value", "dev_query_values")]
    assert shadow.columns == [*DEV_CURVE_TEST.columns, "dev_query_values", *extra]
    assert shadow.drop(extra).equals(plain)
    assert shadow["swa_dev_query_values"].list.mean().to_list() == pytest.approx(shadow["swa_value"].to_list())
    assert all(torch.equal(weights[k], weights_plain[k]) for k in weights_plain)
    # before the averages start (the curriculum's end, step 8) they read the trained weights; after, their own
    early, late = shadow.filter(pl.col("step") < 8), shadow.filter(pl.col("step") > 8)
    assert early["swa_value"].equals(early["value"], check_names=False)
    assert late["swa_test_value"].to_list() != late["test_value"].to_list()
    write_table(shadow, tmp_path / "curve.parquet", dev_curve_spec(shadow.columns))
    assert read_dev_curve(tmp_path / "curve.parquet").equals(shadow)


@pytest.mark.slow
def test_weight_averaging_changes_only_evaluations_after_the_curriculum_and_resumes_after_a_kill(data, table,
                                                                                                 tmp_path):
    """SWA from the curriculum's end (step 8 of a 12-step budget): the evaluations at 2..6 are the plain run's; those
    at 8..12 evaluate the average; a killed run resumes (the checkpoint holds the average) to the same curve and
    kept weights."""
    _, plain, _ = pinned_training(data, table, tmp_path / "plain", max_steps=12)
    _, swa, weights = pinned_training(data, table, tmp_path / "swa", max_steps=12, averaging="swa")
    assert swa["step"].to_list() == plain["step"].to_list() == [2, 4, 6, 8, 10, 12]
    columns = ["step", "value", "train_loss", "allowed", "negatives_k"]
    assert swa.filter(pl.col("step") <= 6).select(columns).equals(plain.filter(pl.col("step") <= 6).select(columns))
    # step 8's average is the weights of step 8 alone; 10 and 12 average 2 and 3 evaluations' weights
    assert swa["value"][3] == plain["value"][3] and swa["value"][4:].to_list() != plain["value"][4:].to_list()
    assert swa["train_loss"].to_list() == plain["train_loss"].to_list()  # the average never steers training

    class Killed(Exception):
        pass

    def kill(done: int) -> None:
        if done == 11:
            raise Killed

    spec = train_spec(ranker="convknrm", architecture=SMALL["convknrm"], lr=1e-3, steps=8,
                      eval_every=2, checkpoint_every=4, max_steps=12, averaging="swa")
    kw = dict(curriculum_dir=folder_for(table, "random", tmp_path / "kill"), progress=False,
              model_out=tmp_path / "kill" / "m", checkpoint_dir=tmp_path / "kill" / "m.ckpt")
    with pytest.raises(Killed):
        train_ranker(data, spec, 5, on_step=kill, **kw)
    state = torch.load(tmp_path / "kill" / "m.ckpt" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 8 and state["average"]["kind"] == "swa" and state["average"]["count"] == 1
    resumed = train_ranker(data, spec, 5, **kw)
    assert resumed.equals(swa)
    from safetensors.torch import load_file

    again = load_file(tmp_path / "kill" / "m" / "model.safetensors")
    assert all(torch.equal(again[k], weights[k]) for k in weights)

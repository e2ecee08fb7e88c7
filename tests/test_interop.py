"""A trained cross-encoder's model folder is a standard checkpoint: sentence-transformers' ``CrossEncoder`` and
(for [CLS] pooling) plain ``transformers`` load it and score pairs as this project's evaluation does, long pairs
included: the folder's tokenizer carries the project's truncation rule (``truncation_side`` and
``model_max_length``), so a loader elsewhere cuts every pair as :func:`curricula.models.cross_encoder.pair_token_ids`
does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from curricula.data import chitchat
from curricula.data.ingest import INGEST_TABLES, candidate_pairs
from curricula.models import load_ranker, score_pairs
from curricula.models.heads import MeanPooledCrossEncoder, checkpoint_pooling, load_cross_encoder
from curricula.models.hf import load_tokenizer
from curricula.models.runtime import start_job
from curricula.models.teacher import TeacherConfig, train_cross_encoder, training_texts
from tests.built_once import built_once

# looked up, not imported: importing sentence-transformers takes seconds, which every worker would pay at collection
pytestmark = pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None,
                                reason="sentence-transformers is in requirements.lock; this test compares against it")

#: short enough that most real chitchat pairs are cut, and many on both sides
MAX_LENGTH = 24


@pytest.fixture(scope="module")
def pairs():
    """Real chitchat candidate pairs (up to ten turns of context): 300 training pairs, and the 800 dev and test
    pairs, at least 100 of which have both a context and a response longer than ``MAX_LENGTH`` word pieces."""
    data = chitchat.load({}, max_instances={"train": 30, "dev": 40, "test": 40}, seed=5, max_context_turns=10)
    frames = {name: getattr(data, name) for name in INGEST_TABLES}
    frame = candidate_pairs(frames, splits=("train", "dev", "test"))
    train = frame.filter(frame["split"] == "train")
    held = frame.filter(frame["split"] != "train")
    return training_texts(train), (held["context"].to_list(), held["response"].to_list())


def test_the_pairs_need_truncation_on_both_sides(pairs):
    _, (contexts, responses) = pairs
    tok = load_tokenizer("minilm")
    n_ctx = np.array([len(x) for x in tok(contexts, add_special_tokens=False, verbose=False)["input_ids"]])
    n_rsp = np.array([len(x) for x in tok(responses, add_special_tokens=False, verbose=False)["input_ids"]])
    assert ((n_ctx > MAX_LENGTH) & (n_rsp > MAX_LENGTH)).sum() >= 100  # both sides cut, to half the budget each
    assert (n_ctx + n_rsp + 3 > MAX_LENGTH).mean() > 0.9
    assert (n_ctx + n_rsp + 3 <= MAX_LENGTH).sum() >= 1  # and a pair that is not cut at all


@pytest.fixture(scope="module", params=[("cls", None), ("mean", 2)], ids=["cls-6-layers", "mean-2-layers"])
def trained(request, pairs, tmp_path_factory):
    """A cross-encoder trained for a few steps and saved as the train stage saves it: [CLS] pooling on all 6
    layers (a [CLS] cut of the packaged MiniLM would score every pair alike) and mean pooling on a 2-layer cut;
    (pooling, its folder, the project's scores of the held-out pairs), made once per session (tests.built_once)."""
    pooling, layers = request.param

    def build(folder: Path) -> None:
        (ctx, rsp, y), (contexts, responses) = pairs
        cfg = TeacherConfig(layers=layers, pooling=pooling, max_length=MAX_LENGTH, steps=8, batch_size=8, lr=1e-3,
                            device="cpu", precision="fp32", threads=2)
        ranker, _ = train_cross_encoder(ctx, rsp, y, cfg, start_job(cfg.runtime, True, "teacher training"),
                                        progress=False)
        ranker.save(folder / "model")
        np.save(folder / "ours.npy", project_scores(folder / "model", contexts, responses))

    folder = built_once(tmp_path_factory, f"interop_ce_{pooling}", build)
    return pooling, folder / "model", np.load(folder / "ours.npy")


def project_scores(folder, contexts, responses) -> np.ndarray:
    """The pairs' scores as this project's evaluation computes them, from the folder's ranker."""
    ranker = load_ranker(folder, device="cpu")
    assert ranker.max_length == MAX_LENGTH
    return score_pairs(ranker, contexts, responses, batch_size=32, device=torch.device("cpu"), precision="fp32",
                       progress=False)


@pytest.mark.slow
def test_sentence_transformers_scores_a_trained_folder_as_the_project_does(trained, pairs):
    pooling, folder, ours = trained
    _, (contexts, responses) = pairs
    assert checkpoint_pooling(folder) == pooling
    from sentence_transformers import CrossEncoder

    peer = CrossEncoder(str(folder), device="cpu", local_files_only=True, activation_fn=torch.nn.Identity())
    assert peer.max_seq_length == MAX_LENGTH  # read from the folder, not passed
    theirs = peer.predict(list(zip(contexts, responses)), batch_size=32, show_progress_bar=False)
    assert np.abs(np.asarray(theirs) - ours).max() <= 1e-5
    assert ours.std() > 1e-3  # a trained head separates the pairs; a constant would match trivially


@pytest.mark.slow
def test_transformers_loads_a_cls_folder_and_cuts_pairs_as_the_project_does(trained, pairs):
    pooling, folder, ours = trained
    _, (contexts, responses) = pairs
    if pooling == "mean":
        model = load_cross_encoder(folder)
        assert isinstance(model, MeanPooledCrossEncoder)  # reloaded with its trained head, not a new CLS one
        with pytest.raises(ValueError, match="cannot be loaded with pooling='cls'"):
            load_cross_encoder(folder, pooling="cls")
        return
    import transformers

    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert (tok.truncation_side, tok.model_max_length) == ("left", MAX_LENGTH)
    batch = tok(contexts, responses, padding=True, truncation=True, return_tensors="pt")
    assert batch["input_ids"].shape[1] == MAX_LENGTH
    with torch.inference_mode():
        logits = model(**batch).logits.view(-1).numpy()
    assert np.abs(logits - ours).max() <= 1e-5

"""A trained cross-encoder's model folder is a standard checkpoint: sentence-transformers' ``CrossEncoder`` and
(for [CLS] pooling) plain ``transformers`` load it and score pairs as this project's evaluation does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from curricula.data import chitchat
from curricula.hf import MeanPooledCrossEncoder, checkpoint_pooling, load_cross_encoder
from curricula.ingest import INGEST_TABLES, candidate_pairs
from curricula.models import load_ranker, score_pairs
from curricula.teacher import TeacherConfig, train_cross_encoder, training_texts

sentence_transformers = pytest.importorskip("sentence_transformers", reason="sentence-transformers is in "
                                            "requirements.lock; this test compares against it")

#: long enough that no chitchat pair of the sample is cut, so both sides tokenise the same word pieces
MAX_LENGTH = 512


@pytest.fixture(scope="module")
def pairs():
    """100 real (context, response) candidate pairs of the embedded chitchat data, and 300 training pairs."""
    data = chitchat.load({}, max_instances={"train": 30, "dev": 10, "test": 10}, seed=5, max_context_turns=3)
    frames = {name: getattr(data, name) for name in INGEST_TABLES}
    frame = candidate_pairs(frames, splits=("train", "dev", "test"))
    train = frame.filter(frame["split"] == "train")
    held = frame.filter(frame["split"] != "train")
    return training_texts(train), (held["context"].to_list(), held["response"].to_list())


@pytest.fixture(scope="module", params=[("cls", None), ("mean", 2)], ids=["cls-6-layers", "mean-2-layers"])
def trained(request, pairs, tmp_path_factory):
    """A cross-encoder trained for a few steps and saved as the train stage saves it: [CLS] pooling on all 6
    layers (a [CLS] cut of the packaged MiniLM would score every pair alike) and mean pooling on a 2-layer cut."""
    (ctx, rsp, y), _ = pairs
    pooling, layers = request.param
    cfg = TeacherConfig(layers=layers, pooling=pooling, max_length=MAX_LENGTH, steps=8, batch_size=8, lr=1e-3,
                        device="cpu", precision="fp32", threads=2)
    ranker, _ = train_cross_encoder(ctx, rsp, y, cfg, progress=False)
    folder = tmp_path_factory.mktemp(f"ce_{pooling}") / "model"
    ranker.save(folder)
    return pooling, folder


def project_scores(folder, contexts, responses) -> np.ndarray:
    ranker = load_ranker(folder, device="cpu")
    assert ranker.max_length == MAX_LENGTH
    return score_pairs(ranker, contexts, responses, batch_size=16, device=torch.device("cpu"), precision="fp32",
                       progress=False)


def test_sentence_transformers_scores_a_trained_folder_as_the_project_does(trained, pairs):
    pooling, folder = trained
    _, (contexts, responses) = pairs
    contexts, responses = contexts[:100], responses[:100]
    assert len(contexts) == 100
    ours = project_scores(folder, contexts, responses)
    assert checkpoint_pooling(folder) == pooling
    peer = sentence_transformers.CrossEncoder(str(folder), device="cpu", local_files_only=True,
                                              activation_fn=torch.nn.Identity())
    theirs = peer.predict(list(zip(contexts, responses)), batch_size=16, show_progress_bar=False)
    assert np.abs(np.asarray(theirs) - ours).max() <= 1e-5
    assert ours.std() > 1e-3  # a trained head separates the pairs; a constant would match trivially


def test_transformers_loads_a_cls_folder_and_rejects_none_of_it(trained, pairs):
    pooling, folder = trained
    _, (contexts, responses) = pairs
    ours = project_scores(folder, contexts[:100], responses[:100])
    if pooling == "mean":
        model = load_cross_encoder(folder)
        assert isinstance(model, MeanPooledCrossEncoder)  # reloaded with its trained head, not a new CLS one
        with pytest.raises(ValueError, match="cannot be loaded with pooling='cls'"):
            load_cross_encoder(folder, pooling="cls")
        return
    import transformers

    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    batch = tok(contexts[:100], responses[:100], padding=True, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**batch).logits.view(-1).numpy()
    assert np.abs(logits - ours).max() <= 1e-5

"""The rankers behind one interface: ConvKNRM and the CNN/LSTM answer-selection networks as modules (dropout,
gradients, padding invariance), their scoring batches, MC-dropout, seeding, save/load, embeddings from a .vec file
(kernel pooling: tests/test_kernel_pooling.py; work done once for repeated contexts and tokens:
tests/test_repeated_contexts.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from curricula.experiments.spec import parse_train_spec
from curricula.experiments.specs import resolve_ranker
from curricula.models import ARCHITECTURES, build_ranker, load_ranker, resolve_architecture, score_pairs
from curricula.models.base import mc_dropout_probabilities
from curricula.models.text import pad_side, read_vec, two_sided_ids
from tests.ranker_inputs import CONTEXTS, FAST, RESPONSES, _batch, _modules, spec


# ------------------------------------------------------------------------------------------- modules
@pytest.mark.parametrize("name", FAST)
def test_forward_is_deterministic_without_dropout_and_stochastic_with_it(name):
    q, qm, d, dm = _batch()
    off = _modules(0.5)[name].eval()
    assert torch.equal(off(q, qm, d, dm), off(q, qm, d, dm))
    on = _modules(0.5)[name].train()
    torch.manual_seed(1)
    a = on(q, qm, d, dm)
    b = on(q, qm, d, dm)
    assert not torch.allclose(a, b)


@pytest.mark.parametrize("name", FAST)
def test_gradients_reach_the_embeddings(name):
    q, qm, d, dm = _batch()
    module = _modules(0.0)[name].train()
    module(q, qm, d, dm).sum().backward()
    grad = module.embedding.weight.grad
    assert grad is not None
    used = torch.unique(torch.cat([q[qm > 0], d[dm > 0]]))
    assert grad[used].abs().sum(dim=1).gt(0).float().mean() > 0.5  # most used rows move
    unused = torch.tensor(sorted(set(range(50)) - set(used.tolist())))
    if len(unused):
        assert grad[unused].abs().sum() == 0


@pytest.mark.parametrize("name", FAST)
def test_padding_does_not_change_a_score(name):
    """A pair scored alone equals the same pair padded to the width of a longer batch-mate."""
    module = _modules(0.0)[name].eval()
    q, qm, d, dm = _batch()
    alone = module(q[1:2, :4], qm[1:2, :4], d[1:2, :3], dm[1:2, :3])
    batched = module(q, qm, d, dm)[1:2]
    assert torch.allclose(alone, batched, atol=1e-6)


@pytest.mark.parametrize("name", [n for n in FAST if n != "convknrm"])
def test_two_sided_scoring_batches_responses_of_about_the_same_length(name):
    """The batching key orders pairs by response length, then context length: a response's width decides most of
    a two-sided ranker's padded work, while contexts are mostly cut at the same length."""
    ranker = build_ranker(parse_train_spec(resolve_ranker(spec(name))).ranker, seed=0)
    items = [([1] * 60, [2] * 30), ([1] * 5, [2] * 31), ([1] * 64, [2] * 3), ([1] * 10, [2] * 3)]
    order = sorted(range(len(items)), key=lambda i: ranker.length(items[i]))
    assert order == [3, 2, 0, 1]


def test_convknrm_scoring_batches_hold_a_context_with_its_candidates():
    """ConvKNRM's batching key puts the pairs of one context next to each other (its matches are one product per
    context), by response length within the context."""
    ranker = build_ranker(parse_train_spec(resolve_ranker(spec("convknrm"))).ranker, seed=0)
    a, b = [1] * 60, [1, 5] * 4
    items = [(a, [2] * 30), (b, [2] * 31), (a, [2] * 3), (b, [2] * 3), (a, [2] * 9)]
    order = sorted(range(len(items)), key=lambda i: ranker.length(items[i]))
    runs = [[i for i in order if items[i][0] == ctx] for ctx in (a, b)]
    assert runs[0] == [2, 4, 0] and runs[1] == [3, 1]  # within a context, shortest response first
    first = runs[0] if order[0] in runs[0] else runs[1]
    assert order[: len(first)] == first  # each context's pairs in one run


def test_encode_caches_the_ids_of_each_text():
    ranker = build_ranker(parse_train_spec(resolve_ranker(spec("convknrm"))).ranker, seed=0)
    contexts = [CONTEXTS[0], CONTEXTS[0], CONTEXTS[1], CONTEXTS[0]]
    items = ranker.encode(contexts, RESPONSES)
    assert items == two_sided_ids(ranker.tokenizer, contexts, RESPONSES, 64, 64)
    assert ranker.encode(contexts, RESPONSES) == items and len(ranker._ids) == 2 + 4  # contexts + responses
    assert torch.equal(pad_side([[5, 6], [7]], 3)[0], torch.tensor([[5, 6, 0], [7, 0, 0]]))
    assert torch.equal(pad_side([[5, 6], [7]], 3)[1], torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))


# ------------------------------------------------------------------------------------------- rankers
@pytest.mark.parametrize("name", FAST + ("cross_encoder",))
def test_same_seed_same_ranker_and_save_load_round_trip(name, tmp_path):
    # fp32 pinned: in bf16 ("auto" for the cross-encoder on a CPU with bf16 instructions) scores depend on the
    # batch's padded width, and this test also checks batch independence (batch_size 2, then 4)
    a = build_ranker(parse_train_spec(resolve_ranker(spec(name))).ranker, seed=3)
    b = build_ranker(parse_train_spec(resolve_ranker(spec(name))).ranker, seed=3)
    c = build_ranker(parse_train_spec(resolve_ranker(spec(name))).ranker, seed=4)
    sa = score_pairs(a, CONTEXTS, RESPONSES, batch_size=2, progress=False, precision="fp32")
    assert np.array_equal(sa, score_pairs(b, CONTEXTS, RESPONSES, batch_size=2, progress=False, precision="fp32"))
    assert not np.allclose(sa, score_pairs(c, CONTEXTS, RESPONSES, batch_size=2, progress=False, precision="fp32"))
    a.save(tmp_path / "r")
    again = load_ranker(tmp_path / "r")
    assert type(again) is type(a)
    again_scores = score_pairs(again, CONTEXTS, RESPONSES, batch_size=4, progress=False, precision="fp32")
    np.testing.assert_allclose(again_scores, sa, atol=1e-6)


@pytest.mark.parametrize("name", FAST)
def test_mc_dropout_passes_differ_and_restore_eval_mode(name):
    ranker = build_ranker(parse_train_spec(resolve_ranker(spec(name, dropout=0.5))).ranker, seed=1)
    assert ranker.has_dropout()
    ranker.eval()
    torch.manual_seed(0)
    p1 = score_pairs(ranker, CONTEXTS, RESPONSES, batch_size=4, progress=False, stochastic=True)
    p2 = score_pairs(ranker, CONTEXTS, RESPONSES, batch_size=4, progress=False, stochastic=True)
    assert not np.allclose(p1, p2)
    assert not ranker.module.training and not any(m.training for m in ranker.module.modules())
    d1 = score_pairs(ranker, CONTEXTS, RESPONSES, batch_size=4, progress=False)
    np.testing.assert_allclose(d1, score_pairs(ranker, CONTEXTS, RESPONSES, batch_size=1, progress=False), atol=1e-6)


@pytest.mark.parametrize("name", FAST)
def test_without_embedding_dropout_mc_passes_featurise_once_and_draw_the_masks_full_passes_draw(name):
    """With ``embedding_dropout: 0`` the features are deterministic, so ``mc_forward`` computes them once per batch;
    the per-pass masks come from the same random stream in the same order, so the passes equal full forward
    passes under the same seed. With embedding dropout on, each pass is a full forward pass."""
    q, qm, d, dm = _batch()
    batch = {"q": q, "q_mask": qm, "d": d, "d_mask": dm}
    for emb_rate in (0.0, 0.5):
        module = _modules(0.5, embedding_dropout=emb_rate)[name].train()
        torch.manual_seed(3)
        once = module.mc_forward(batch, 4)
        torch.manual_seed(3)
        full = torch.stack([module(q, qm, d, dm) for _ in range(4)])
        torch.testing.assert_close(once, full, rtol=1e-6, atol=1e-6)
        assert once.shape == (4, 3) and not torch.allclose(once[0], once[1])
    calls = []
    module = _modules(0.5, embedding_dropout=0.0)[name].train()
    # ConvKNRM computes both sides' n-grams in one packed call on the CPU; the others encode each side once
    part, expected = ("packed_features", 1) if name == "convknrm" else ("side", 2)
    encoder = getattr(module, part)
    setattr(module, part, lambda *a, **k: (calls.append(1), encoder(*a, **k))[1])
    module.mc_forward(batch, 5)
    assert len(calls) == expected  # once for all 5 passes


def test_mc_dropout_probabilities_use_the_ranker_passes_and_keep_input_order():
    ranker = build_ranker(
        parse_train_spec(resolve_ranker(spec("convknrm", dropout=0.3, embedding_dropout=0.0))).ranker, seed=1)
    torch.manual_seed(0)
    probs = mc_dropout_probabilities(ranker, CONTEXTS, RESPONSES, passes=6, batch_size=3, progress=False)
    assert probs.shape == (6, 4) and np.all((probs > 0) & (probs < 1))
    assert not np.allclose(probs[0], probs[1])
    # each pair's passes scatter around its deterministic score (dropout is unbiased in expectation)
    plain = score_pairs(ranker, CONTEXTS, RESPONSES, batch_size=4, progress=False)
    reordered = mc_dropout_probabilities(ranker, CONTEXTS[::-1], RESPONSES[::-1], passes=200, batch_size=3,
                                         progress=False)[:, ::-1]
    mean_logit = np.log(reordered / (1 - reordered)).mean(axis=0)
    assert np.corrcoef(mean_logit, plain)[0, 1] > 0.9


def test_embedding_dropout_defaults_to_the_dropout_rate():
    for name in FAST:  # unset, it stays out of the resolved knobs: existing specs (and Snakemake params) unchanged
        assert "embedding_dropout" not in resolve_architecture(name, {"embedding_dropout": None})
        assert resolve_architecture(name, {"embedding_dropout": 0.0})["embedding_dropout"] == 0.0
    q, qm, d, dm = _batch()
    same = _modules(0.5)["cnn_qa"]
    assert same.dropout.p == 0.5
    assert _modules(0.5, embedding_dropout=0.0)["cnn_qa"].dropout.p == 0.0
    assert _modules(0.5, embedding_dropout=0.0)["convknrm"].embedding_dropout.p == 0.0
    assert _modules(0.5)["convknrm"].embedding_dropout.p == 0.5


def test_convknrm_has_no_dropout_by_default_and_qa_models_have_wangs_half():
    assert resolve_architecture("convknrm", {})["dropout"] == 0.0
    assert resolve_architecture("cnn_qa", None)["dropout"] == 0.5
    assert resolve_architecture("lstm_qa", {"dropout": None})["dropout"] == 0.5
    with pytest.raises(ValueError, match="kernels.*lstm_qa"):
        resolve_architecture("lstm_qa", {"kernels": 11})
    with pytest.raises(ValueError, match="unknown ranker"):
        resolve_architecture("bm25", {})
    assert set(ARCHITECTURES) >= {"cross_encoder", "convknrm", "cnn_qa", "lstm_qa"}  # the built-in ones



def test_a_bare_hf_checkpoint_needs_max_length(tmp_path):
    from curricula.models.hf import resolve_model_dir

    with pytest.raises(ValueError, match="max_length"):
        load_ranker(resolve_model_dir("minilm"))
    with pytest.raises(FileNotFoundError):
        load_ranker(tmp_path / "absent")


def test_two_sided_ids_keep_the_latest_context_and_the_first_response_pieces():
    from curricula.models.hf import load_tokenizer

    tok = load_tokenizer("minilm")
    (q, d), (q2, d2) = two_sided_ids(tok, ["early words " * 10 + "latest turn", ""], ["a reply here", ""], 3, 2)
    assert tok.convert_ids_to_tokens(q) == ["words", "latest", "turn"]
    assert tok.convert_ids_to_tokens(d) == ["a", "reply"]
    assert q2 == [tok.unk_token_id] and d2 == [tok.unk_token_id]


def test_embeddings_from_a_vec_file(tmp_path):
    vec = tmp_path / "tiny.vec"
    vec.write_text("3 2\nhello 1.0 2.0\nWorld 3.0 4.0\nworld 5.0 6.0\n")
    vocab = {"[PAD]": 0, "hello": 1, "world": 2, "##world": 3, "absent": 4}
    m = read_vec(vec, vocab, seed=0)
    assert m.shape == (5, 2)
    assert m[1].tolist() == [1.0, 2.0]
    assert m[2].tolist() == [5.0, 6.0]  # the exact form wins over the lower-cased one
    assert m[3].tolist() == [5.0, 6.0]  # '##' stripped
    assert m[4].abs().max() < 1.0  # seeded small random
    assert torch.equal(m, read_vec(vec, vocab, seed=0))
    bad = tmp_path / "bad.vec"
    bad.write_text("hello 1.0 2.0\nworld 3.0\n")
    with pytest.raises(ValueError, match=r"bad.vec, line 2: vector of 1 values, expected 2"):
        read_vec(bad, vocab)
    bad.write_text("hello 1.0 x\n")
    with pytest.raises(ValueError, match=r"line 1: non-numeric"):
        read_vec(bad, vocab)


def test_fast_ranker_from_a_vec_file(tmp_path):
    vec = tmp_path / "w.vec"
    vec.write_text("hello 0.1 0.2 0.3\nthere 0.3 0.2 0.1\n")
    ranker = build_ranker(
        parse_train_spec(resolve_ranker(spec("convknrm", embeddings=str(vec), channels=4, hidden=0))).ranker, seed=0)
    assert ranker.module.embedding.weight.shape[1] == 3
    scores = score_pairs(ranker, CONTEXTS, RESPONSES, batch_size=4, progress=False)
    assert np.isfinite(scores).all()

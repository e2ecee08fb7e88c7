"""The rankers behind one interface: ConvKNRM's kernel pooling, the CNN/LSTM answer-selection networks, MC-dropout,
padding invariance, seeding, save/load, embeddings from a .vec file."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import torch

from curricula.experiments.spec import parse_train_spec
from curricula.experiments.specs import resolve_ranker
from curricula.models import (
    ARCHITECTURES,
    build_ranker,
    load_ranker,
    resolve_architecture,
    score_pair_rows,
    score_pairs,
)
from curricula.models.base import mc_dropout_probabilities
from curricula.models.convknrm import (
    ConvKNRMModule,
    block_matches,
    context_block,
    context_match_rows,
    pair_match_rows,
    window_mask,
)
from curricula.models.kernel_pooling import (
    EXP_FLOOR,
    flushed_denormals,
    kernel_ladder,
    kernel_mus,
    kernel_pooling,
    kernel_pooling_dense,
    kernel_sigmas,
    ladder_applies,
)
from curricula.models.qa import CNNEncoder, LSTMEncoder, SiameseQAModule
from curricula.models.text import distinct_rows, pad_side, read_vec, two_sided_ids
from curricula.plumbing.shards import Shard

FAST = ("convknrm", "cnn_qa", "lstm_qa")
CONTEXTS = ["hello there how are you doing today", "what is the weather like in paris", "", "ok"]
RESPONSES = ["i am fine thanks and you", "it is sunny", "sure", "see you tomorrow then my friend"]


def spec(ranker: str, **arch) -> dict:
    return {"ranker": ranker, "model": "minilm", "layers": 1, "max_length": 32, "architecture": arch}


# ------------------------------------------------------------------------------------------- kernel pooling
def test_kernel_centres_and_widths_are_knrms():
    assert kernel_mus(11) == pytest.approx([1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9])
    assert kernel_sigmas(3) == [1e-3, 0.1, 0.1]
    with pytest.raises(ValueError):
        kernel_mus(1)


def test_kernel_pooling_equals_a_hand_computed_example():
    # one query of 2 terms (the second is padding) against 3 document terms (the third is padding)
    sim = torch.tensor([[[1.0, 0.9, 0.5], [0.2, 0.2, 0.2]]])
    q_mask = torch.tensor([[1.0, 0.0]])
    d_mask = torch.tensor([[1.0, 1.0, 0.0]])
    mus = torch.tensor([1.0, 0.5])
    sigmas = torch.tensor([0.1, 0.2])
    got = kernel_pooling(sim, q_mask, d_mask, mus, sigmas)
    # only query term 1 and document terms 1-2 count: sims 1.0 and 0.9
    # kernel 1 (mu 1, sigma .1): exp(0) + exp(-.01/.02); kernel 2 (mu .5, sigma .2): exp(-.25/.08) + exp(-.16/.08)
    k1 = 1.0 + math.exp(-0.01 / 0.02)
    k2 = math.exp(-0.25 / 0.08) + math.exp(-0.16 / 0.08)
    assert got.shape == (1, 2)
    assert got[0, 0].item() == pytest.approx(0.01 * math.log(k1), rel=1e-6)
    assert got[0, 1].item() == pytest.approx(0.01 * math.log(k2), rel=1e-6)


def test_kernel_pooling_floors_an_empty_soft_tf_at_1e_minus_10():
    sim = torch.full((1, 1, 2), -1.0)
    got = kernel_pooling(sim, torch.ones(1, 1), torch.ones(1, 2), torch.tensor([1.0]), torch.tensor([1e-3]))
    assert got.item() == pytest.approx(0.01 * math.log(1e-10))



def test_kernel_pooling_over_document_tokens_only_matches_the_padded_computation():
    """The CPU path (kernels at document tokens only) gives the padded computation's features and gradients up to
    float round-off, including a response without tokens (the 1e-10 floor) and padded query positions."""
    g = torch.Generator().manual_seed(3)
    mus, sigmas = torch.tensor(kernel_mus(11)), torch.tensor(kernel_sigmas(11))
    d_len, q_len = torch.tensor([8, 3, 1, 5, 0, 8]), torch.tensor([9, 9, 4, 1, 6, 2])
    d_mask = (torch.arange(8)[None] < d_len[:, None]).float()
    q_mask = (torch.arange(9)[None] < q_len[:, None]).float()
    sim = torch.rand((6, 9, 8), generator=g) * 2 - 1
    sim[0, 0, :3] = torch.tensor([1.0, 0.9995, 0.9])  # in the exact-match kernel's reach
    a, b = sim.clone().requires_grad_(), sim.clone().requires_grad_()
    dense = kernel_pooling_dense(a, q_mask, d_mask, mus, sigmas)
    packed = kernel_pooling(b, q_mask, d_mask, mus, sigmas)
    w = torch.randn(dense.shape, generator=g)
    (dense * w).sum().backward()
    (packed * w).sum().backward()
    torch.testing.assert_close(packed, dense, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-5 * a.grad.abs().max().item())
    assert b.grad[d_mask[:, None, :].expand_as(sim) == 0].abs().max() == 0  # padding gets no gradient
    wide = torch.exp(torch.tensor(1.0)) * torch.ones(11)  # smooth kernels for a finite-difference check
    assert torch.autograd.gradcheck(lambda s: kernel_pooling(s, q_mask.double(), d_mask.double(), mus.double(),
                                                             wide.double()), (sim.double().requires_grad_(),))

@pytest.mark.parametrize("count", [5, 11, 21])
def test_kernel_ladder_equals_one_exp_per_kernel(count):
    """The ladder's kernels (three exps per similarity) equal the per-kernel exps to a relative 3e-5 over cosine
    matches in [-1, 1], wherever the value is in float32's normal range."""
    mus, sigmas = kernel_mus(count), kernel_sigmas(count)
    s = torch.linspace(-1, 1, 2001).reshape(23, 87)
    assert ladder_applies(mus, sigmas, -1.0, 1.0)
    got = kernel_ladder(s, mus, sigmas).permute(1, 0, 2)  # kernel-major -> (N, K, Lq)
    want = torch.exp((-((s.double()[:, None, :] - torch.tensor(mus, dtype=torch.double)[None, :, None]) ** 2)
                      / (2 * torch.tensor(sigmas, dtype=torch.double) ** 2)[None, :, None]).clamp(min=EXP_FLOOR))
    normal = want > 1e-37
    torch.testing.assert_close(got.double()[normal], want[normal], rtol=3e-5, atol=0)
    assert got[~normal].abs().max() <= 1.1e-37  # far tails: tiny or 0, as the floor leaves them


def test_ladder_applies_only_to_even_soft_kernels_within_reach():
    mus, sigmas = kernel_mus(11), kernel_sigmas(11)
    assert ladder_applies(mus, sigmas, 0.0, 1.0)
    assert not ladder_applies(mus, sigmas, -1.0, 2.0)  # the anchor's exponent would leave the normal range
    assert not ladder_applies(mus[:-1] + [-0.95], sigmas, 0.0, 1.0)  # uneven centres
    assert not ladder_applies(mus, sigmas[:-1] + [0.2], 0.0, 1.0)  # unequal widths
    assert not ladder_applies(mus[:2], sigmas[:2], 0.0, 1.0)  # one soft kernel


def test_kernel_pooling_beyond_the_ladders_reach_uses_one_exp_per_kernel():
    """Similarities outside [-1, 1] (not cosines) take the per-kernel path: the padded computation's features."""
    g = torch.Generator().manual_seed(5)
    mus, sigmas = torch.tensor(kernel_mus(11)), torch.tensor(kernel_sigmas(11))
    sim = torch.rand((2, 4, 3), generator=g) * 6 - 3
    ones_q, ones_d = torch.ones(2, 4), torch.ones(2, 3)
    torch.testing.assert_close(kernel_pooling(sim, ones_q, ones_d, mus, sigmas),
                               kernel_pooling_dense(sim, ones_q, ones_d, mus, sigmas), rtol=1e-6, atol=1e-6)


def test_flushed_denormals_flushes_inside_the_block_only():
    tiny, scale = torch.tensor([1e-30]), torch.tensor([1e-10])
    with flushed_denormals():
        assert (tiny * scale).item() == 0.0
    assert (tiny * scale).item() > 0.0


def test_window_mask_keeps_only_full_ngrams():
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0]])
    assert window_mask(mask, 2).tolist() == [[1.0, 1.0, 0.0, 0.0]]
    assert window_mask(mask, 3).tolist() == [[1.0, 0.0, 0.0]]


# ------------------------------------------------------------------------------------------- modules
def _modules(dropout: float, embedding_dropout: float | None = None):
    torch.manual_seed(0)
    emb = torch.randn(50, 8)
    return {
        "convknrm": ConvKNRMModule(emb, [1, 2, 3], channels=6, kernels=5, hidden=4, dropout=dropout,
                                   freeze_embeddings=False, embedding_dropout=embedding_dropout),
        "cnn_qa": SiameseQAModule(emb, CNNEncoder(8, 6, 3), 6, 4, dropout, False, embedding_dropout),
        "lstm_qa": SiameseQAModule(emb, LSTMEncoder(8, 6), 6, 4, dropout, False, embedding_dropout),
    }


def _batch():
    g = torch.Generator().manual_seed(1)
    q = torch.randint(1, 50, (3, 7), generator=g)
    d = torch.randint(1, 50, (3, 5), generator=g)
    q_mask = torch.tensor([[1.0] * 7, [1.0] * 4 + [0.0] * 3, [1.0] * 3 + [0.0] * 4])
    d_mask = torch.tensor([[1.0] * 5, [1.0] * 3 + [0.0] * 2, [1.0] * 5])
    return q, q_mask, d, d_mask


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



def _reference_convknrm(module, q, q_mask, d, d_mask):
    """ConvKNRM as first written: one row per pair, one embedding lookup per side, the padded kernel pooling."""
    qg, dg = module.grams(q, q_mask), module.grams(d, d_mask)
    feats = [kernel_pooling_dense(qh @ dh.transpose(1, 2), qm, dm, module.mus, module.sigmas)
             for qh, qm in qg for dh, dm in dg]
    return module.combine(module.dropout(torch.cat(feats, dim=1))).squeeze(-1)


def test_convknrm_step_with_repeated_contexts_matches_the_per_pair_computation():
    """A training batch repeats each context for its 1 + m responses; each distinct one is convolved once, with
    the logits and gradients of one row per pair up to float round-off."""
    q, q_mask, d, d_mask = _batch()
    rows = torch.tensor([0, 0, 1, 2, 2, 1])  # 6 pairs on 3 contexts
    q, q_mask = q[rows], q_mask[rows]
    d, d_mask = torch.cat([d, d.flip(0)]), torch.cat([d_mask, d_mask.flip(0)])
    fast, slow = _modules(0.0)["convknrm"].train(), _modules(0.0)["convknrm"].train()
    _assert_same_logits_and_gradients(fast, slow, (q, q_mask, d, d_mask), seed=0)


@pytest.mark.parametrize("rows", [[0, 0, 1, 1, 2, 2], [1, 1, 1, 1, 0, 0], [2, 2, 2, 0, 0, 0]])
def test_convknrm_step_on_context_blocks_matches_the_per_pair_computation(rows):
    """A training batch lists each context with its responses one after the other: the matches are one product
    per context (context_match_rows), with the logits and gradients of one row per pair up to float round-off, also
    when one context is drawn twice in a row."""
    q, q_mask, d, d_mask = _batch()
    rows = torch.tensor(rows)
    q, q_mask = q[rows], q_mask[rows]
    d, d_mask = torch.cat([d, d.flip(0)]), torch.cat([d_mask, d_mask.flip(0)])
    assert context_block(distinct_rows(q, q_mask)[2]) > 1  # the block path is taken
    fast, slow = _modules(0.0)["convknrm"].train(), _modules(0.0)["convknrm"].train()
    _assert_same_logits_and_gradients(fast, slow, (q, q_mask, d, d_mask), seed=1)


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


def test_context_block_is_the_common_run_length_of_a_batchs_contexts():
    assert context_block(torch.tensor([3, 3, 1, 1, 0, 0])) == 2
    assert context_block(torch.tensor([0, 0, 0, 0, 1, 1])) == 2  # context 0 drawn twice in a row
    assert context_block(torch.tensor([0, 0, 0, 1, 1, 1])) == 3
    assert context_block(torch.tensor([0, 0, 1, 2, 2, 1])) == 1  # a run of one: no blocks
    assert context_block(torch.tensor([0, 1, 2])) == 1
    assert context_block(torch.tensor([4])) == 1


def test_block_matches_equal_each_pairs_product():
    g = torch.Generator().manual_seed(3)
    q, d = torch.randn(2, 5, 8, generator=g), torch.randn(6, 4, 8, generator=g)
    got = block_matches(q, d, 3)
    torch.testing.assert_close(got, q.repeat_interleave(3, 0) @ d.transpose(1, 2), rtol=1e-6, atol=1e-6)
    assert got.transpose(1, 2).is_contiguous()  # the (B, Ld, Lq) layout kernel_pooling reads without a copy


def test_context_match_rows_are_the_padded_products_rows_at_the_tokens():
    """Each context's response tokens of every side, multiplied by it at once, give the match rows of the padded
    per-pair products at the document tokens, context by context, then side by side and pair by pair, also with a
    response and a context's responses without tokens, and pairs of one context apart in the batch."""
    g = torch.Generator().manual_seed(4)
    q = torch.randn(3, 5, 8, generator=g)
    owner = torch.tensor([2, 2, 0, 0, 1, 2])  # context 2 has pairs 0, 1 and 5
    sides = []
    for ld, lengths in ((4, [4, 1, 0, 0, 3, 2]), (3, [3, 0, 0, 0, 2, 1])):
        d_mask = (torch.arange(ld)[None] < torch.tensor(lengths)[:, None]).float()
        sides.append((torch.randn(6, ld, 8, generator=g), d_mask))
    rows, group = context_match_rows(q, sides, owner)
    want = {}
    for t, (d, d_mask) in enumerate(sides):
        padded = q[owner] @ d.transpose(1, 2)  # (B, Lq, Ld)
        for b, j in (d_mask > 0).nonzero().tolist():
            want.setdefault(int(owner[b]), []).append((t * 6 + b, padded[b, :, j]))
    order = [item for context in sorted(want) for item in want[context]]
    assert group.tolist() == [key for key, _ in order] == [4, 4, 4, 10, 10, 0, 0, 0, 0, 1, 5, 5, 6, 6, 6, 11]
    torch.testing.assert_close(rows, torch.stack([row for _, row in order]), rtol=1e-6, atol=1e-6)
    by_pair, pair_group = pair_match_rows(q, sides, owner)  # the same rows, pair by pair, then side by side
    assert pair_group.tolist() == sorted(pair_group.tolist(), key=lambda k: (k % 6, k // 6))
    for key in set(group.tolist()):  # within a (side, pair) group: position by position in both
        torch.testing.assert_close(by_pair[pair_group == key], rows[group == key], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rows", [[0, 1, 2, 1, 0, 2], [0, 0, 1, 1, 2, 2], [2, 0, 1]])
def test_convknrm_scoring_pass_matches_the_per_pair_computation(rows):
    """In a scoring pass (cached contexts and taps, no gradient) the features come from one product per context
    (contexts with two pairs each) or per pair (a context per pair) and one kernel sum: the reference's logits up to
    float round-off."""
    q, q_mask, d, d_mask = _batch()
    rows = torch.tensor(rows)
    q, q_mask = q[rows], q_mask[rows]
    if rows.numel() == 6:
        d, d_mask = torch.cat([d, d.flip(0)]), torch.cat([d_mask, d_mask.flip(0)])
    module = _modules(0.0)["convknrm"].eval()
    module.context_cache, module.token_cache = {}, {}
    with torch.no_grad():
        got = module(q, q_mask, d, d_mask)
        module.context_cache = module.token_cache = None
        torch.testing.assert_close(got, _reference_convknrm(module, q, q_mask, d, d_mask), rtol=1e-6, atol=1e-6)


def _assert_same_logits_and_gradients(fast, slow, batch, seed: int) -> None:
    """``fast``'s logits and every parameter's gradient (under random weights on the logits) equal those of
    :func:`_reference_convknrm` on ``slow``, a module with the same weights, up to float round-off."""
    got = fast(*batch)
    want = _reference_convknrm(slow, *batch)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    w = torch.randn(got.shape, generator=torch.Generator().manual_seed(seed))
    (got * w).sum().backward()
    (want * w).sum().backward()
    for (name, a), b in zip(fast.named_parameters(), slow.parameters()):
        assert a.grad is not None and a.grad.abs().sum() > 0, name
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("name", FAST)
def test_repeated_contexts_score_as_when_each_pair_is_scored_alone(name):
    q, q_mask, d, d_mask = _batch()
    rows = torch.tensor([2, 0, 0, 1])
    q, q_mask, d, d_mask = q[rows], q_mask[rows], torch.cat([d, d[:1]]), torch.cat([d_mask, d_mask[:1]])
    module = _modules(0.5)[name].eval()
    together = module(q, q_mask, d, d_mask)
    alone = torch.cat([module(q[i:i + 1], q_mask[i:i + 1], d[i:i + 1], d_mask[i:i + 1]) for i in range(4)])
    torch.testing.assert_close(together, alone, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", FAST)
def test_with_dropout_on_the_masks_are_drawn_per_pair_and_side_as_before(name):
    """With dropout drawing masks, repeated contexts are not merged: every pair and side draws its own mask, in
    the order the per-pair computation draws them, so a seed gives the masks it always gave."""
    q, q_mask, d, d_mask = _batch()
    rows = torch.tensor([1, 1, 0])
    q, q_mask = q[rows], q_mask[rows]
    module = _modules(0.5)[name].train()
    torch.manual_seed(7)
    got = module(q, q_mask, d, d_mask)
    torch.manual_seed(7)
    if name == "convknrm":
        torch.testing.assert_close(got, _reference_convknrm(module, q, q_mask, d, d_mask), rtol=1e-6, atol=1e-6)
    else:
        assert torch.equal(got, module.head(module.side(q, q_mask), module.side(d, d_mask)))



def test_a_scoring_pass_computes_each_context_once_with_the_same_scores(monkeypatch):
    """ConvKNRM scores whole contexts per batch on the CPU, so a context's h-gram vectors are computed once per
    scoring pass when a batch holds its candidates: the scores are those of computing each pair on its own and
    of other batchings, and nothing outlives the pass."""
    ranker = build_ranker(parse_train_spec(resolve_ranker(spec("convknrm"))).ranker, seed=2)
    contexts = [c for c in CONTEXTS for _ in range(3)]
    responses = [r + " " + "more words " * i for i in range(3) for r in RESPONSES]
    computed = []
    packed = ranker.module.packed_features
    monkeypatch.setattr(ranker.module, "packed_features", lambda taps, q, *rest: (
        computed.append(q.shape[0]), packed(taps, q, *rest))[1])
    cached = score_pairs(ranker, contexts, responses, batch_size=3, progress=False)
    assert ranker.module.context_cache is None and ranker.module.token_cache is None
    assert sum(computed) == len(set(CONTEXTS)) and len(computed) == len(set(CONTEXTS))  # one batch per context
    monkeypatch.setattr(ranker, "scoring_cache", lambda items=(): contextlib.nullcontext())
    np.testing.assert_allclose(cached, score_pairs(ranker, contexts, responses, batch_size=2, progress=False),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cached, score_pairs(ranker, contexts, responses, batch_size=12, progress=False),
                               rtol=1e-6, atol=1e-6)

@pytest.mark.parametrize("embedding_dropout", [None, 0.0])
def test_convknrm_through_token_taps_equals_the_convolutions_values_and_gradients(embedding_dropout):
    """Without embedding dropout the h-gram vectors are gathered from each distinct token's tap responses
    (E[id] W_{h,o}^T) instead of convolving every padded position: the convolution's values and the gradients of
    every parameter (convolutions, embeddings, combination) up to float round-off."""
    q, q_mask, d, d_mask = _batch()
    fast = _modules(0.3, embedding_dropout)["convknrm"].eval()
    slow = _modules(0.3, embedding_dropout)["convknrm"].eval()
    uniq, rows = torch.unique(q, return_inverse=True)
    for (tq, tm), (cq, cm) in zip(fast.grams_from_taps(fast.token_taps(uniq), rows, q_mask), slow.grams(q, q_mask)):
        torch.testing.assert_close(tq, cq, rtol=1e-6, atol=1e-6)
        assert torch.equal(tm, cm)
    _assert_same_logits_and_gradients(fast, slow, (q, q_mask, d, d_mask), seed=5)


def test_a_scoring_pass_computes_the_taps_of_its_distinct_tokens_once(monkeypatch):
    """Inside a scoring pass the taps of every distinct token id of all the pass's pairs are computed once, in one
    product, before the first batch; every shard of the pass computes that same product, so the scores are the
    same bits however the pairs are sharded, and they equal the convolution's."""
    ranker = build_ranker(parse_train_spec(resolve_ranker(spec("convknrm"))).ranker, seed=2)
    contexts = [c for c in CONTEXTS for _ in range(3)]
    responses = [r + " " + "more words " * i for i in range(3) for r in RESPONSES]
    products = []
    taps = ranker.module.token_taps
    monkeypatch.setattr(ranker.module, "token_taps", lambda ids: (products.append(ids.tolist()), taps(ids))[1])
    small = score_pair_rows(ranker, contexts, responses, batch_size=2, progress=False)[1]
    used = sorted({i for item in ranker.encode(contexts, responses) for side in item for i in side})
    assert products == [used]  # one product, over exactly the distinct ids the pairs read
    rows, parts = zip(*(score_pair_rows(ranker, contexts, responses, batch_size=2, progress=False,
                                        shard=Shard(i, 3)) for i in range(3)))
    assert np.array_equal(np.concatenate(parts)[np.argsort(np.concatenate(rows))], small)
    monkeypatch.setattr(ranker, "scoring_cache", lambda items=(): contextlib.nullcontext())
    monkeypatch.setattr(ranker.module, "features", lambda q, qm, d, dm: torch.cat(
        [kernel_pooling(qh @ dh.transpose(1, 2), qmm, dmm, ranker.module.mus, ranker.module.sigmas)
         for qh, qmm in ranker.module.grams(q, qm) for dh, dmm in ranker.module.grams(d, dm)], dim=1))
    np.testing.assert_allclose(small, score_pairs(ranker, contexts, responses, batch_size=2, progress=False),
                               rtol=1e-5, atol=1e-6)


def test_distinct_rows_tell_ids_and_masks_apart():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0], [5, 6, 0], [5, 6, 0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    uniq, uniq_mask, rows = distinct_rows(ids, mask)
    assert len(uniq) == 3 and rows[0] == rows[2] != rows[3]
    assert torch.equal(uniq[rows], ids) and torch.equal(uniq_mask[rows], mask) and uniq_mask.dtype == mask.dtype


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

"""Work the rankers do once for what a batch or a scoring pass repeats: each distinct context (merged rows, ConvKNRM's
context blocks and match rows, its scoring pass's caches) and each distinct token (ConvKNRM's token taps), with the
per-pair computation's scores and gradients up to float round-off, and dropout's masks drawn as before."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

from curricula.experiments.spec import parse_train_spec
from curricula.experiments.specs import resolve_ranker
from curricula.models import build_ranker, score_pair_rows, score_pairs
from curricula.models.convknrm import block_matches, context_block, context_match_rows, pair_match_rows
from curricula.models.kernel_pooling import kernel_pooling, kernel_pooling_dense
from curricula.models.text import distinct_rows
from curricula.plumbing.shards import Shard
from tests.ranker_inputs import CONTEXTS, FAST, RESPONSES, _batch, _modules, spec


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

"""ConvKNRM's kernel pooling (curricula.models.kernel_pooling): KNRM's kernel centres and widths, a hand-computed
example and the 1e-10 floor, the document-token path and the exp ladder against the padded per-kernel computation
(values and gradients), denormals flushed inside a block only, and the n-gram window mask."""

from __future__ import annotations

import math

import pytest
import torch

from curricula.models.convknrm import window_mask
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

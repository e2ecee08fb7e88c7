"""ConvKNRM's packed n-gram vectors (:mod:`curricula.models.packed`): computed at the token windows only, they are
the padded convolution's vectors there, put back in a padded layout they are zeros elsewhere, and the packed
matches are the padded products' rows at the document windows."""

from __future__ import annotations

import torch

from curricula.models.convknrm import ConvKNRMModule, window_mask
from curricula.models.packed import packed_context_matches, padded_vectors, tap_table, token_windows, window_vectors


def _module_and_side():
    torch.manual_seed(0)
    module = ConvKNRMModule(torch.randn(40, 8), [1, 2, 3], channels=6, kernels=5, hidden=4, dropout=0.0,
                            freeze_embeddings=True)
    ids = torch.tensor([[3, 7, 9, 2, 5], [4, 4, 0, 0, 0], [8, 1, 6, 0, 0]])
    mask = (torch.arange(5)[None, :] < torch.tensor([5, 2, 3])[:, None]).float()
    return module, ids, mask


def _packed(module, ids, mask):
    uniq, index = torch.unique(ids, return_inverse=True)
    taps = module.token_taps(uniq)
    table, zero, bias = tap_table(taps, [conv.bias for conv in module.convs])
    windows = token_windows(index, mask, module.ngrams, taps.shape[1], zero, bias)
    return windows, window_vectors(table, windows)


def test_packed_vectors_are_the_convolutions_at_the_windows_on_tokens_and_zeros_elsewhere():
    module, ids, mask = _module_and_side()
    windows, vectors = _packed(module, ids, mask)
    grams = module.grams(ids, mask)
    expected = sum(int(window_mask(mask, h).sum()) for h in module.ngrams)
    assert vectors.shape == (expected, 6)  # one row per window wholly on tokens: 10 + 6 + 4 here
    for t, (g, valid) in enumerate(grams):
        rows = windows.side == t
        want = g[windows.row[rows], windows.position[rows]]
        torch.testing.assert_close(vectors[rows], want, rtol=1e-6, atol=1e-6)
        assert torch.equal(valid[windows.row[rows], windows.position[rows]], torch.ones(int(rows.sum())))
    widths = [5 - h + 1 for h in module.ngrams]
    padded = padded_vectors(vectors, windows, 3, widths)
    assert padded.shape == (3, sum(widths), 6)
    full = torch.cat([valid for _, valid in grams], dim=1)
    torch.testing.assert_close(padded[full > 0], torch.cat([g for g, _ in grams], dim=1)[full > 0])
    assert padded[full == 0].abs().max() == 0


def test_packed_matches_are_the_padded_products_at_the_document_windows_context_by_context():
    module, ids, mask = _module_and_side()
    windows, vectors = _packed(module, ids, mask)
    torch.manual_seed(1)
    q = torch.nn.functional.normalize(torch.rand(2, 7, 6), dim=-1)  # two contexts
    owner = torch.tensor([1, 0, 1])  # each pair's context
    matches, group = packed_context_matches(q, vectors, windows, owner, batch=3)
    assert matches.shape == (vectors.shape[0], 7)
    context = owner[group % 3]
    assert torch.equal(context, torch.sort(context, stable=True).values)  # context by context
    want = torch.einsum("nc,nlc->nl", vectors, q[owner[windows.row]])  # each window against its pair's context
    order = torch.sort(owner[windows.row], stable=True).indices
    torch.testing.assert_close(matches, want[order], rtol=1e-6, atol=1e-6)
    assert torch.equal(group, (windows.side * 3 + windows.row)[order])
    with torch.no_grad():  # the no-graph path writes the products in place: the same rows
        again, _ = packed_context_matches(q, vectors, windows, owner, batch=3)
    assert torch.equal(again, matches.detach())

"""ConvKNRM's packed n-gram vectors (:mod:`curricula.models.packed`): computed at the token windows only, they are
the padded convolution's vectors there, put back in a padded layout they are zeros elsewhere, and the packed
matches are the padded products' rows at the document windows."""

from __future__ import annotations

import torch

from curricula.models.convknrm import ConvKNRMModule, window_mask
from curricula.models.packed import ContextMatches, TapSums, packed_context_matches, padded_vectors, tap_table, \
    token_windows, window_vectors


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


def test_tap_sums_are_the_gathered_rows_summed_column_by_column_to_the_bit():
    """TapSums computes what ``F.embedding(index, table).sum(dim=0)`` computes, values and the table's gradient
    equal to the bit (repeated rows in a column and across columns included), without the gathered copy."""
    generator = torch.Generator().manual_seed(3)
    table = torch.randn(50, 16, generator=generator, requires_grad=True)
    index = torch.randint(0, 50, (4, 300), generator=generator)
    index[:, :5] = 7  # one row drawn repeatedly
    grad = torch.randn(300, 16, generator=generator)
    want = torch.nn.functional.embedding(index, table).sum(dim=0)
    want.backward(grad)
    want_grad, table.grad = table.grad.clone(), None
    got = TapSums.apply(table, index)
    got.backward(grad)
    assert torch.equal(got, want)
    assert torch.equal(table.grad, want_grad)


def test_context_matches_equal_autograds_products_and_gradients_to_the_bit():
    """ContextMatches computes what ``torch.cat([part @ q[c].t() ...])`` computes, and its backward pass the same
    gradients of both inputs, equal to the bit; a context without rows gets a zero gradient."""
    generator = torch.Generator().manual_seed(5)
    counts = [40, 0, 73, 25]  # the second context has no document window
    q = torch.randn(4, 33, 16, generator=generator, requires_grad=True)
    tokens = torch.randn(sum(counts), 16, generator=generator, requires_grad=True)
    grad = torch.randn(sum(counts), 33, generator=generator)
    contexts = q.unbind(0)
    want = torch.cat([part @ contexts[c].t() for c, part in enumerate(tokens.split(counts)) if counts[c]])
    want.backward(grad)
    want_q, want_tokens = q.grad.clone(), tokens.grad.clone()
    q.grad = tokens.grad = None
    got = ContextMatches.apply(q, tokens, counts)
    got.backward(grad)
    assert torch.equal(got, want)
    assert torch.equal(q.grad, want_q) and torch.equal(tokens.grad, want_tokens)
    assert q.grad[1].abs().max() == 0


def test_a_scoring_pass_builds_its_tap_table_once_and_again_after_new_taps():
    """Inside a scoring pass the tap table of the pass's taps is built once and reused by every batch; after
    prepare_scoring keeps other taps, the table is built from those; outside a pass it is built per call."""
    module, ids, mask = _module_and_side()
    module.context_cache, module.token_cache = {}, {}
    module.prepare_scoring(torch.tensor([3, 7, 9]))
    taps = module.token_cache["taps"]
    first = module.scoring_tap_table(taps)
    assert module.scoring_tap_table(taps) is first
    assert torch.equal(first[0], tap_table(taps, [conv.bias for conv in module.convs])[0])
    module.prepare_scoring(torch.tensor([1, 2]))
    second = module.scoring_tap_table(module.token_cache["taps"])
    assert second is not first and second[0].shape[0] == 2 * 6 + 1 + 3
    module.context_cache = module.token_cache = None
    assert module.scoring_tap_table(taps) is not module.scoring_tap_table(taps)

"""ConvKNRM's n-gram vectors computed at token windows only (packed), for its CPU training path
(:meth:`curricula.models.convknrm.ConvKNRMModule.features`).

A padded side computes an h-gram vector at every position of its widest row; a training batch's responses are
about one third tokens (chitchat's default run: 32 responses padded to 64 word pieces, about 21 of them tokens), so
two thirds of the response side's gathers, ReLUs, normalisations and their backward passes were spent on padding.
Here every h-gram that lies wholly on tokens is one row of a packed table, and each row is computed by one gather
from a table of the convolution taps (:meth:`ConvKNRMModule.token_taps`) that also holds a zero row and each
convolution's bias: conv_h(x)[t] = b_h + sum_o W_{h,o} x_{t+o} is the sum of h + 1 table rows (padded to the
widest n-gram with the zero row), so all n-gram sizes of a side take one gather, one sum, one ReLU and one
normalisation. The rows are the same numbers as the padded path's at the windows on tokens up to the order of the
float sums.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch
import torch.nn.functional as F


class Windows(NamedTuple):
    """The token windows of a padded side, one row each, n-gram size by size, then row by row, then position:
    ``index`` (n, max h + 1) the tap-table rows whose sum is the window's convolution, ``side`` (n,) the n-gram's
    index in ``ngrams``, ``row`` (n,) the padded row and ``position`` (n,) the window's first position."""

    index: torch.Tensor
    side: torch.Tensor
    row: torch.Tensor
    position: torch.Tensor


def tap_table(taps: torch.Tensor, biases: Sequence[torch.Tensor]) -> tuple[torch.Tensor, int, int]:
    """(table, zero row, first bias row): ``taps`` (tokens, T, C) flattened to (tokens * T, C), then a row of zeros,
    then one row per convolution bias (C,), in n-gram order."""
    channels = taps.shape[2]
    flat = taps.reshape(-1, channels)
    zero = flat.new_zeros(1, channels)
    return torch.cat([flat, zero, torch.stack(list(biases))]), flat.shape[0], flat.shape[0] + 1


def token_windows(ids: torch.Tensor, mask: torch.Tensor, ngrams: Sequence[int], taps_per_token: int,
                  zero_row: int, bias_row: int) -> Windows:
    """The :class:`Windows` of a padded side: ``ids`` (B, L) each position's token row in the tap table's tokens,
    ``mask`` (B, L) 1 at tokens. A window of size h starting at position j of row b is taken when positions
    j .. j + h - 1 are all tokens; its index row holds tap o of n-gram h for token ids[b, j + o] (the taps of the
    n-gram sizes lie side by side: ``taps_per_token`` = sum of ``ngrams``), the zero row up to the widest size, and
    the n-gram's bias row. Integer bookkeeping on small arrays, so in numpy on the host (measured, one thread, a
    training batch's two sides: 0.53 ms by torch's operations, each paying its dispatch, 0.24 ms here, the same
    arrays), returned on ``ids``'s device."""
    batch, length = ids.shape
    widest = max(ngrams)
    flat_ids = ids.reshape(-1).cpu().numpy().astype(np.int64)
    tokens = mask.cpu().numpy() > 0
    parts: list[tuple[np.ndarray, ...]] = []
    tap = 0
    for t, h in enumerate(ngrams):
        width = max(length - h + 1, 0)
        full = tokens[:, :width].copy()
        for o in range(1, h):
            full &= tokens[:, o : o + width]
        at = np.flatnonzero(full)
        row, position = np.divmod(at, max(width, 1))
        index = np.empty((at.size, widest + 1), dtype=np.int64)
        offsets = np.arange(h)
        index[:, :h] = flat_ids[(row * length + position)[:, None] + offsets] * taps_per_token + (tap + offsets)
        index[:, h:widest] = zero_row
        index[:, widest] = bias_row + t
        parts.append((index, np.full(at.size, t, dtype=np.int64), row, position))
        tap += h
    return Windows(*(torch.from_numpy(np.concatenate([p[i] for p in parts])).to(ids.device) for i in range(4)))


class TapSums(torch.autograd.Function):
    """(n, C) the sums of the tap-table rows of each window: out[w] = sum over c of table[index[c, w]], ``index``
    (max h + 1, n), summed column by column from the first (the bits of ``F.embedding(index, table).sum(dim=0)``).

    Its backward pass adds the output gradient into the table rows column by column, window by window (one
    ``index_add_`` per column: the order, and so the bits, of ``F.embedding``'s backward over the flattened index).
    Through ``F.embedding`` the backward pass first expands the (n, C) gradient to a (max h + 1, n, C) copy (10 MB
    for a training batch of the default run) and the forward pass gathers the same; here neither is materialised
    (measured, one thread, 5,200 windows x 4 rows of a 3,400 x 128 table: forward and backward 6.5 -> 2.6-3.1 ms,
    values and gradients equal to the bit)."""

    @staticmethod
    def forward(ctx, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        out = table.index_select(0, index[0])
        for column in index[1:]:
            out.add_(table.index_select(0, column))
        ctx.save_for_backward(index)
        ctx.rows = table.shape[0]
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (index,) = ctx.saved_tensors
        grad = grad.contiguous()
        table = grad.new_zeros(ctx.rows, grad.shape[1])
        for column in index:
            table.index_add_(0, column, grad)
        return table, None


def window_vectors(table: torch.Tensor, windows: Windows) -> torch.Tensor:
    """(n, C) the unit-length n-gram vectors of ``windows``: ReLU of the summed tap-table rows (:class:`TapSums`),
    L2-normalised."""
    # summed row by row over the window's columns: whole rows added (measured, one thread: about twice as fast as
    # an (n, max h + 1, C) gather summed over its middle axis)
    return F.normalize(F.relu(TapSums.apply(table, windows.index.t().contiguous())), dim=-1)


def padded_vectors(vectors: torch.Tensor, windows: Windows, rows: int, widths: Sequence[int]) -> torch.Tensor:
    """(rows, sum of ``widths``, C) the packed ``vectors`` put back in a padded layout, n-gram sizes side by side
    (size t's windows at offset sum(widths[:t])); positions without a window are zeros."""
    offsets = torch.tensor([0, *widths[:-1]], device=vectors.device).cumsum(0)
    total = sum(widths)
    at = windows.row * total + offsets[windows.side] + windows.position
    out = vectors.new_zeros(rows * total, vectors.shape[1]).index_copy_(0, at, vectors)  # in place: no second copy
    return out.view(rows, total, vectors.shape[1])


class ContextMatches(torch.autograd.Function):
    """(n, Lq) the products of ``tokens`` (n, C), split into consecutive parts of ``counts`` rows, each against its
    context: rows of part c are ``tokens[part c] @ q[c].t()``, ``q`` (contexts, Lq, C).

    One output written part by part, and a backward pass that writes each part's gradients into one tensor per
    input: the products, and so the bits, of autograd's over ``torch.cat([part @ q[c].t() ...])`` (mm's backward
    takes grad @ q[c] for the part and (grad^T @ part) for the transposed context), without the forward pass's
    concatenation of the match rows (5 MB a training batch of the default run), its backward pass's concatenation
    of the parts' gradients and stack of the contexts', nor three autograd nodes per context."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, tokens: torch.Tensor, counts: list[int]) -> torch.Tensor:
        out = tokens.new_empty(tokens.shape[0], q.shape[1])
        for c, (part, rows) in enumerate(zip(tokens.split(counts), out.split(counts))):
            if counts[c]:
                torch.mm(part, q[c].t(), out=rows)
        ctx.save_for_backward(q, tokens)
        ctx.counts = counts
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        q, tokens = ctx.saved_tensors
        counts = ctx.counts
        grad = grad.contiguous()
        d_tokens = torch.empty_like(tokens) if ctx.needs_input_grad[1] else None  # every row is some part's
        d_q = torch.zeros_like(q) if ctx.needs_input_grad[0] else None  # a context without windows keeps zeros
        token_grads = d_tokens.split(counts) if d_tokens is not None else [None] * len(counts)
        for c, (g, part, d_part) in enumerate(zip(grad.split(counts), tokens.split(counts), token_grads)):
            if not counts[c]:
                continue
            if d_part is not None:
                torch.mm(g, q[c], out=d_part)
            if d_q is not None:
                torch.mm(g.t(), part, out=d_q[c])
        return d_q, d_tokens, None


def packed_context_matches(q: torch.Tensor, vectors: torch.Tensor, windows: Windows, owner: torch.Tensor,
                           batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine match rows (n, Lq) of every packed document window against its pair's context, and each row's group
    t * B + b (n-gram size t, pair b): ``q`` (contexts, Lq, C) the distinct contexts' vectors, ``owner`` (B,) each
    pair's context. Rows come context by context, and within a context size by size, pair by pair, position by
    position; one product per context, (windows, C) @ (C, Lq) (:class:`ContextMatches`)."""
    group = windows.side * batch + windows.row
    context = owner[windows.row]
    order = torch.sort(context, stable=True).indices
    tokens = vectors.index_select(0, order)
    counts = torch.bincount(context, minlength=q.shape[0]).tolist()
    if tokens.shape[0] == 0:
        return tokens.new_zeros(0, q.shape[1]), group
    return ContextMatches.apply(q, tokens, counts), group[order]


__all__ = ["ContextMatches", "TapSums", "Windows", "packed_context_matches", "padded_vectors", "tap_table",
           "token_windows", "window_vectors"]

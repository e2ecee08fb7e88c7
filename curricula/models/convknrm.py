"""ConvKNRM (Dai et al. 2018), the fast interaction ranker of MacAvaney et al. 2020 §4 (``ranker: convknrm``).

Word embeddings -> 1..n-gram convolutions (ReLU, L2-normalised) -> cosine matches of every query h-gram with every
document h'-gram ("cross-matching": n^2 matrices) -> Gaussian kernel pooling (K-NRM, Xiong et al. 2017) ->
a combination layer -> one score. MacAvaney's setting: unigram to tri-gram, cross-matching, 128 hidden nodes for
the combination, 11 kernels, Adam lr 1e-3, pairwise loss (pointwise did not converge for them).

Not implemented: the "score additivity" of Yang et al. 2019 that MacAvaney add on top (a learned interpolation
with the first-stage BM25 score), because the pipeline's negatives are not all from the BM25 list and so have no
first-stage score.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from curricula.models.text import TwoSidedRanker, distinct_rows, dropout_active


def kernel_mus(n: int) -> list[float]:
    """K-NRM kernel centres: 1.0 (exact match), then n - 1 centres evenly inside (-1, 1), e.g. 0.9, 0.7, ..., -0.9
    for n = 11 (Xiong et al. 2017 §3)."""
    if n < 2:
        raise ValueError("kernel pooling needs at least 2 kernels (the exact-match one and one soft one)")
    step = 2.0 / (n - 1)
    return [1.0] + [1.0 - step / 2 - i * step for i in range(n - 1)]


def kernel_sigmas(n: int, exact: float = 1e-3, soft: float = 0.1) -> list[float]:
    """Kernel widths: ``exact`` for the exact-match kernel at 1.0, ``soft`` for the others (K-NRM defaults)."""
    return [exact] + [soft] * (n - 1)


def kernel_pooling(sim: torch.Tensor, q_mask: torch.Tensor, d_mask: torch.Tensor, mus: torch.Tensor,
                   sigmas: torch.Tensor) -> torch.Tensor:
    """K-NRM soft-TF features (B, K) of similarity matrices ``sim`` (B, Lq, Ld).

    K_k(M_i) = sum_j exp(-(M_ij - mu_k)^2 / (2 sigma_k^2)) over valid document positions j;
    phi_k = sum_i 0.01 * log(max(K_k(M_i), 1e-10)) over valid query positions i (Xiong et al. 2017 eq. 3-4; the
    0.01 scale and the 1e-10 floor as in the authors' implementation). Masks are 1 for tokens, 0 for padding.

    On CPU the kernels are evaluated at the document positions that are tokens only (:class:`RowKernelSum`: most
    of a padded batch of responses is padding); elsewhere, and when ``mus`` or ``sigmas`` need gradients, on the
    whole padded matrix (:func:`kernel_pooling_dense`). Both compute the same kernel values up to float round-off
    (the CPU path by :func:`kernel_ladder`, and it floors or flushes values below about 1e-38); the sums over j run
    in another order.
    """
    if sim.device.type != "cpu" or mus.requires_grad or sigmas.requires_grad:
        return kernel_pooling_dense(sim, q_mask, d_mask, mus, sigmas)
    batch, lq, ld = sim.shape
    positions = (d_mask.reshape(-1) > 0).nonzero().squeeze(1)  # flat (b, j) of the document tokens
    rows = sim.transpose(1, 2).reshape(batch * ld, lq).index_select(0, positions)  # (N, Lq): one row per token
    pair = torch.div(positions, ld, rounding_mode="floor")
    return log_soft_tf(RowKernelSum.apply(rows, pair, batch, mus, sigmas), q_mask)


def log_soft_tf(soft_tf: torch.Tensor, q_mask: torch.Tensor) -> torch.Tensor:
    """K-NRM eq. 4: phi_k = sum over valid query positions i of 0.01 * log(max(K_k(M_i), 1e-10)), (B, K) from the
    soft-TF (B, K, Lq) of :class:`RowKernelSum`."""
    return masked_logs(soft_tf, q_mask).sum(dim=2)


def masked_logs(soft_tf: torch.Tensor, q_mask: torch.Tensor) -> torch.Tensor:
    """The terms of K-NRM eq. 4 before the sum over query positions: 0.01 * log(max(K_k(M_i), 1e-10)) at valid
    positions i, 0 at padding; ``soft_tf`` (..., B, K, Lq), ``q_mask`` (B, Lq)."""
    return torch.log(soft_tf.clamp(min=1e-10)) * 0.01 * q_mask[:, None, :]


def kernel_pooling_dense(sim: torch.Tensor, q_mask: torch.Tensor, d_mask: torch.Tensor, mus: torch.Tensor,
                         sigmas: torch.Tensor) -> torch.Tensor:
    """:func:`kernel_pooling` on the whole padded (B, Lq, Ld, K) kernel tensor (padding masked out)."""
    k = torch.exp(-((sim.unsqueeze(-1) - mus) ** 2) / (2 * sigmas**2))  # (B, Lq, Ld, K)
    soft_tf = (k * d_mask[:, None, :, None]).sum(dim=2)  # (B, Lq, K)
    logs = torch.log(soft_tf.clamp(min=1e-10)) * 0.01 * q_mask[..., None]
    return logs.sum(dim=1)


#: the floor of a kernel's exponent on the CPU path. exp(-87) = 1.6e-38 is the smallest power of e above float32's
#: smallest normal number; below it torch's vectorised exp takes a slow path (measured: 10-14x slower per element
#: for exponents in [-100, 0] or [-1e6, 0] than once floored), and the exact-match kernel (sigma 1e-3) sends most
#: exponents far below it. A floored kernel value adds at most 64 x 1.6e-38 to a soft-TF sum, which the sum's
#: 1e-10 floor and float32 rounding absorb, so the features are those of the unfloored exp up to round-off.
EXP_FLOOR = -87.0


def ladder_anchor(count: int) -> int:
    """The kernel (index among all ``count``, the exact-match one first) that :func:`kernel_ladder` computes by exp
    and climbs from: the middle soft kernel."""
    return 1 + (count - 2) // 2


def ladder_applies(mus: Sequence[float], sigmas: Sequence[float], low: float, high: float) -> bool:
    """Whether :func:`kernel_ladder` may compute the soft kernels (all but the first) of similarities in
    [``low``, ``high``]: at least two of them, centres evenly spaced (descending), one width, and the anchor kernel
    (the middle one, computed by exp) above :data:`EXP_FLOOR` over the whole range, so that the ladder starts from
    normal floats (for cosine matches in [-1, 1] and K-NRM's 11 kernels its exponent is at least -60.5)."""
    soft_mus, soft_sigmas = list(mus[1:]), list(sigmas[1:])
    if len(soft_mus) < 2 or max(soft_sigmas) - min(soft_sigmas) > 1e-6 * max(soft_sigmas):
        return False
    steps = [a - b for a, b in zip(soft_mus, soft_mus[1:])]
    if min(steps) <= 0 or max(steps) - min(steps) > 1e-6 * max(steps):
        return False
    anchor = mus[ladder_anchor(len(mus))]
    reach = max(abs(high - anchor), abs(low - anchor))
    return reach * reach / (2 * soft_sigmas[0] ** 2) < -EXP_FLOOR


def kernel_ladder(s: torch.Tensor, mus: Sequence[float], sigmas: Sequence[float],
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """(N, K, Lq) kernel values exp(-(s - mu_k)^2 / (2 sigma_k^2)) of similarities ``s`` (N, Lq), K-NRM eq. 3 with
    three exps per similarity instead of K (when :func:`ladder_applies`; unitless, in [0, 1], 1 = at the centre).

    The first kernel (the exact-match one) is one exp, its exponent floored at :data:`EXP_FLOOR`. The soft kernels
    have centres mu_{j+1} = mu_j - delta and one width sigma, so (s - mu_{j+1})^2 = (s - mu_j)^2 + 2 delta (s - mu_j)
    + delta^2 and each kernel is its neighbour times a ratio: v_{j+1} = v_j r_j with
    r_j = exp(-delta (s - mu_j) / sigma^2 - delta^2 / (2 sigma^2)) and r_{j+1} = r_j exp(-delta^2 / sigma^2); the
    same holds upwards with u_j = exp(delta (s - mu_j) / sigma^2 - delta^2 / (2 sigma^2)). The ladder starts at the
    middle soft kernel (one exp) and climbs both ways (one exp each); the values equal the per-kernel exps up to a
    relative 3e-5 (measured: 1.5e-5 at most over [-1, 1]; a rung's ratio carries its exp's rounding of an exponent
    of up to 60). Values far in a Gaussian's tail leave float32's normal range
    (below 1.2e-38) as the rungs shrink them, where they vanish in the soft-TF sums as the floored ones do.
    ``out``: a buffer of at least N rows to write into (its first N rows are returned)."""
    n, lq = s.shape
    count = len(mus)
    k = s.new_empty(n, count, lq) if out is None else out[:n]
    x = s - mus[0]
    torch.exp(x.mul_(x).div_(-2 * sigmas[0] ** 2).clamp_(min=EXP_FLOOR), out=k[:, 0])
    anchor = ladder_anchor(count)
    var, delta = sigmas[1] ** 2, (mus[1] - mus[count - 1]) / (count - 2)
    y = s - mus[anchor]
    torch.exp(y.mul(y).div_(-2 * var), out=k[:, anchor])
    shrink = math.exp(-delta * delta / var)
    down = (y * (-delta / var)).sub_(delta * delta / (2 * var)).exp_()
    for j in range(anchor + 1, count):  # towards smaller centres
        torch.mul(k[:, j - 1], down, out=k[:, j])
        if j + 1 < count:
            down.mul_(shrink)
    up = y.mul_(delta / var).sub_(delta * delta / (2 * var)).exp_()
    for j in range(anchor - 1, 0, -1):  # towards larger centres
        torch.mul(k[:, j + 1], up, out=k[:, j])
        if j > 1:
            up.mul_(shrink)
    return k


@contextlib.contextmanager
def flushed_denormals() -> Iterator[None]:
    """Float32 results below 1.2e-38 flushed to 0 on this thread (x86 FTZ/DAZ) inside the block, then not.

    The kernel ladder's far rungs and their gradients fall below float32's normal range, where each multiply takes
    about twice as long (measured, AVX512 EPYC: 5.5 against 2.8 us per 38,400 products); such values vanish in the
    soft-TF sums whether they are tiny or 0. Torch exposes no getter, so the block ends with flushing off (torch's
    default)."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


class RowKernelSum(torch.autograd.Function):
    """Soft-TF (B, K, Lq) of match rows ``rows`` (N, Lq), one per document token, row n of pair ``pair[n]``:
    out[b, k, i] = sum over the rows n of pair b of exp(-(rows[n, i] - mu_k)^2 / (2 sigma_k^2)).

    Kernel values in an (N, K, Lq) layout whose last axis is contiguous, by :func:`kernel_ladder` when
    :func:`ladder_applies` (K-NRM's kernels on cosine matches), else by one exp per kernel with the operations of
    :func:`kernel_pooling_dense` (the same bits, but for exponents below :data:`EXP_FLOOR`). The backward pass is
    written out: d value / d s = value * (mu_k - s) / sigma_k^2, so the gradient is R1 - s R0 with
    R0 = sum_k g_k v_k / sigma_k^2 and R1 = sum_k g_k v_k mu_k / sigma_k^2 over the soft kernels (one small product
    over the kernel axis) plus the exact-match kernel's term, kept apart (its 1 / sigma^2 = 1e6 would cancel).
    ``mus`` and ``sigmas`` are constants here (no gradient). Denormal results are flushed (:func:`flushed_denormals`).
    """

    #: kernel values a scoring pass computes at once (a chunk of rows: 2 MB in float32), in one reused buffer. A
    #: whole scoring batch's would be 20 MB, freshly allocated per batch, and the page faults of first touching it
    #: cost more than the arithmetic (measured: a scoring batch's ladder 3.7 ms in a warm buffer, 10-14 ms in a
    #: fresh one)
    CHUNK = 1 << 19

    @staticmethod
    def forward(ctx, rows: torch.Tensor, pair: torch.Tensor, batch: int, mus: torch.Tensor,
                sigmas: torch.Tensor) -> torch.Tensor:
        n, lq = rows.shape
        count = mus.shape[0]
        soft = rows.new_zeros(batch, count, lq)  # (B, K, Lq)
        with flushed_denormals():
            mu, sigma = mus.tolist(), sigmas.tolist()
            low, high = rows.aminmax() if n else (torch.tensor(0.0), torch.tensor(0.0))
            ladder = ladder_applies(mu, sigma, float(low), float(high))

            def values(part: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
                if ladder:
                    return kernel_ladder(part, mu, sigma, out=out)
                x = part[:, None, :] - mus[None, :, None]  # (n, K, Lq)
                # exp(-((s - mu) ** 2) / (2 sigma^2)) with the exponent floored at EXP_FLOOR (see there)
                return x.mul_(x).div_(-(2 * sigmas**2)[None, :, None]).clamp_(min=EXP_FLOOR).exp_()

            if ctx.needs_input_grad[0]:
                # at once, kept for the backward pass (measured: a training step 38-39 ms at once, 43-44 ms in
                # chunks of fresh memory)
                k = values(rows)
                soft.index_add_(0, pair, k)
                ctx.save_for_backward(rows, pair, k, mus, sigmas)
                return soft
            # no backward pass will read the values: in chunks of one reused buffer
            step, buffer = max(1, RowKernelSum.CHUNK // (count * lq)), None
            for at in range(0, n, step):
                k = values(rows[at : at + step], buffer)
                soft.index_add_(0, pair[at : at + step], k)
                buffer = k if buffer is None else buffer
        return soft

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        rows, pair, k, mus, sigmas = ctx.saved_tensors
        with flushed_denormals():
            g = grad.index_select(0, pair)  # (N, K, Lq): d loss / d kernel value
            g.mul_(k)
            inv = 1 / sigmas**2
            weights = torch.stack([inv, mus * inv])
            weights[:, 0] = 0  # the exact-match kernel apart
            r = torch.matmul(weights.to(g.dtype), g)  # (N, 2, Lq)
            grad_rows = r[:, 1].sub(r[:, 0] * rows)
            grad_rows.addcmul_(g[:, 0], (rows - mus[0]).mul_(-inv[0]))
        return grad_rows, None, None, None, None


def context_block(rows: torch.Tensor) -> int:
    """The largest k such that every k consecutive pairs of a batch, from the first, share one context (``rows``:
    each pair's distinct-context index, :func:`curricula.models.text.distinct_rows`); 1 when no such k > 1.

    A training batch lists each context with its 1 + m responses one after the other, so k = 1 + m (or a multiple
    of it where the same context was drawn twice in a row: then the greatest common divisor of the runs)."""
    if rows.numel() < 2:
        return 1
    change = (torch.nonzero(rows[1:] != rows[:-1]).squeeze(1) + 1).tolist()
    k = 0
    for a, b in zip([0, *change], [*change, rows.numel()]):
        k = math.gcd(k, b - a)
    return k


def block_matches(q: torch.Tensor, d: torch.Tensor, block: int) -> torch.Tensor:
    """Cosine matches (B, Lq, Ld) of each pair when every ``block`` consecutive pairs share a context: ``q`` (B /
    block, Lq, C) one row per block, ``d`` (B, Ld, C). One product per context over all its responses' positions
    (block * Ld, C) @ (C, Lq), instead of one per pair over a copy of its context; the result is laid out
    (B, Ld, Lq) in memory, the layout :func:`kernel_pooling` reads, and returned as its (B, Lq, Ld) view. The same
    numbers as ``q[rows] @ d.transpose(1, 2)`` up to float round-off (measured on the default run's training
    batches, 1 thread: a step 50-53 ms -> 46 ms)."""
    batch, ld, channels = d.shape
    sim_t = torch.bmm(d.reshape(q.shape[0], block * ld, channels), q.transpose(1, 2))
    return sim_t.view(batch, ld, q.shape[1]).transpose(1, 2)


def context_match_rows(q: torch.Tensor, sides: Sequence[tuple[torch.Tensor, torch.Tensor]],
                       owner: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Match rows (N, Lq) of every document token of every document side in ``sides`` against its pair's context,
    and each row's group t * B + b (side t, pair b): ``q`` (contexts, Lq, C) the distinct contexts, ``owner`` (B,)
    each pair's row of ``q``; ``sides`` [(d (B, Ld_t, C), d_mask (B, Ld_t))].

    Rows come context by context, and within a context side by side, pair by pair, position by position. The
    tokens of all the responses of a context, of all sides, are gathered and multiplied by the context in one
    product, (tokens, C) @ (C, Lq): no product over padding (a padded training batch of responses is about half
    padding on chitchat, as the widest response sets Ld), one product per context, not per pair (a training batch
    lists each context with its 1 + m responses), and one for all n-gram sides. The same numbers as the padded
    per-pair products' rows at the tokens up to float round-off."""
    channels = q.shape[2]
    batch = sides[0][0].shape[0]
    flat, positions, groups, offset = [], [], [], 0
    for t, (d, d_mask) in enumerate(sides):
        ld = d.shape[1]
        at = (d_mask.reshape(-1) > 0).nonzero().squeeze(1)  # flat (b, j) of the document tokens, in order
        flat.append(d.reshape(batch * ld, channels))
        positions.append(at + offset)
        groups.append(torch.div(at, ld, rounding_mode="floor") + t * batch)
        offset += batch * ld
    positions, group = torch.cat(positions), torch.cat(groups)
    context = owner[group % batch]
    order = torch.sort(context, stable=True).indices  # context by context; within one side, pair, position
    tokens = torch.cat(flat).index_select(0, positions[order])  # (N, C)
    counts = torch.bincount(context, minlength=q.shape[0]).tolist()
    matches = [part @ q[c].t() for c, part in enumerate(torch.split(tokens, counts)) if counts[c]]
    if not matches:
        return tokens.new_zeros(0, q.shape[1]), group
    return torch.cat(matches), group[order]


def pair_match_rows(q: torch.Tensor, sides: Sequence[tuple[torch.Tensor, torch.Tensor]],
                    owner: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`context_match_rows` by one padded product per pair over all sides at once, (sum of Ld_t, C) @
    (C, Lq), batched: for batches whose pairs mostly have contexts of their own (a scoring pass, batched by
    response length, so with little padding), where one product per context would be a loop of small products.
    Rows come pair by pair, then side by side, position by position; the same numbers up to float round-off."""
    batch = sides[0][0].shape[0]
    d = torch.cat([side for side, _ in sides], dim=1)  # (B, sum Ld_t, C)
    mask = torch.cat([m for _, m in sides], dim=1)
    matches = torch.bmm(d, q[owner].transpose(1, 2))  # (B, sum Ld_t, Lq)
    positions = (mask.reshape(-1) > 0).nonzero().squeeze(1)
    side = torch.cat([torch.full((m.shape[1],), t, device=mask.device) for t, (_, m) in enumerate(sides)])
    pair = torch.div(positions, mask.shape[1], rounding_mode="floor")
    group = side[positions % mask.shape[1]] * batch + pair
    return matches.reshape(-1, q.shape[1]).index_select(0, positions), group


def window_mask(mask: torch.Tensor, h: int) -> torch.Tensor:
    """Mask (B, L - h + 1) of the h-gram windows whose positions are all tokens."""
    return mask.unfold(1, h, 1).min(dim=-1).values


class ConvKNRMModule(torch.nn.Module):
    def __init__(self, embeddings: torch.Tensor, ngrams: Sequence[int], channels: int, kernels: int, hidden: int,
                 dropout: float, freeze_embeddings: bool, embedding_dropout: float | None = None):
        super().__init__()
        self.embedding = torch.nn.Embedding.from_pretrained(embeddings.clone(), freeze=freeze_embeddings,
                                                            padding_idx=None)
        dim = embeddings.shape[1]
        self.ngrams = list(ngrams)
        self.convs = torch.nn.ModuleList(torch.nn.Conv1d(dim, channels, h) for h in self.ngrams)
        self.register_buffer("mus", torch.tensor(kernel_mus(kernels)))
        self.register_buffer("sigmas", torch.tensor(kernel_sigmas(kernels)))
        features = len(self.ngrams) ** 2 * kernels
        self.dropout = torch.nn.Dropout(dropout)  # on the kernel features
        #: on the word-piece embeddings (null = ``dropout``)
        self.embedding_dropout = torch.nn.Dropout(dropout if embedding_dropout is None else embedding_dropout)
        #: during a scoring pass (:meth:`TwoSidedRanker.scoring_cache`): context ids -> its h-gram vectors
        self.context_cache: dict[bytes, list[torch.Tensor]] | None = None
        #: during a scoring pass: the taps of the vocabulary blocks computed so far (:meth:`cached_token_taps`)
        self.token_cache: dict[str, Any] | None = None
        if hidden:
            self.combine = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(),
                                               torch.nn.Linear(hidden, 1))
        else:  # Dai et al.: a linear combination of the kernel features
            self.combine = torch.nn.Linear(features, 1)

    def grams(self, ids: torch.Tensor, mask: torch.Tensor,
              embedded: torch.Tensor | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        x = (self.embedding_dropout(self.embedding(ids)) if embedded is None else embedded).transpose(1, 2)  # (B, E, L)
        out = []
        for h, conv in zip(self.ngrams, self.convs):
            g = F.normalize(F.relu(conv(x)).transpose(1, 2), dim=-1)  # (B, L - h + 1, C), unit length
            out.append((g, window_mask(mask, h)))
        return out

    def tap_matrix(self) -> torch.Tensor:
        """(E, T * C) the convolutions' taps side by side: block t = (h, o) in :attr:`ngrams` order, o = 0..h-1,
        holds ``conv_h.weight[:, :, o].T``, so ``x @ tap_matrix()`` gives every tap's response to a token at once."""
        return torch.cat([conv.weight[:, :, o].t() for conv in self.convs for o in range(conv.kernel_size[0])], dim=1)

    def token_taps(self, ids: torch.Tensor) -> torch.Tensor:
        """(len(ids), T, C) every tap's response E[id] W_{h,o}^T to each of ``ids`` (no bias)."""
        channels = self.convs[0].out_channels
        return (self.embedding(ids) @ self.tap_matrix()).view(ids.shape[0], -1, channels)

    def grams_from_taps(self, taps: torch.Tensor, rows: torch.Tensor,
                        mask: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`grams` of a padded side whose position (b, t) is the token of row ``rows[b, t]`` of ``taps``
        ((N, T, C), :meth:`token_taps`). A 1-D convolution is linear in its input, so
        conv_h(x)[t] = b_h + sum_o W_{h,o} x_{t+o}, and with x_t = E[id_t] each term is a row of ``taps``: the
        h-gram vector is gathered and summed instead of multiplied out at every position. The same numbers as
        :meth:`grams` up to the order of float sums; the multiply-adds scale with the distinct tokens, not with
        the padded positions (a padded batch is mostly repeats and padding)."""
        count = taps.shape[1]
        flat = taps.reshape(-1, taps.shape[2])
        length = rows.shape[1]
        out, tap = [], 0
        for h, conv in zip(self.ngrams, self.convs):
            width = length - h + 1
            g = None
            for o in range(h):
                part = F.embedding(rows[:, o : o + width] * count + (tap + o), flat)  # (B, width, C)
                g = part if g is None else g + part
            tap += h
            out.append((F.normalize(F.relu(g + conv.bias), dim=-1), window_mask(mask, h)))
        return out

    def features(self, q, q_mask, d, d_mask) -> torch.Tensor:
        """(B, n_grams^2 * kernels) kernel-pooled soft-match features of each pair (before the feature dropout)."""
        if dropout_active(self.embedding_dropout):
            # random masks: drawn per pair and side, in the order and shapes they were always drawn in
            qg, dg = self.grams(q, q_mask), self.grams(d, d_mask)
            rows = torch.arange(q.shape[0], device=q.device)
        elif self.context_cache is not None and not torch.is_grad_enabled():
            q, q_mask, rows = distinct_rows(q, q_mask)
            qg = self.cached_context_grams(q, q_mask)
            dg = self.grams_from_taps(self.cached_token_taps(d), d, d_mask)
        else:
            # each distinct context once (a training batch repeats it for its 1 + m responses) and the taps of each
            # distinct token of both sides once (one product for the whole batch): the same numbers up to the
            # order of float sums
            q, q_mask, rows = distinct_rows(q, q_mask)
            uniq, index = torch.unique(torch.cat([q.reshape(-1), d.reshape(-1)]), return_inverse=True)
            taps = self.token_taps(uniq)
            qg = self.grams_from_taps(taps, index[: q.numel()].view(q.shape), q_mask)
            dg = self.grams_from_taps(taps, index[q.numel():].view(d.shape), d_mask)
        return self.cross_features(qg, dg, rows)

    def cross_features(self, qg: Sequence[tuple[torch.Tensor, torch.Tensor]],
                       dg: Sequence[tuple[torch.Tensor, torch.Tensor]], rows: torch.Tensor) -> torch.Tensor:
        """Kernel features (B, n_grams^2 * K) of every (query h-gram, document h-gram) cross, query h-gram first:
        ``qg`` the distinct contexts' h-grams, ``rows`` each pair's context, ``dg`` the pairs' h-grams.

        On CPU all crosses at once: every query h-gram side by side, (contexts, sum of Lq_h, C), against every
        document h-gram (:func:`context_match_rows`, or :func:`pair_match_rows` when most pairs have a context of
        their own), one kernel sum (:class:`RowKernelSum`) over the lot, and K-NRM eq. 4 as one product with each
        query h-gram's position indicator. Measured against one padded product and kernel sum per cross
        (``bench/prof_convknrm.py --freeze --steps 300 --evals 3 --dev-queries 0``, default run's batches, 1 thread,
        alternated twice): a training step 49.3 / 48.7 -> 39.0 / 37.8 ms, a dev evaluation of 5,000 pairs
        1.97 / 1.98 -> 1.48 / 1.47 s. Elsewhere (GPU) one padded product per cross: per context when each
        context's pairs come together (:func:`block_matches`), else per pair."""
        if qg[0][0].device.type != "cpu":
            block = context_block(rows)
            if block > 1:
                return torch.cat([kernel_pooling(block_matches(qh[rows[::block]], dh, block), qm[rows], dm, self.mus,
                                                 self.sigmas) for qh, qm in qg for dh, dm in dg], dim=1)
            return torch.cat([kernel_pooling(qh[rows] @ dh.transpose(1, 2), qm[rows], dm, self.mus, self.sigmas)
                              for qh, qm in qg for dh, dm in dg], dim=1)
        batch, sides = dg[0][0].shape[0], len(dg)
        # one product per context when contexts have 2 or more pairs each (training), else per pair (scoring)
        per_context = 2 * qg[0][0].shape[0] <= batch
        match_rows, group = (context_match_rows if per_context else pair_match_rows)(
            torch.cat([qh for qh, _ in qg], dim=1), dg, rows)
        soft = RowKernelSum.apply(match_rows, group, sides * batch, self.mus, self.sigmas)  # (T * B, K, sum Lq_h)
        # K-NRM eq. 4 for every cross at once: the masked logs summed over each query h-gram's positions (one
        # product with their indicator), laid out query h-gram, then document h-gram, then kernel, as per cross
        q_mask = torch.cat([qm[rows] for _, qm in qg], dim=1)  # (B, sum Lq_h)
        logs = masked_logs(soft.view(sides, batch, -1, q_mask.shape[1]), q_mask)  # (T, B, K, sum Lq_h)
        segment = torch.repeat_interleave(torch.arange(len(qg), device=q_mask.device),
                                          torch.tensor([qh.shape[1] for qh, _ in qg], device=q_mask.device))
        indicator = F.one_hot(segment, len(qg)).to(logs.dtype)  # (sum Lq_h, query h-grams)
        pooled = (logs @ indicator).permute(1, 3, 0, 2)  # (B, query h-grams, T, K)
        return pooled.reshape(batch, -1)

    def forward(self, q, q_mask, d, d_mask) -> torch.Tensor:
        return self.combine(self.dropout(self.features(q, q_mask, d, d_mask))).squeeze(-1)

    def mc_forward(self, batch: dict[str, torch.Tensor], passes: int) -> torch.Tensor:
        """(passes, B) logits of MC-dropout passes: without embedding dropout the kernel features are
        deterministic, so they are computed once and only the feature dropout and the combination run per pass."""
        args = (batch["q"], batch["q_mask"], batch["d"], batch["d_mask"])
        if dropout_active(self.embedding_dropout):
            return torch.stack([self(*args) for _ in range(passes)])
        feats = self.features(*args)
        return torch.stack([self.combine(self.dropout(feats)).squeeze(-1) for _ in range(passes)])

    #: contexts a scoring pass keeps (each ~100 KB at 64 word pieces); beyond, contexts are computed per batch
    CONTEXT_CACHE_LIMIT = 2000
    #: vocabulary rows whose taps a scoring pass computes together (a fixed block, so a token's taps do not depend
    #: on which batch or shard first needed them: the same bits however the pairs are batched)
    TAP_BLOCK = 1024

    def cached_token_taps(self, ids: torch.Tensor) -> torch.Tensor:
        """(vocabulary, T, C) :meth:`token_taps` of the whole vocabulary, valid at every row of ``ids``: inside a
        scoring pass the weights do not change, so each block of :attr:`TAP_BLOCK` vocabulary rows is computed
        once, when a batch first needs one of its ids (a dev evaluation of 5,000 pairs touches a few thousand
        distinct word pieces; the padded positions number about 100,000)."""
        cache = self.token_cache
        blocks = torch.unique(torch.div(ids, self.TAP_BLOCK, rounding_mode="floor")).tolist()
        missing = [b for b in blocks if b not in cache.setdefault("blocks", set())]
        vocab = self.embedding.num_embeddings
        for b in missing:
            rows = torch.arange(b * self.TAP_BLOCK, min(vocab, (b + 1) * self.TAP_BLOCK), device=ids.device)
            taps = self.token_taps(rows)
            if "taps" not in cache:
                cache["taps"] = taps.new_zeros((vocab, *taps.shape[1:]))
            cache["taps"][rows] = taps
            cache["blocks"].add(b)
        return cache["taps"]

    def cached_context_grams(self, q: torch.Tensor, q_mask: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`grams` of distinct context rows, each computed once per scoring pass: a context's h-gram vectors
        at its token windows are kept (keyed by its ids) and placed into this batch's padded width; the windows
        beyond its tokens are zeros instead of vectors of padding (they are masked out either way)."""
        cache = self.context_cache
        lengths = q_mask.sum(dim=1).long().tolist()
        keys = [q[i, :n].cpu().numpy().tobytes() for i, n in enumerate(lengths)]
        missing = [i for i, key in enumerate(keys) if key not in cache]
        fresh: dict[bytes, list[torch.Tensor]] = {}
        if missing:
            at = torch.tensor(missing, device=q.device)
            computed = self.grams_from_taps(self.cached_token_taps(q[at]), q[at], q_mask[at])
            for j, i in enumerate(missing):
                fresh[keys[i]] = [g[j, : max(0, lengths[i] - h + 1)] for h, (g, _) in zip(self.ngrams, computed)]
            if len(cache) < self.CONTEXT_CACHE_LIMIT:
                cache.update(fresh)
        parts = [fresh[key] if key in fresh else cache[key] for key in keys]
        out = []
        for k, h in enumerate(self.ngrams):
            first = parts[0][k]
            g = first.new_zeros((q.shape[0], q.shape[1] - h + 1, first.shape[-1]))
            for i, part in enumerate(parts):
                g[i, : part[k].shape[0]] = part[k]
            out.append((g, window_mask(q_mask, h)))
        return out


class ConvKNRMRanker(TwoSidedRanker):
    name = "convknrm"

    @classmethod
    def make_module(cls, arch: Mapping[str, Any], embeddings: torch.Tensor) -> torch.nn.Module:
        return ConvKNRMModule(embeddings, arch["ngrams"], arch["channels"], arch["kernels"], arch["hidden"],
                              arch["dropout"], arch["freeze_embeddings"], arch.get("embedding_dropout"))

    def min_width(self) -> int:
        return max(self.arch["ngrams"])

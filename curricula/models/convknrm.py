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

import math
from collections.abc import Mapping, Sequence
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

    On CPU the kernels are evaluated at the document positions that are tokens only (:class:`DocKernelSum`: most
    of a padded batch of responses is padding); elsewhere, and when ``mus`` or ``sigmas`` need gradients, on the
    whole padded matrix (:func:`kernel_pooling_dense`). Both compute the same kernel values bit for bit (but for
    the values below e^EXP_FLOOR, about 1e-38, that the CPU path floors); the sums
    over j run in another order (the results differ by float round-off).
    """
    if sim.device.type != "cpu" or mus.requires_grad or sigmas.requires_grad:
        return kernel_pooling_dense(sim, q_mask, d_mask, mus, sigmas)
    positions = (d_mask.reshape(-1) > 0).nonzero().squeeze(1)  # flat (b, j) of the document tokens
    soft_tf = DocKernelSum.apply(sim, positions, torch.div(positions, sim.shape[2], rounding_mode="floor"), mus,
                                 sigmas)  # (B, Lq, K)
    logs = torch.log(soft_tf.clamp(min=1e-10)) * 0.01 * q_mask[..., None]
    return logs.sum(dim=1)


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


class DocKernelSum(torch.autograd.Function):
    """Soft-TF (B, Lq, K) of ``sim`` (B, Lq, Ld) over the document positions ``positions`` (flat b * Ld + j,
    ``pair`` = b): out[b, i, k] = sum over the positions (b, j) of exp(-(sim[b, i, j] - mu_k)^2 / (2 sigma_k^2)).

    Each kernel value is computed with the operations of :func:`kernel_pooling_dense`, in the same order (the
    same bits, but for exponents below :data:`EXP_FLOOR`), in an (N, K, Lq) layout whose last axis is contiguous.
    The backward pass is written out (d value / d s = -value * (s - mu_k) / sigma_k^2, also at a floored value,
    where it is below 1e-31 and the unfloored one about 0) instead of going through five saved intermediates.
    ``mus`` and ``sigmas`` are constants here (no gradient).
    """

    @staticmethod
    def forward(ctx, sim: torch.Tensor, positions: torch.Tensor, pair: torch.Tensor, mus: torch.Tensor,
                sigmas: torch.Tensor) -> torch.Tensor:
        batch, lq, ld = sim.shape
        s = sim.transpose(1, 2).reshape(batch * ld, lq).index_select(0, positions)  # (N, Lq): one row per token
        x = s[:, None, :] - mus[None, :, None]  # (N, K, Lq)
        # exp(-((s - mu) ** 2) / (2 sigma^2)) with the exponent floored at EXP_FLOOR (see there)
        k = x.mul_(x).div_(-(2 * sigmas**2)[None, :, None]).clamp_(min=EXP_FLOOR).exp_()
        soft = k.new_zeros(batch, mus.shape[0], lq).index_add_(0, pair, k)  # (B, K, Lq)
        ctx.save_for_backward(s, positions, pair, k, mus, sigmas)
        ctx.shape, ctx.dtype = sim.shape, sim.dtype
        return soft.transpose(1, 2)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        s, positions, pair, k, mus, sigmas = ctx.saved_tensors
        batch, lq, ld = ctx.shape
        g = grad.transpose(1, 2).index_select(0, pair)  # (N, K, Lq): d loss / d kernel value
        g.mul_(k)
        x = s[:, None, :] - mus[None, :, None]
        g.mul_(x.div_(-(sigmas**2)[None, :, None]))
        grad_s = g.sum(dim=1)  # (N, Lq)
        grad_sim = grad_s.new_zeros(batch * ld, lq).index_copy_(0, positions, grad_s)
        return grad_sim.view(batch, ld, lq).transpose(1, 2).to(ctx.dtype), None, None, None, None


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
    (B, Ld, Lq) in memory, the layout :class:`DocKernelSum` reads, and returned as its (B, Lq, Ld) view. The same
    numbers as ``q[rows] @ d.transpose(1, 2)`` up to float round-off (measured on the default run's training
    batches, 1 thread: a step 50-53 ms -> 46 ms)."""
    batch, ld, channels = d.shape
    sim_t = torch.bmm(d.reshape(q.shape[0], block * ld, channels), q.transpose(1, 2))
    return sim_t.view(batch, ld, q.shape[1]).transpose(1, 2)


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
        elif self.context_cache is not None and not torch.is_grad_enabled():
            q, q_mask, rows = distinct_rows(q, q_mask)
            qg = [(g[rows], m[rows]) for g, m in self.cached_context_grams(q, q_mask)]
            dg = self.grams_from_taps(self.cached_token_taps(d), d, d_mask)
        else:
            # each distinct context once (a training batch repeats it for its 1 + m responses), the taps of each
            # distinct token of both sides once (one product for the whole batch), and, when the batch lists each
            # context's responses together, one match product per context (:func:`block_matches`): the same
            # numbers up to the order of float sums
            q, q_mask, rows = distinct_rows(q, q_mask)
            uniq, index = torch.unique(torch.cat([q.reshape(-1), d.reshape(-1)]), return_inverse=True)
            taps = self.token_taps(uniq)
            qg = self.grams_from_taps(taps, index[: q.numel()].view(q.shape), q_mask)
            dg = self.grams_from_taps(taps, index[q.numel():].view(d.shape), d_mask)
            block = context_block(rows)
            if block > 1:
                return torch.cat([kernel_pooling(block_matches(qh[rows[::block]], dh, block), qm[rows], dm, self.mus,
                                                 self.sigmas) for qh, qm in qg for dh, dm in dg], dim=1)
            qg = [(g[rows], m[rows]) for g, m in qg]
        feats = [kernel_pooling(qh @ dh.transpose(1, 2), qm, dm, self.mus, self.sigmas)
                 for qh, qm in qg for dh, dm in dg]
        return torch.cat(feats, dim=1)

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

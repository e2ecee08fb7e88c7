"""ConvKNRM (Dai et al. 2018), the fast interaction ranker of MacAvaney et al. 2020 §4 (``ranker: convknrm``).

Word embeddings -> 1..n-gram convolutions (ReLU, L2-normalised) -> cosine matches of every query h-gram with every
document h'-gram ("cross-matching": n^2 matrices) -> Gaussian kernel pooling (K-NRM, Xiong et al. 2017) ->
a combination layer -> one score. MacAvaney's setting: unigram to tri-gram, cross-matching, 128 hidden nodes for
the combination, 11 kernels, Adam lr 1e-3, pairwise loss (pointwise did not converge for them). The kernel
pooling is :mod:`curricula.models.kernel_pooling`; this module holds the matches and the network.

Not implemented: the "score additivity" of Yang et al. 2019 that MacAvaney add on top (a learned interpolation
with the first-stage BM25 score), because the pipeline's negatives are not all from the BM25 list and so have no
first-stage score.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from curricula.models.compiled import CompiledPooledLogs, pooled_logs_apply, row_kernel_sum, unit_window_vectors
from curricula.models.kernel_pooling import kernel_mus, kernel_pooling, kernel_sigmas, masked_logs
from curricula.models.packed import Windows, packed_context_matches, padded_vectors, tap_table, token_windows
from curricula.models.text import TwoSidedRanker, distinct_rows, dropout_active


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
                 dropout: float, freeze_embeddings: bool, embedding_dropout: float | None = None,
                 compiled_pooling: bool = False, compiled: bool = False):
        super().__init__()
        #: every compiled pass of the CPU path (:mod:`curricula.models.compiled`: window vectors, kernel sums, eq. 4)
        self.compiled = bool(compiled)
        #: the CPU kernel sums by the compiled pass instead of torch's operations (part of :attr:`compiled`)
        self.compiled_pooling = bool(compiled_pooling) or self.compiled
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
        # conv.weight (C, E, h) -> (E, h, C) -> (E, h * C): one copy per convolution, forward and backward (per tap,
        # each slice's backward pass zero-fills a whole (C, E, h) gradient)
        return torch.cat([conv.weight.permute(1, 2, 0).reshape(conv.in_channels, -1) for conv in self.convs], dim=1)

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
            if q.device.type == "cpu":  # the pass's taps, both sides at token windows only
                taps, at = self.cached_token_taps(torch.cat([q.reshape(-1), d.reshape(-1)]))
                return self.packed_features(taps, at[: q.numel()].view(q.shape), q_mask, at[q.numel():].view(d.shape),
                                            d_mask, rows)
            qg = self.cached_context_grams(q, q_mask)
            taps, at = self.cached_token_taps(d)
            dg = self.grams_from_taps(taps, at, d_mask)
        else:
            # each distinct context once (a training batch repeats it for its 1 + m responses) and the taps of each
            # distinct token of both sides once (one product for the whole batch): the same numbers up to the
            # order of float sums
            q, q_mask, rows = distinct_rows(q, q_mask)
            uniq, index = torch.unique(torch.cat([q.reshape(-1), d.reshape(-1)]), return_inverse=True)
            taps = self.token_taps(uniq)
            q_at, d_at = index[: q.numel()].view(q.shape), index[q.numel():].view(d.shape)
            if q.device.type == "cpu":
                return self.packed_features(taps, q_at, q_mask, d_at, d_mask, rows)
            qg = self.grams_from_taps(taps, q_at, q_mask)
            dg = self.grams_from_taps(taps, d_at, d_mask)
        return self.cross_features(qg, dg, rows)

    def packed_features(self, taps: torch.Tensor, q: torch.Tensor, q_mask: torch.Tensor, d: torch.Tensor,
                        d_mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """:meth:`cross_features` with the n-gram vectors computed at token windows only (:mod:`.packed`): ``taps``
        (tokens, T, C) of the batch's distinct tokens, ``q`` (contexts, Lq) and ``d`` (B, Ld) each position's row in
        ``taps``, ``rows`` (B,) each pair's context. Both sides' windows take one gather from the tap table, and the
        contexts' vectors go back to a padded (contexts, sum of Lq_h, C) layout (zeros where no window lies) for one
        product per context against its pairs' document windows. The CPU training path: measured in
        ``bench/bench_convknrm.py``."""
        table, zero, bias = self.scoring_tap_table(taps)
        count = taps.shape[1]
        q_windows = token_windows(q, q_mask, self.ngrams, count, zero, bias)
        d_windows = token_windows(d, d_mask, self.ngrams, count, zero, bias)
        vectors = unit_window_vectors(table, Windows(*(torch.cat([a, b]) for a, b in zip(q_windows, d_windows))), zero,
                                      self.compiled)
        # one split, whose backward pass is one concatenation (two slices would each zero-fill a full-size gradient)
        q_vectors, d_vectors = vectors.split([q_windows.index.shape[0], d_windows.index.shape[0]])
        widths = [q.shape[1] - h + 1 for h in self.ngrams]
        q_vectors = padded_vectors(q_vectors, q_windows, q.shape[0], widths)
        batch = d.shape[0]
        match_rows, group = packed_context_matches(q_vectors, d_vectors, d_windows, rows, batch)
        soft = row_kernel_sum(match_rows, group, len(self.ngrams) * batch, self.mus, self.sigmas,
                              self.compiled_pooling)
        q_mask = torch.cat([window_mask(q_mask, h)[rows] for h in self.ngrams], dim=1)  # (B, sum Lq_h)
        return self.pooled_logs(soft, q_mask, widths, batch)

    def scoring_tap_table(self, taps: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        """:func:`~curricula.models.packed.tap_table` of ``taps``, built once per scoring pass when ``taps`` are the
        pass's (:meth:`prepare_scoring`): a dev evaluation's table holds about 41,000 rows (21 MB), which every
        scoring batch copied again (measured, one thread: about 100 ms of a 1.1 s dev evaluation)."""
        cache = self.token_cache
        if cache is None or cache.get("taps") is not taps:
            return tap_table(taps, [conv.bias for conv in self.convs])
        if "table" not in cache:
            cache["table"] = tap_table(taps, [conv.bias for conv in self.convs])
        return cache["table"]

    def pooled_logs(self, soft: torch.Tensor, q_mask: torch.Tensor, widths: Sequence[int], batch: int) -> torch.Tensor:
        """K-NRM eq. 4 for every cross at once, (B, n_grams^2 * K): the masked logs of the soft-TF ``soft``
        (T * B, K, sum Lq_h) summed over each query h-gram's positions (``widths`` of them; one product with
        their indicator), laid out query h-gram, then document h-gram, then kernel, as per cross; by the compiled
        pass (:class:`~curricula.models.compiled.CompiledPooledLogs`) when :attr:`compiled`."""
        if self.compiled and pooled_logs_apply(soft, widths):
            return CompiledPooledLogs.apply(soft.permute(1, 0, 2), q_mask, tuple(widths), batch)
        sides = soft.shape[0] // batch
        logs = masked_logs(soft.reshape(sides, batch, -1, q_mask.shape[1]), q_mask)  # (T, B, K, sum Lq_h)
        segment = torch.repeat_interleave(torch.arange(len(widths), device=q_mask.device),
                                          torch.tensor(list(widths), device=q_mask.device))
        indicator = F.one_hot(segment, len(widths)).to(logs.dtype)  # (sum Lq_h, query h-grams)
        pooled = (logs @ indicator).permute(1, 3, 0, 2)  # (B, query h-grams, T, K)
        return pooled.reshape(batch, -1)

    def cross_features(self, qg: Sequence[tuple[torch.Tensor, torch.Tensor]],
                       dg: Sequence[tuple[torch.Tensor, torch.Tensor]], rows: torch.Tensor) -> torch.Tensor:
        """Kernel features (B, n_grams^2 * K) of every (query h-gram, document h-gram) cross, query h-gram first:
        ``qg`` the distinct contexts' h-grams, ``rows`` each pair's context, ``dg`` the pairs' h-grams.

        On CPU all crosses at once: every query h-gram side by side, (contexts, sum of Lq_h, C), against every
        document h-gram (:func:`context_match_rows`, or :func:`pair_match_rows` when most pairs have a context of
        their own), one kernel sum over the lot (:func:`curricula.models.compiled.row_kernel_sum`: torch's operations
        or the compiled pass), and K-NRM eq. 4 as one product with each query h-gram's position indicator. Measured
        against one padded product and kernel sum per cross
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
        soft = row_kernel_sum(match_rows, group, sides * batch, self.mus, self.sigmas,
                              self.compiled_pooling)  # (T * B, K, sum Lq_h)
        q_mask = torch.cat([qm[rows] for _, qm in qg], dim=1)  # (B, sum Lq_h)
        return self.pooled_logs(soft, q_mask, [qh.shape[1] for qh, _ in qg], batch)

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
    def prepare_scoring(self, ids: torch.Tensor) -> None:
        """Keep, for one scoring pass, the taps (:meth:`token_taps`) of ``ids``: the distinct token ids of every pair
        the pass scores (all its shards' pairs, so that each shard computes them in the same product and a
        token's taps are the same bits in every shard). One product over the distinct tokens a pass reads (a dev
        evaluation of 5,000 pairs reads about 6,900 of the vocabulary's 30,522 word pieces)."""
        cache = self.token_cache
        assert cache is not None  # inside TextRanker's scoring context, which sets both caches to {}
        ids = ids.to(self.embedding.weight.device)
        lookup = torch.zeros(self.embedding.num_embeddings, dtype=torch.long, device=ids.device)
        lookup[ids] = torch.arange(ids.numel(), device=ids.device)
        cache["lookup"], cache["taps"] = lookup, self.token_taps(ids)
        cache.pop("table", None)  # built from these taps at first use (:meth:`scoring_tap_table`)

    def cached_token_taps(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(taps (tokens, T, C), the row of each of ``ids`` in it) inside a scoring pass: the taps kept by
        :meth:`prepare_scoring`; when the pass did not prepare them, those of the whole vocabulary (one product)."""
        cache = self.token_cache
        # called only in a scoring pass (features' context_cache branch), whose caches are set together (both {} in
        # TextRanker's scoring context)
        assert cache is not None
        if "taps" not in cache:
            self.prepare_scoring(torch.arange(self.embedding.num_embeddings, device=ids.device))
        return cache["taps"], cache["lookup"][ids]

    def cached_context_grams(self, q: torch.Tensor, q_mask: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """:meth:`grams` of distinct context rows, each computed once per scoring pass: a context's h-gram vectors
        at its token windows are kept (keyed by its ids) and placed into this batch's padded width; the windows
        beyond its tokens are zeros instead of vectors of padding (they are masked out either way). The keys come
        from one device-to-host copy of the ids and lengths of the whole batch, not one per row."""
        cache = self.context_cache
        assert cache is not None  # called only from features' branch for a non-None context_cache
        host = torch.cat([q, q_mask.sum(dim=1, keepdim=True).to(q.dtype)], dim=1).cpu().numpy()
        lengths = [int(n) for n in host[:, -1]]
        keys = [host[i, :n].tobytes() for i, n in enumerate(lengths)]
        missing = [i for i, key in enumerate(keys) if key not in cache]
        fresh: dict[bytes, list[torch.Tensor]] = {}
        if missing:
            at = torch.tensor(missing, device=q.device)
            taps, rows = self.cached_token_taps(q[at])
            computed = self.grams_from_taps(taps, rows, q_mask[at])
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
                              arch["dropout"], arch["freeze_embeddings"], arch.get("embedding_dropout"),
                              bool(arch.get("compiled_pooling")), bool(arch.get("compiled")))

    def min_width(self) -> int:
        return max(self.arch["ngrams"])

    def length(self, item) -> int:
        """Context first (a checksum of its ids), then response length: a scoring batch holds whole contexts with
        their candidates, so the matches are one product per context (the CPU path computes both sides at token
        windows only, where a response's length no longer sets a batch's work). Measured in
        ``bench/bench_convknrm.py`` (the dev evaluation)."""
        return zlib.crc32(np.asarray(item[0], dtype=np.int32).tobytes()) * self._SIDE + len(item[1])

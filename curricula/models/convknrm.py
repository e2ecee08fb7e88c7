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

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from curricula.models.text import TwoSidedRanker


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
    """
    k = torch.exp(-((sim.unsqueeze(-1) - mus) ** 2) / (2 * sigmas**2))  # (B, Lq, Ld, K)
    soft_tf = (k * d_mask[:, None, :, None]).sum(dim=2)  # (B, Lq, K)
    logs = torch.log(soft_tf.clamp(min=1e-10)) * 0.01 * q_mask[..., None]
    return logs.sum(dim=1)


def window_mask(mask: torch.Tensor, h: int) -> torch.Tensor:
    """Mask (B, L - h + 1) of the h-gram windows whose positions are all tokens."""
    return mask.unfold(1, h, 1).min(dim=-1).values


class ConvKNRMModule(torch.nn.Module):
    def __init__(self, embeddings: torch.Tensor, ngrams: Sequence[int], channels: int, kernels: int, hidden: int,
                 dropout: float, freeze_embeddings: bool):
        super().__init__()
        self.embedding = torch.nn.Embedding.from_pretrained(embeddings.clone(), freeze=freeze_embeddings,
                                                            padding_idx=None)
        dim = embeddings.shape[1]
        self.ngrams = list(ngrams)
        self.convs = torch.nn.ModuleList(torch.nn.Conv1d(dim, channels, h) for h in self.ngrams)
        self.register_buffer("mus", torch.tensor(kernel_mus(kernels)))
        self.register_buffer("sigmas", torch.tensor(kernel_sigmas(kernels)))
        features = len(self.ngrams) ** 2 * kernels
        self.dropout = torch.nn.Dropout(dropout)
        if hidden:
            self.combine = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(),
                                               torch.nn.Linear(hidden, 1))
        else:  # Dai et al.: a linear combination of the kernel features
            self.combine = torch.nn.Linear(features, 1)

    def grams(self, ids: torch.Tensor, mask: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        x = self.dropout(self.embedding(ids)).transpose(1, 2)  # (B, E, L)
        out = []
        for h, conv in zip(self.ngrams, self.convs):
            g = F.normalize(F.relu(conv(x)).transpose(1, 2), dim=-1)  # (B, L - h + 1, C), unit length
            out.append((g, window_mask(mask, h)))
        return out

    def forward(self, q, q_mask, d, d_mask) -> torch.Tensor:
        qg, dg = self.grams(q, q_mask), self.grams(d, d_mask)
        feats = [kernel_pooling(qh @ dh.transpose(1, 2), qm, dm, self.mus, self.sigmas)
                 for qh, qm in qg for dh, dm in dg]
        return self.combine(self.dropout(torch.cat(feats, dim=1))).squeeze(-1)


class ConvKNRMRanker(TwoSidedRanker):
    name = "convknrm"

    @classmethod
    def make_module(cls, arch: Mapping[str, Any], embeddings: torch.Tensor) -> torch.nn.Module:
        return ConvKNRMModule(embeddings, arch["ngrams"], arch["channels"], arch["kernels"], arch["hidden"],
                              arch["dropout"], arch["freeze_embeddings"])

    def min_width(self) -> int:
        return max(self.arch["ngrams"])

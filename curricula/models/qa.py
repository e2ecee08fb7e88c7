"""The answer-selection networks of Wang et al. 2020 §3 (Fig. 1): ``ranker: cnn_qa`` and ``ranker: lstm_qa``.

Each side (question/context and answer/response) goes through the same encoder and is max-pooled over positions
into e_q and e_a: a wide convolution (Severyn & Moschitti 2015, Wang's [32]) or a bidirectional LSTM (Tan et al.
2015, Wang's [36]). The join layer concatenates [e_q; e_q^T M e_a; e_a] (the learned bilinear similarity), a
hidden tanh layer models interactions between its components, and a two-class softmax gives y = P(relevant).
The score is the logit z_1 - z_0, so sigmoid(score) = y and the pointwise BCE equals the softmax cross-entropy.

Dropout (Wang §5.1.2: rate 0.5) sits on the embeddings, the join vector and the hidden layer, so
:meth:`curricula.models.base.Ranker.mc_dropout` gives the stochastic passes of BALD and DASL's uncertainty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from curricula.models.text import TwoSidedRanker, distinct_rows, dropout_active, masked_max


class JoinHead(torch.nn.Module):
    """[e_q; e_q^T M e_a; e_a] -> dropout -> tanh hidden -> dropout -> 2 classes; returns z_1 - z_0."""

    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__()
        self.similarity = torch.nn.Bilinear(dim, dim, 1)
        self.dropout = torch.nn.Dropout(dropout)
        self.hidden = torch.nn.Linear(2 * dim + 1, hidden)
        self.out = torch.nn.Linear(hidden, 2)

    def forward(self, eq: torch.Tensor, ea: torch.Tensor) -> torch.Tensor:
        # bilinear in fp32: CPU autocast leaves nn.Bilinear out of its casts, so bf16 e_q, e_a (from the bf16
        # convolution) would meet fp32 weights; .float() is a no-op on fp32 inputs (fp32 results unchanged)
        join = torch.cat([eq, self.similarity(eq.float(), ea.float()), ea], dim=1)
        z = self.out(self.dropout(torch.tanh(self.hidden(self.dropout(join)))))
        return z[:, 1] - z[:, 0]


class CNNEncoder(torch.nn.Module):
    """Wide convolution (zero padding ``width // 2`` each side) + ReLU, max-pooled over valid positions."""

    def __init__(self, dim: int, channels: int, width: int):
        super().__init__()
        self.conv = torch.nn.Conv1d(dim, channels, width, padding=width // 2)
        self.width = width

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x * mask[..., None]  # padding embeddings do not leak into the windows
        h = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)  # (B, L', C)
        # a window is valid when its centre is a token (even widths produce one extra trailing position)
        valid = torch.nn.functional.pad(mask, (0, h.shape[1] - mask.shape[1]))
        return masked_max(h, valid)


class LSTMEncoder(torch.nn.Module):
    """Bidirectional LSTM over the true lengths (packed), hidden size ``channels // 2`` per direction, max-pooled."""

    def __init__(self, dim: int, channels: int):
        super().__init__()
        if channels % 2:
            raise ValueError(f"lstm_qa channels must be even (two directions), got {channels}")
        self.lstm = torch.nn.LSTM(dim, channels // 2, batch_first=True, bidirectional=True)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        lengths = mask.sum(dim=1).long().clamp(min=1).cpu()
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        h, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return masked_max(h, mask)


class SiameseQAModule(torch.nn.Module):
    def __init__(self, embeddings: torch.Tensor, encoder: torch.nn.Module, channels: int, hidden: int,
                 dropout: float, freeze_embeddings: bool, embedding_dropout: float | None = None):
        super().__init__()
        self.embedding = torch.nn.Embedding.from_pretrained(embeddings.clone(), freeze=freeze_embeddings)
        self.encoder = encoder
        # on the word-piece embeddings (null = ``dropout``); the head has its own at ``dropout``
        self.dropout = torch.nn.Dropout(dropout if embedding_dropout is None else embedding_dropout)
        self.head = JoinHead(channels, hidden, dropout)

    def side(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.dropout(self.embedding(ids)), mask)

    def forward(self, q, q_mask, d, d_mask) -> torch.Tensor:
        if dropout_active(self.dropout):
            # random masks: drawn per pair and side, in the order and shapes they were always drawn in
            return self.head(self.side(q, q_mask), self.side(d, d_mask))
        q, q_mask, rows = distinct_rows(q, q_mask)  # each distinct context encoded once
        return self.head(self.side(q, q_mask)[rows], self.side(d, d_mask))

    def mc_forward(self, batch: dict[str, torch.Tensor], passes: int) -> torch.Tensor:
        """(passes, B) logits of MC-dropout passes: without embedding dropout the encoders are deterministic, so
        e_q and e_a are computed once and only the join head (with its dropout) runs per pass."""
        args = (batch["q"], batch["q_mask"], batch["d"], batch["d_mask"])
        if dropout_active(self.dropout):
            return torch.stack([self(*args) for _ in range(passes)])
        q, q_mask, rows = distinct_rows(args[0], args[1])
        eq, ea = self.side(q, q_mask)[rows], self.side(args[2], args[3])
        return torch.stack([self.head(eq, ea) for _ in range(passes)])


class CNNQARanker(TwoSidedRanker):
    name = "cnn_qa"

    @classmethod
    def make_module(cls, arch: Mapping[str, Any], embeddings: torch.Tensor) -> torch.nn.Module:
        encoder = CNNEncoder(embeddings.shape[1], arch["channels"], arch["width"])
        return SiameseQAModule(embeddings, encoder, arch["channels"], arch["hidden"], arch["dropout"],
                               arch["freeze_embeddings"], arch.get("embedding_dropout"))


class LSTMQARanker(TwoSidedRanker):
    name = "lstm_qa"

    @classmethod
    def make_module(cls, arch: Mapping[str, Any], embeddings: torch.Tensor) -> torch.nn.Module:
        encoder = LSTMEncoder(embeddings.shape[1], arch["channels"])
        return SiameseQAModule(embeddings, encoder, arch["channels"], arch["hidden"], arch["dropout"],
                               arch["freeze_embeddings"], arch.get("embedding_dropout"))

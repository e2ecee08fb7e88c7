"""The texts, ranker specs, small modules and batch that the ranker tests share (tests/test_models.py,
tests/test_repeated_contexts.py, tests/test_precision.py): a new fast ranker goes into ``FAST`` and its module into
``_modules`` here, so that the parametrised tests cover it."""

from __future__ import annotations

import torch

from curricula.models.convknrm import ConvKNRMModule
from curricula.models.qa import CNNEncoder, LSTMEncoder, SiameseQAModule


FAST = ("convknrm", "cnn_qa", "lstm_qa")
CONTEXTS = ["hello there how are you doing today", "what is the weather like in paris", "", "ok"]
RESPONSES = ["i am fine thanks and you", "it is sunny", "sure", "see you tomorrow then my friend"]


def spec(ranker: str, **arch) -> dict:
    return {"ranker": ranker, "model": "minilm", "layers": 1, "max_length": 32, "architecture": arch}


def _modules(dropout: float, embedding_dropout: float | None = None):
    torch.manual_seed(0)
    emb = torch.randn(50, 8)
    return {
        "convknrm": ConvKNRMModule(emb, [1, 2, 3], channels=6, kernels=5, hidden=4, dropout=dropout,
                                   freeze_embeddings=False, embedding_dropout=embedding_dropout),
        "cnn_qa": SiameseQAModule(emb, CNNEncoder(8, 6, 3), 6, 4, dropout, False, embedding_dropout),
        "lstm_qa": SiameseQAModule(emb, LSTMEncoder(8, 6), 6, 4, dropout, False, embedding_dropout),
    }


def _batch():
    g = torch.Generator().manual_seed(1)
    q = torch.randint(1, 50, (3, 7), generator=g)
    d = torch.randint(1, 50, (3, 5), generator=g)
    q_mask = torch.tensor([[1.0] * 7, [1.0] * 4 + [0.0] * 3, [1.0] * 3 + [0.0] * 4])
    d_mask = torch.tensor([[1.0] * 5, [1.0] * 3 + [0.0] * 2, [1.0] * 5])
    return q, q_mask, d, d_mask

"""Ranking losses over a batch of score groups, per element, so curriculum weights apply per instance.

Scores come as a (B, 1 + m) tensor: column 0 is the positive's score R(q, d+), columns 1..m its m negatives.
Every loss returns the per-element losses (nats, or squared score units for MSE) *before* any reduction, and
:func:`weighted_mean` multiplies them by the curriculum weights and averages. That is MacAvaney et al. 2020
eq. 4: the weight W(t, i) scales each training sample's loss, not the batch mean.

* ``pointwise_ce``: binary cross-entropy with logits on every (q, d) of the group (label 1 for column 0): the
  two-class softmax cross-entropy Penha & Hauff fine-tune BERT with. Elements: (B, 1 + m).
* ``pointwise_mse``: (s - R(q, d))^2 with s in {0, 1} (MacAvaney eq. 1). Elements: (B, 1 + m).
* ``pairwise_ce``: -log of the softmax probability of d+ over {d+, d-_j} (MacAvaney eq. 2, which prints the
  probability; its negative log is minimised) = softplus(R(q, d-_j) - R(q, d+)). Elements: (B, m).
* ``hinge``: max(0, margin - R(c, r+) + R(c, r-_j)) (Su et al. 2021 eq. 1, margin 1). Eq. 1 sums over the m
  negatives; the mean over elements here is that sum divided by the constant B * m. Elements: (B, m).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported inside the functions: the Snakefile imports LOSSES (through curricula.experiments.specs) while
# parsing the workflow, which must not pay for importing torch.
LOSSES = ("pointwise_ce", "pointwise_mse", "pairwise_ce", "hinge")
POINTWISE = ("pointwise_ce", "pointwise_mse")


def group_labels(scores: torch.Tensor) -> torch.Tensor:
    """1 for column 0 (the positive), 0 for the negatives, shaped like ``scores``."""
    import torch

    labels = torch.zeros_like(scores)
    labels[:, 0] = 1.0
    return labels


def binary_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Per-element binary cross-entropy of logits against 0/1 labels (nats): the pointwise loss and the teacher's
    per-pair loss (Penha & Hauff 2020 §4, BERT_loss)."""
    import torch.nn.functional as F

    return F.binary_cross_entropy_with_logits(logits, labels, reduction="none")


def pointwise_ce(scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    return binary_ce(scores, group_labels(scores))


def pointwise_mse(scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    return (group_labels(scores) - scores) ** 2


def pairwise_ce(scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    import torch.nn.functional as F

    return F.softplus(scores[:, 1:] - scores[:, :1])


def hinge(scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    import torch

    return torch.clamp(margin - scores[:, :1] + scores[:, 1:], min=0.0)


def element_losses(name: str, scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Per-element losses of ``name`` on (B, 1 + m) scores: shape (B, 1 + m) pointwise, (B, m) pairwise."""
    if scores.dim() != 2 or scores.shape[1] < 2:
        raise ValueError(f"scores must be (batch, 1 + m) with m >= 1 negatives, got shape {tuple(scores.shape)}")
    try:
        fn = {"pointwise_ce": pointwise_ce, "pointwise_mse": pointwise_mse, "pairwise_ce": pairwise_ce,
              "hinge": hinge}[name]
    except KeyError:
        raise ValueError(f"unknown loss {name!r}; known: {list(LOSSES)}") from None
    return fn(scores, margin)


def weighted_mean(losses: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """mean(W * L) over all elements (MacAvaney eq. 4); plain mean without weights."""
    if weights is None:
        return losses.mean()
    if weights.shape != losses.shape:
        raise ValueError(f"weights {tuple(weights.shape)} do not match losses {tuple(losses.shape)}")
    return (losses * weights.to(losses.dtype)).mean()

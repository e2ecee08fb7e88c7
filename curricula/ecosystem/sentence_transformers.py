"""The curricula as components of sentence-transformers' ``CrossEncoderTrainer``.

* :class:`CurriculumBatchSampler`: the trainer's ``batch_sampler``. Batch ``s`` (0-based optimiser step) is the
  pipeline's own :class:`curricula.curriculum.ordering.CurriculumSampler` batch ``s``: ``batch_size`` instances drawn
  uniformly from the prefix of the easy -> hard curriculum its pacing allows at ``s`` (Penha & Hauff's scoring x
  pacing, or HCL's corpus-level threshold), from a generator seeded by (seed, s). The indices are curriculum
  positions, the rows of :func:`curricula.ecosystem.curriculum_data.instance_dataset`. Seedable as the trainer
  expects (it passes ``args.seed``) and resumable: an epoch is ``steps`` batches, epoch ``e``'s batch ``i`` is step
  ``e * steps + i``, so the trainer's ``set_epoch`` and its skipping of the batches already trained give a resumed
  run exactly the batches an uninterrupted one draws. :func:`curriculum_batch_sampler` makes the factory the
  trainer's ``batch_sampler`` argument takes.
* :class:`CurriculumLoss`: the pipeline's per-element losses on each row's (1 + m) scores (positive first), weighted
  by MacAvaney et al.'s W = D + (i/m)(1 - D) (eq. 3-4; D the row's ``label``, its elements' ease; i the iteration
  of the trainer's step) or unweighted; over sentence-transformers' pointwise ``BinaryCrossEntropyLoss`` /
  ``MSELoss`` or pairwise ``RankNetLoss``, whose model it takes. Its :meth:`CurriculumLoss.step_callback` tells
  it the trainer's step.

Imports sentence-transformers, transformers and torch; nothing in the pipeline imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import BatchSampler

from curricula.curriculum.ordering import Curriculum, CurriculumSampler
from curricula.curriculum.pacing import Pacing
from curricula.curriculum.weighting import Weighting, curriculum_weight, iteration_of
from curricula.ecosystem.curriculum_data import RunCurriculum
from curricula.training.losses import LOSSES, element_losses, weighted_mean

#: the pipeline's loss each sentence-transformers cross-encoder loss stands for, on logits (label 1 = the positive)
PEER_LOSSES = {"BinaryCrossEntropyLoss": "pointwise_ce", "MSELoss": "pointwise_mse", "RankNetLoss": "pairwise_ce"}


class CurriculumBatchSampler(BatchSampler):
    """The pipeline's curriculum batches as a batch sampler: ``steps`` batches an epoch, batch ``s`` the positions
    :meth:`curricula.curriculum.ordering.CurriculumSampler.positions` draws at step ``s`` (see the module). A batch is
    an optimiser step as long as the trainer accumulates no gradients (``gradient_accumulation_steps=1``, its
    default)."""

    def __init__(self, dataset: Any, batch_size: int, drop_last: bool = False,
                 valid_label_columns: Sequence[str] | None = None, generator: torch.Generator | None = None,
                 seed: int = 0, *, curriculum: Curriculum, pacing: Pacing, steps: int):
        super().__init__(range(len(dataset)), batch_size=batch_size, drop_last=drop_last)
        if len(dataset) != len(curriculum):
            raise ValueError(f"the dataset has {len(dataset)} rows and the curriculum {len(curriculum)} instances: "
                             "row i must be curriculum position i (curricula.ecosystem.curriculum_data)")
        if steps < 1:
            raise ValueError(f"steps={steps}: an epoch needs at least one batch")
        self.sampler_of_steps = CurriculumSampler(curriculum, pacing, batch_size, seed)
        self.steps = int(steps)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The trainer's epoch (it calls this at each epoch's start): epoch ``e`` draws steps ``e * steps`` on."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        first = self.epoch * self.steps
        for step in range(first, first + self.steps):
            yield self.sampler_of_steps.positions(step).tolist()


def curriculum_batch_sampler(curriculum: Curriculum | str | Path, pacing: Pacing,
                             steps: int) -> Callable[..., CurriculumBatchSampler]:
    """The factory ``CrossEncoderTrainingArguments(batch_sampler=...)`` takes: called by the trainer with the
    dataset, its batch size and seed, it returns a :class:`CurriculumBatchSampler` over ``curriculum`` (a folder or
    its reader) paced by ``pacing``, ``steps`` batches an epoch."""
    reader = curriculum if isinstance(curriculum, Curriculum) else Curriculum(curriculum)

    def make(dataset: Any, batch_size: int, drop_last: bool = False,
             valid_label_columns: Sequence[str] | None = None, generator: torch.Generator | None = None,
             seed: int = 0) -> CurriculumBatchSampler:
        return CurriculumBatchSampler(dataset, batch_size, drop_last, valid_label_columns, generator, seed,
                                      curriculum=reader, pacing=pacing, steps=steps)

    return make


def run_batch_sampler(run: RunCurriculum, steps: int | None = None) -> Callable[..., CurriculumBatchSampler]:
    """:func:`curriculum_batch_sampler` of a trained run's curriculum and pacing; ``steps`` per epoch defaults to
    the length the run's pacing was resolved on."""
    return curriculum_batch_sampler(run.curriculum(), run.arm.pacing, steps or run.arm.length)


def weighted_group_loss(scores: torch.Tensor, loss: str, *, margin: float = 1.0, ease: torch.Tensor | None = None,
                        weighting: Weighting | None = None, step: int = 0) -> torch.Tensor:
    """The pipeline's loss of a batch: per-element ``loss`` (:func:`curricula.training.losses.element_losses`) of
    (B, 1 + m) logits, positive in column 0, times MacAvaney's W of ``ease`` (D, 1 = easy, shaped like the elements)
    at the iteration of 0-based ``step`` (eq. 3, with ``weighting``'s m, anti-curriculum and iteration length), then
    the mean (eq. 4); unweighted without ``weighting`` or ``ease``."""
    losses = element_losses(loss, scores.float(), margin)
    if weighting is None or ease is None:
        return weighted_mean(losses)
    weights = curriculum_weight(ease.detach().cpu().numpy().astype(np.float64),
                                iteration_of(step, weighting.iteration_steps), weighting.m, anti=weighting.anti)
    return weighted_mean(losses, torch.from_numpy(weights).to(losses.device))


def peer_loss_name(loss: Any) -> str:
    """The pipeline's loss a sentence-transformers loss object stands for (:data:`PEER_LOSSES`); ValueError for
    another loss, or one whose activation is not the identity (the pipeline's losses read logits)."""
    name = type(loss).__name__
    if name not in PEER_LOSSES:
        raise ValueError(f"{name}: CurriculumLoss wraps {', '.join(PEER_LOSSES)} (or takes a loss name)")
    activation = getattr(loss, "activation_fn", None)
    if activation is not None and type(activation).__name__ != "Identity":
        raise ValueError(f"{name} with activation {type(activation).__name__}: the curriculum loss reads logits")
    return PEER_LOSSES[name]


class CurriculumLoss(torch.nn.Module):
    """A cross-encoder loss over rows (query, positive, negative_1..m) with MacAvaney's weights from the rows'
    ``label``, their elements' ease (see the module). ``base`` is a sentence-transformers loss (its model and kind,
    :data:`PEER_LOSSES`) or a ``CrossEncoder`` with ``loss`` naming one of :data:`curricula.training.losses.LOSSES`.
    """

    def __init__(self, base: Any, loss: str | None = None, weighting: Weighting | None = None,
                 margin: float = 1.0):
        super().__init__()
        is_loss = type(base).__name__ in PEER_LOSSES
        self.model = base.model if is_loss else base
        self.loss = loss or (peer_loss_name(base) if is_loss else "pointwise_ce")
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; known: {list(LOSSES)}")
        self.weighting = weighting
        self.margin = float(margin)
        self.step = 0  # the trainer's global step (step_callback keeps it)

    def scores(self, inputs: Sequence[Sequence[str]], prompt: str | None = None,
               task: str | None = None) -> torch.Tensor:
        """(B, 1 + m) logits of the rows: ``inputs`` are the columns, queries first, then the positives and the
        negatives; all pairs go through the model in one batch."""
        queries, docs = inputs[0], inputs[1:]
        pairs = [(query, column[i]) for i, query in enumerate(queries) for column in docs]
        features = self.model.preprocess(pairs, prompt=prompt, task=task)
        features = {k: v.to(self.model.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
        return self.model(features)["scores"].view(len(queries), len(docs))

    def forward(self, inputs: Sequence[Sequence[str]], labels: Any = None, prompt: str | None = None,
                task: str | None = None) -> torch.Tensor:
        """The weighted loss of one batch (:func:`weighted_group_loss`); ``labels`` the rows' ease."""
        ease = None
        if self.weighting is not None:
            if labels is None:
                raise ValueError("a weighted curriculum loss needs the elements' ease as the dataset's label column")
            ease = torch.stack([torch.as_tensor(x) for x in labels]) if isinstance(labels, list) else labels
        return weighted_group_loss(self.scores(inputs, prompt, task), self.loss, margin=self.margin, ease=ease,
                                   weighting=self.weighting, step=self.step)

    def step_callback(self) -> Any:
        """A ``transformers.TrainerCallback`` that sets :attr:`step` to the trainer's global step before each
        step (pass it in the trainer's ``callbacks``), so the weights follow the trainer's steps, resumed ones too."""
        from transformers import TrainerCallback

        loss = self

        class StepCallback(TrainerCallback):
            def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                loss.step = int(state.global_step)

        return StepCallback()

    def get_config_dict(self) -> dict[str, Any]:
        """What sentence-transformers' model card records of the loss."""
        weighting = self.weighting
        return {"loss": self.loss, "margin": self.margin,
                "weighting": None if weighting is None else {"m": weighting.m, "anti": weighting.anti,
                                                              "iteration_steps": weighting.iteration_steps}}

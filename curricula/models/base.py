"""What every ranker offers the training loop, evaluation and active learning: featurise, score, save.

A :class:`Ranker` wraps a ``torch.nn.Module`` and the featurisation of (context, response) pairs. The training
loop, dev selection, test evaluation and MC-dropout uncertainty only call the methods below, so a new
architecture is one subclass in :mod:`curricula.models` and nothing else changes.

Scores are raw logits: higher = more relevant; ``sigmoid(logit)`` is the model's probability that the pair is
relevant (for the two-class softmax models of Wang et al. 2020 §3 the logit is z_1 - z_0, so the sigmoid is
exactly the softmax probability of class 1).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import polars as pl
import torch
from tqdm.auto import tqdm

from curricula.models.hf import autocast
from curricula.plumbing.shards import WHOLE, Shard, batch_shard, length_batches, shard_rows
from curricula.training.transfer import batch_to_device

if TYPE_CHECKING:
    from curricula.training.spec import RankerSpec

#: the file a saved ranker folder describes itself with
RANKER_FILE = "ranker.json"


class Ranker:
    """A scorer of (context, response) pairs: ``encode`` -> ``collate`` -> ``forward`` logits."""

    name: ClassVar[str] = ""
    #: a BERT-style transformer: precision "auto" runs it in bf16 on CPUs with bf16 instructions and on GPUs of
    #: compute capability 8.0 or more (:func:`curricula.models.hf.autocast_dtype`); other rankers stay fp32 everywhere
    transformer: ClassVar[bool] = False

    def __init__(self, module: torch.nn.Module):
        self.module = module

    # ---------------------------------------------------------------- featurisation (per architecture)
    def encode(self, contexts: Sequence[str], responses: Sequence[str]) -> list[Any]:
        """One feature item per pair (token ids), cheap to batch later."""
        raise NotImplementedError

    def length(self, item: Any) -> int:
        """Sort key of an item when scoring: items are batched in its order, so that a batch holds items of about
        the same padded size (the length of a one-sequence item)."""
        raise NotImplementedError

    def collate(self, items: Sequence[Any]) -> dict[str, torch.Tensor]:
        """Pad items into one batch of tensors."""
        raise NotImplementedError

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits (batch,) of a collated batch already on the module's device."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """Everything needed to rebuild the architecture (written to ``ranker.json``)."""
        raise NotImplementedError

    def save(self, out_dir: str | Path) -> Path:
        """Write the ranker to ``out_dir`` atomically; :func:`curricula.models.load_ranker` reads it back."""
        raise NotImplementedError

    if TYPE_CHECKING:
        # the constructors every ranker class defines, which curricula.models.build_ranker and load_ranker call on
        # the class a name gives (a type[Ranker]); declared for the type checker only, so that a class without them
        # still fails as before (AttributeError)
        @classmethod
        def build(cls, spec: RankerSpec, seed: int) -> Ranker:
            """A new, untrained ranker of a ranker spec, its random initialisation seeded with ``seed``."""
            ...

        @classmethod
        def load(cls, folder: Path, config: Mapping[str, Any]) -> Ranker:
            """The ranker saved in ``folder`` whose ``ranker.json`` holds ``config``."""
            ...

    # ---------------------------------------------------------------- shared behaviour
    def to(self, device: torch.device | str) -> Ranker:
        self.module.to(device)
        return self

    @property
    def device(self) -> torch.device:
        return next(self.module.parameters()).device

    def train(self, mode: bool = True) -> Ranker:
        self.module.train(mode)
        return self

    def eval(self) -> Ranker:
        return self.train(False)

    def parameters(self):
        return self.module.parameters()

    def logits(self, batch: dict[str, torch.Tensor], device: torch.device, precision: str = "auto") -> torch.Tensor:
        """Float32 logits (batch,) under the device's autocast rules (:func:`curricula.models.hf.autocast`); a host
        batch goes to a CUDA device from pinned memory, without waiting (:func:`batch_to_device`)."""
        batch = batch_to_device(batch, device)
        with autocast(device, precision, self.transformer):
            out = self.forward(batch)
        return out.float().view(-1)

    def stochastic_logits(self, batch: dict[str, torch.Tensor], device: torch.device, passes: int,
                          precision: str = "auto") -> torch.Tensor:
        """Float32 logits (passes, batch) of ``passes`` forward passes of one batch with dropout on (call inside
        :meth:`mc_dropout`). A module with an ``mc_forward(batch, passes)`` method (dropout only after a
        deterministic featurisation) computes the features once; otherwise each pass is a whole forward pass."""
        mc_forward = getattr(self.module, "mc_forward", None)
        if mc_forward is None:
            return torch.stack([self.logits(batch, device, precision) for _ in range(passes)])
        batch = batch_to_device(batch, device)
        with autocast(device, precision, self.transformer):
            out = mc_forward(batch, passes)
        return out.float().view(passes, -1)

    def pair_logits(self, contexts: Sequence[str], responses: Sequence[str], device: torch.device,
                    precision: str = "auto") -> torch.Tensor:
        """Logits of pairs in input order, with gradients (one training batch)."""
        return self.logits(self.collate(self.encode(contexts, responses)), device, precision)

    def scoring_cache(self, items: Sequence[Any] = ()) -> contextlib.AbstractContextManager:
        """A context in which the ranker may keep per-text work across the batches of one scoring pass (the weights
        do not change inside it); :func:`score_pair_rows` scores inside one. ``items``: every encoded pair of the
        pass, all shards' (work shared between pairs is then done the same way in every shard). Default: nothing
        kept."""
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def mc_dropout(self) -> Iterator[None]:
        """Dropout on, everything else in eval mode: stochastic forward passes for MC-dropout (Gal 2016).

        Restores the previous train/eval state of every submodule on exit.
        """
        before = {m: m.training for m in self.module.modules()}
        self.module.eval()
        for m in self.module.modules():
            if isinstance(m, torch.nn.Dropout) or type(m).__name__.endswith("Dropout"):
                m.train()
        try:
            yield
        finally:
            for m, mode in before.items():
                m.training = mode

    def has_dropout(self) -> bool:
        """Whether any dropout layer has a rate > 0 (MC-dropout needs one)."""
        return any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in self.module.modules())

    def _ranker_json(self) -> str:
        return json.dumps({"ranker": self.name, **self.config()}, indent=2, sort_keys=True) + "\n"


@torch.inference_mode()
def score_pairs(ranker: Ranker, contexts: Sequence[str], responses: Sequence[str], *, batch_size: int,
                device: torch.device | None = None, precision: str = "auto", progress: bool = True,
                desc: str = "scoring", stochastic: bool = False) -> np.ndarray:
    """Logits for every (context, response) pair, in input order (float32).

    Pairs are batched by length (about 3x faster than arrival order on CPU for the cross-encoder); each batch's
    logits come to the host in one copy. With
    ``stochastic=False`` the module is in eval mode (dropout off), so the result is deterministic on a given
    device; ``stochastic=True`` keeps dropout on (one MC-dropout pass).
    """
    return score_pair_rows(ranker, contexts, responses, batch_size=batch_size, device=device, precision=precision,
                           progress=progress, desc=desc, stochastic=stochastic)[1]


@torch.inference_mode()
def score_pair_rows(ranker: Ranker, contexts: Sequence[str], responses: Sequence[str], *, batch_size: int,
                    device: torch.device | None = None, precision: str = "auto", progress: bool = True,
                    desc: str = "scoring", stochastic: bool = False,
                    shard: Shard = WHOLE) -> tuple[np.ndarray, np.ndarray]:
    """(rows, logits) of the pairs shard ``shard`` scores, rows in input order (:func:`score_pairs` otherwise).

    A shard takes a contiguous run of whole length-sorted batches, so each logit is bitwise the unsharded one.
    """
    device = device or ranker.device
    items = ranker.encode(contexts, responses)
    batches = batch_shard(length_batches([ranker.length(x) for x in items], batch_size), shard)
    scores = np.empty(len(items), dtype=np.float32)
    was_training = ranker.module.training
    ctx = ranker.mc_dropout() if stochastic else contextlib.nullcontext()
    if not stochastic:
        ranker.eval()
    try:
        with ctx, ranker.scoring_cache(items):
            for idx in tqdm(batches, desc=desc, disable=not progress, unit="batch"):
                batch = ranker.collate([items[i] for i in idx])
                scores[idx] = ranker.logits(batch, device, precision).cpu().numpy()
    finally:
        if not stochastic:
            ranker.train(was_training)
    rows = shard_rows(batches)
    return rows, scores[rows]


def score_pair_frame(ranker: Ranker, pairs, *, batch_size: int, device: torch.device | None = None,
                     precision: str = "auto", progress: bool = True, desc: str = "scoring"):
    """(qid, docid, score) of a pairs frame with columns qid, docid, context, response (:func:`score_pairs`)."""
    scores = score_pairs(ranker, pairs["context"].to_list(), pairs["response"].to_list(), batch_size=batch_size,
                         device=device, precision=precision, progress=progress, desc=desc)
    return pairs.select("qid", "docid").with_columns(score=pl.Series(scores.astype(np.float64)))


@torch.inference_mode()
def mc_dropout_probabilities(ranker: Ranker, contexts: Sequence[str], responses: Sequence[str], *, passes: int,
                             batch_size: int, device: torch.device | None = None, precision: str = "auto",
                             progress: bool = True, desc: str = "mc-dropout") -> np.ndarray:
    """(passes, pairs) relevance probabilities (sigmoid of the logit) from ``passes`` stochastic forward passes with
    dropout on (Wang et al. 2020 eq. 7, Algorithm 1 line 3). Each batch is tokenised once and run ``passes``
    times (:meth:`Ranker.stochastic_logits`: featurised once too when the ranker's dropout allows); the caller
    seeds torch for reproducible passes."""
    if not ranker.has_dropout():
        raise ValueError(f"ranker {ranker.name!r} has no dropout > 0: MC-dropout passes would all be equal")
    device = device or ranker.device
    items = ranker.encode(contexts, responses)
    order = np.argsort([ranker.length(x) for x in items], kind="stable")
    out = np.empty((passes, len(items)), dtype=np.float32)
    with ranker.mc_dropout(), ranker.scoring_cache(items):
        for start in tqdm(range(0, len(items), batch_size), desc=desc, disable=not progress, unit="batch"):
            idx = order[start : start + batch_size]
            batch = batch_to_device(ranker.collate([items[i] for i in idx]), device)
            out[:, idx] = torch.sigmoid(ranker.stochastic_logits(batch, device, passes, precision)).cpu().numpy()
    return out

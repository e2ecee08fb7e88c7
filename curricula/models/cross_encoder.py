"""The cross-encoder ranker (``ranker: cross_encoder``): a BERT-style sequence classifier with one logit.

Shared by the teacher and the trained rankers.

Input is ``[CLS] context [SEP] response [SEP]`` as in Penha & Hauff 2020 §4 ("the input is the concatenation of
the dialogue context and the candidate response separated by SEP tokens"). A pair longer than ``max_length`` word
pieces is cut by Hugging Face's own rule, ``truncation="longest_first"`` with ``truncation_side="left"``
(:func:`pair_lengths`): the longer side gives up pieces first, and both sides lose their *first* pieces, so a
context keeps its most recent turns (which decide what a good reply is). Hugging Face tokenizers can express this
rule, so a saved model folder carries it (``truncation_side`` and ``model_max_length`` in
``tokenizer_config.json``) and ``sentence_transformers.CrossEncoder(folder)`` or ``AutoTokenizer`` with
``truncation=True`` cut every pair as this project does.
Scores are the classifier's single logit; higher = more relevant. ``pooling`` picks what the classifier reads:
the ``[CLS]`` state (``cls``, Hugging Face's sequence classifier, as in the papers' BERT rankers) or the mean of
all token states (``mean``, :class:`curricula.models.heads.MeanPooledCrossEncoder`), the one that learns on a cut of the
packaged mean-pooled MiniLM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from curricula.models.base import Ranker
from curricula.models.heads import MeanPooledCrossEncoder, load_cross_encoder, save_cross_encoder
from curricula.models.hf import load_tokenizer, resolve_model_dir
from curricula.training.spec import RankerSpec

#: Hugging Face's side for cutting a pair (:func:`pair_lengths`), saved with every model folder
TRUNCATION_SIDE = "left"


def pair_lengths(n_context: int, n_response: int, budget: int) -> tuple[int, int]:
    """Word pieces kept of each side of a pair under Hugging Face's ``longest_first`` truncation (the rule of the
    ``tokenizers`` library's ``truncate_encodings``): unchanged when ``n_context + n_response <= budget``; else the
    shorter side keeps all of its pieces if they fit in half the budget and the longer side gets the rest; else
    each side gets half (the longer side the odd piece). ``budget`` excludes the three special tokens."""
    if n_context + n_response <= budget:
        return n_context, n_response
    short = min(n_context, n_response)
    short_keep, long_keep = short, short if short > budget else max(short, budget - short)
    if short_keep + long_keep > budget:
        short_keep, long_keep = budget // 2, budget // 2 + budget % 2
    if n_context <= n_response:  # ties: tokenizers keeps the first sequence as the shorter one
        return min(short_keep, n_context), min(long_keep, n_response)
    return min(long_keep, n_context), min(short_keep, n_response)


def pair_token_ids(tokenizer, contexts: Sequence[str], responses: Sequence[str], max_length: int,
                   cache: dict[str, list[int]] | None = None) -> list[list[int]]:
    """Token ids ``[CLS] ctx [SEP] resp [SEP]`` per pair, each at most ``max_length`` long: the ids that
    ``tokenizer(contexts, responses, truncation="longest_first", max_length=max_length)`` gives with
    ``truncation_side="left"`` (:func:`pair_lengths`), from each distinct text tokenised once (once across calls
    with a ``cache``: :func:`distinct_token_ids`)."""
    if max_length < 8:
        raise ValueError("max_length must be at least 8")
    ctx_ids = distinct_token_ids(tokenizer, contexts, cache)
    rsp_ids = distinct_token_ids(tokenizer, responses, cache)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    out = []
    for c, r in zip(ctx_ids, rsp_ids):
        keep_c, keep_r = pair_lengths(len(c), len(r), max_length - 3)
        out.append([cls, *c[len(c) - keep_c:], sep, *r[len(r) - keep_r:], sep])
    return out


def carry_truncation(tokenizer, max_length: int):
    """Set the tokenizer's ``truncation_side`` and ``model_max_length`` to this project's pair rule, so that
    ``save_pretrained`` writes them to ``tokenizer_config.json`` and a loader elsewhere cuts pairs the same way."""
    tokenizer.truncation_side = TRUNCATION_SIDE
    tokenizer.model_max_length = int(max_length)
    return tokenizer


def distinct_token_ids(tokenizer, texts: Sequence[str], cache: dict[str, list[int]] | None = None
                       ) -> list[list[int]]:
    """Word-piece ids (no special tokens, no truncation) of each text; each distinct text is tokenised once (a
    context comes with all its candidates). Repeated texts share one id list: read it, never modify it.

    ``cache`` (text -> ids, filled in place) carries the ids across calls, so that a job drawing the same texts
    batch after batch (the teacher's training steps) tokenises each once: only texts it lacks are tokenised. A
    text's ids do not depend on the other texts of a call, nor on whether it is a context or a response."""
    of = {} if cache is None else cache
    new = [t for t in dict.fromkeys(texts) if t not in of]
    if new:
        of.update(zip(new, tokenizer(new, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]))
    return [of[t] for t in texts]


def full_pair_lengths(tokenizer, contexts: Sequence[str], responses: Sequence[str]) -> np.ndarray:
    """The length in word pieces of each ``[CLS] ctx [SEP] resp [SEP]`` pair before any truncation (both sides whole
    plus the 3 special tokens): the ``max_length`` a pair needs to be seen whole."""
    ctx_ids = distinct_token_ids(tokenizer, contexts)
    rsp_ids = distinct_token_ids(tokenizer, responses)
    return np.fromiter((len(c) + len(r) + 3 for c, r in zip(ctx_ids, rsp_ids)), dtype=np.int64, count=len(ctx_ids))


def length_coverage(lengths: np.ndarray, budgets: Sequence[int]) -> dict[int, float]:
    """{max_length: the share of pairs (0-1) it keeps whole} for each budget in ``budgets``: the pairs of length at
    most the budget. Batches are padded to their longest pair (:func:`collate`), so a larger budget costs only where
    pairs are longer than the smaller one."""
    if len(lengths) == 0:
        raise ValueError("no pairs to measure")
    return {int(b): float(np.mean(lengths <= b)) for b in budgets}


def collate(ids: Sequence[Sequence[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad a batch of ``[CLS] a [SEP] b [SEP]`` id lists; token types are 0 up to the first SEP, then 1."""
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    width = int(lengths.max())
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    for i, x in enumerate(ids):
        input_ids[i, : len(x)] = x
    positions = np.arange(width)[None, :]
    mask = positions < lengths[:, None]
    last = input_ids[np.arange(len(ids)), lengths - 1]  # each row ends with SEP
    first_sep = (input_ids == last[:, None]).argmax(axis=1)  # its first occurrence closes the context
    types = mask & (positions > first_sep[:, None])
    return {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask.astype(np.int64)),
            "token_type_ids": torch.from_numpy(types.astype(np.int64))}


class CrossEncoderRanker(Ranker):
    """A one-logit cross-encoder over ``[CLS] context [SEP] response [SEP]``
    (:func:`curricula.models.heads.load_cross_encoder`).

    ``max_length`` is the word-piece budget of the whole pair (:func:`pair_token_ids`); ``pooling`` is ``cls`` or
    ``mean``.
    """

    name = "cross_encoder"
    transformer = True

    def __init__(self, model, tokenizer, max_length: int):
        super().__init__(model)
        self.tokenizer = carry_truncation(tokenizer, max_length)
        self.max_length = int(max_length)
        #: text -> word-piece ids kept across :meth:`encode` calls when set (a dict; None keeps nothing): a job that
        #: draws the same texts again and again (the teacher's steps) sets one for its life (:func:`distinct_token_ids`)
        self.token_cache: dict[str, list[int]] | None = None

    @property
    def pooling(self) -> str:
        """``mean`` for a :class:`~curricula.models.heads.MeanPooledCrossEncoder`, else ``cls`` (what ranker.json
        records)."""
        return "mean" if isinstance(self.module, MeanPooledCrossEncoder) else "cls"

    @classmethod
    def build(cls, spec: RankerSpec, seed: int) -> CrossEncoderRanker:
        """A new ranker from a ranker spec: ``model``, ``layers``, ``max_length``, ``pooling`` (null = the
        checkpoint's own head, ``cls`` for a bare encoder; a new head is seeded with ``seed``)."""
        model_dir = resolve_model_dir(spec.model)
        model = load_cross_encoder(model_dir, layers=spec.layers, seed=seed, pooling=spec.pooling)
        return cls(model, load_tokenizer(model_dir), spec.max_length)

    @classmethod
    def load(cls, folder, config: Mapping[str, Any] | None, max_length: int | None = None) -> CrossEncoderRanker:
        """A saved ranker folder (``ranker.json`` gives max_length and pooling) or any trained HF or
        sentence-transformers cross-encoder checkpoint with ``max_length`` (its pooling read from its files)."""
        length = (config or {}).get("max_length", max_length)
        if length is None:
            raise ValueError(f"{folder}: a Hugging Face checkpoint without ranker.json needs max_length")
        model = load_cross_encoder(folder, pooling=(config or {}).get("pooling"))
        return cls(model, load_tokenizer(folder), length)

    def encode(self, contexts, responses):
        return pair_token_ids(self.tokenizer, contexts, responses, self.max_length, self.token_cache)

    def length(self, item) -> int:
        return len(item)

    def collate(self, items):
        return collate(items, self.tokenizer.pad_token_id)

    def forward(self, batch):
        return self.module(**batch).logits.view(-1)

    def config(self):
        return {"max_length": self.max_length, "pooling": self.pooling}

    def save(self, out_dir):
        return save_cross_encoder(self.module, self.tokenizer, out_dir,
                                  extra_files={"ranker.json": self._ranker_json()})

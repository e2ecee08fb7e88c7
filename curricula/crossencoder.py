"""Cross-encoder input building and batched scoring, shared by the teacher and the rankers.

Input is ``[CLS] context [SEP] response [SEP]`` as in Penha & Hauff 2020 §4 ("the input is the concatenation of
the dialogue context and the candidate response separated by SEP tokens"). Long inputs are cut where they matter
least for response ranking: the response keeps its first ``max_length // 2`` word pieces at most, and the
context keeps its *last* tokens (the most recent turns), because the latest turns decide what a good reply is.
Scores are the classifier's single logit; higher = more relevant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from curricula.hf import autocast


def pair_token_ids(tokenizer, contexts: Sequence[str], responses: Sequence[str], max_length: int) -> list[list[int]]:
    """Token ids ``[CLS] ctx [SEP] resp [SEP]`` per pair, each at most ``max_length`` long.

    The response is cut to its first ``max_length // 2`` pieces, then the context to its last pieces that fit.
    """
    if max_length < 8:
        raise ValueError("max_length must be at least 8")
    ctx_ids = tokenizer(list(contexts), add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    rsp_ids = tokenizer(list(responses), add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    out = []
    for c, r in zip(ctx_ids, rsp_ids):
        r = r[: max_length // 2]
        room = max_length - 3 - len(r)
        c = c[-room:] if room > 0 else []
        out.append([cls, *c, sep, *r, sep])
    return out


def collate(ids: Sequence[Sequence[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad a batch of ``[CLS] a [SEP] b [SEP]`` id lists; token types are 0 up to the first SEP, then 1."""
    width = max(len(x) for x in ids)
    input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    types = torch.zeros((len(ids), width), dtype=torch.long)
    for i, x in enumerate(ids):
        input_ids[i, : len(x)] = torch.tensor(x, dtype=torch.long)
        mask[i, : len(x)] = 1
        first_sep = list(x).index(x[-1])  # x ends with SEP; its first occurrence closes the context
        types[i, first_sep + 1 : len(x)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": types}


def forward_logits(model, batch: dict[str, torch.Tensor], device: torch.device, precision: str = "auto") -> torch.Tensor:
    """The single relevance logit per pair, as float32, shape (batch,)."""
    batch = {k: v.to(device) for k, v in batch.items()}
    with autocast(device, precision):
        logits = model(**batch).logits
    return logits.float().view(-1)


@torch.inference_mode()
def score_pairs(
    model,
    tokenizer,
    contexts: Sequence[str],
    responses: Sequence[str],
    *,
    max_length: int,
    batch_size: int,
    device: torch.device,
    precision: str = "auto",
    progress: bool = True,
    desc: str = "scoring",
) -> np.ndarray:
    """Relevance logits for every (context, response) pair, in input order.

    Pairs are batched by length (about 3x faster than arrival order on CPU) with the model in eval mode
    (dropout off), so the result is deterministic on a given device.
    """
    ids = pair_token_ids(tokenizer, contexts, responses, max_length)
    order = np.argsort([len(x) for x in ids], kind="stable")
    scores = np.empty(len(ids), dtype=np.float32)
    was_training = model.training
    model.eval()
    try:
        for start in tqdm(range(0, len(ids), batch_size), desc=desc, disable=not progress, unit="batch"):
            idx = order[start : start + batch_size]
            batch = collate([ids[i] for i in idx], tokenizer.pad_token_id)
            scores[idx] = forward_logits(model, batch, device, precision).cpu().numpy()
    finally:
        model.train(was_training)
    return scores


def score_pair_frame(model, tokenizer, pairs, *, max_length: int, batch_size: int, device: torch.device,
                     precision: str = "auto", progress: bool = True, desc: str = "scoring"):
    """(qid, docid, score) of a pairs frame with columns qid, docid, context, response (:func:`score_pairs`)."""
    import polars as pl

    scores = score_pairs(model, tokenizer, pairs["context"].to_list(), pairs["response"].to_list(),
                         max_length=max_length, batch_size=batch_size, device=device, precision=precision,
                         progress=progress, desc=desc)
    return pairs.select("qid", "docid").with_columns(score=pl.Series(scores.astype(np.float64)))

"""Any model folder this pipeline saves as a PyTerrier re-ranker (``pt.Transformer``), for ``>>`` pipelines and
``pt.Experiment``.

:class:`RankerTransformer` loads a folder with :func:`curricula.models.load_ranker` (every ranker, the teacher
included: ``ranker.json`` names the architecture) and scores each row of a result frame ``qid, query, docno, text``
(``turns``, where present, is the dialogue context instead of ``query``: its turns joined by newlines, the text the
pipeline scores) with :func:`curricula.models.base.score_pairs`: the model's own truncation (its folder carries
``max_length``) and the precision it was evaluated in. It returns the frame with ``score`` (the logit, float64,
higher = more relevant) and ``rank`` (0 = best, PyTerrier's convention). Rows are scored in (qid, docno) order, the
order the evaluate stage scores its candidates in, so a frame of the test candidates gets the evaluate stage's
scores bit for bit when that stage scored the test candidates alone (without score additivity it does; with it, the
dev candidates share its length-sorted batches).

:func:`from_results` is the shortcut for a results tree: ``from_results("results/chitchat", "baseline", 1)``, or
``from_results(root, "teacher")``. Imports PyTerrier (the optional extra ``pyterrier``); nothing in the pipeline
imports this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyterrier as pt
import torch

from curricula.ecosystem.runs import TEACHER, model_folder, run_spec
from curricula.models import load_ranker, score_pairs
from curricula.models.base import Ranker

#: the precision and scoring batch of the teacher (its folder records neither; the config's defaults)
TEACHER_PRECISION = "auto"
DEFAULT_BATCH_SIZE = 128


def resolve_device(device: str | torch.device) -> torch.device:
    """``auto`` is the first CUDA device when torch can use one, else the CPU; anything else as torch names it."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def frame_contexts(frame: pd.DataFrame) -> list[str]:
    """The context of each row: its ``turns`` joined by newlines where the frame has turns (a row's missing turns
    fall back to its ``query``), else ``query``. ValueError naming the missing columns of a frame that has neither,
    or no ``qid``, ``docno`` or ``text``."""
    missing = [c for c in ("qid", "docno", "text") if c not in frame.columns]
    if "query" not in frame.columns and "turns" not in frame.columns:
        missing.append("query (or turns)")
    if missing:
        raise ValueError(f"a re-ranker needs a result frame with qid, query, docno, text; missing: {missing}")
    queries = frame["query"].tolist() if "query" in frame.columns else [None] * len(frame)
    if "turns" not in frame.columns:
        return [str(q) for q in queries]
    return [str(q) if t is None else "\n".join(t) for q, t in zip(queries, frame["turns"].tolist())]


def rerank_frame(ranker: Ranker, frame: pd.DataFrame, *, batch_size: int, device: torch.device,
                 precision: str, progress: bool = False) -> pd.DataFrame:
    """``frame`` with ``score`` (the ranker's logit, float64) and ``rank`` (0-based per qid, highest score first),
    sorted by qid, rank; the pairs go to :func:`curricula.models.base.score_pairs` in (qid, docno) order."""
    contexts = frame_contexts(frame)
    order = np.lexsort((frame["docno"].astype(str).to_numpy(), frame["qid"].astype(str).to_numpy()))
    texts = frame["text"].astype(str).tolist()
    scores = np.empty(len(frame), dtype=np.float64)
    if len(frame):
        scores[order] = score_pairs(ranker, [contexts[i] for i in order], [texts[i] for i in order],
                                    batch_size=batch_size, device=device, precision=precision, progress=progress,
                                    desc="re-ranking")
    out = frame.drop(columns=[c for c in ("score", "rank") if c in frame.columns]).assign(score=scores)
    out = out.sort_values(["qid", "score"], ascending=[True, False], kind="stable")
    out["rank"] = out.groupby("qid", sort=False).cumcount().astype("int64")
    return out.reset_index(drop=True)


class RankerTransformer(pt.Transformer):
    """A saved ranker folder as a PyTerrier re-ranker: scores ``qid, query, docno, text`` rows
    (:func:`rerank_frame`); ``precision`` (``auto``, ``fp32``, ``bf16``) and ``batch_size`` as the evaluate stage
    used them, ``max_length`` only for a bare Hugging Face checkpoint (a pipeline folder carries its own)."""

    def __init__(self, folder: str | Path, *, precision: str = "auto", batch_size: int = DEFAULT_BATCH_SIZE,
                 device: str | torch.device = "auto", max_length: int | None = None, progress: bool = False):
        super().__init__()
        self.folder = Path(folder)
        self.precision = precision
        self.batch_size = int(batch_size)
        self.device = resolve_device(device)
        self.progress = progress
        self.ranker = load_ranker(self.folder, device=self.device, max_length=max_length)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        """The re-ranked frame (:func:`rerank_frame`)."""
        return rerank_frame(self.ranker, inp, batch_size=self.batch_size, device=self.device,
                            precision=self.precision, progress=self.progress)

    def __repr__(self) -> str:
        return f"RankerTransformer({str(self.folder)!r}, {self.ranker.name}, precision={self.precision!r})"


def from_results(root: str | Path, experiment: str, seed: int | str | None = None, *,
                 device: str | torch.device = "auto", precision: str | None = None, batch_size: int | None = None,
                 progress: bool = False) -> RankerTransformer:
    """The re-ranker of ``experiment``'s model for ``seed`` in the results folder ``root`` (``results/<dataset>``),
    or of the teacher (``experiment="teacher"``, no seed), with the precision and scoring batch size its run was
    evaluated with (the run's ``config.json``; the teacher's: ``auto`` and 128, the config's defaults) unless given.
    """
    folder = model_folder(root, experiment, seed)
    settings: dict[str, Any] = {"precision": TEACHER_PRECISION, "batch_size": DEFAULT_BATCH_SIZE}
    if experiment != TEACHER:
        assert seed is not None  # model_folder refuses an experiment without one
        spec = run_spec(root, experiment, seed)
        settings = {"precision": spec.runtime.precision, "batch_size": spec.evaluation.score_batch_size}
    if precision is not None:
        settings["precision"] = precision
    if batch_size is not None:
        settings["batch_size"] = batch_size
    return RankerTransformer(folder, device=device, progress=progress, **settings)


def candidates_source(candidates: pd.DataFrame) -> pt.Transformer:
    """A first stage that returns, for a topics frame, its queries' rows of ``candidates`` (a result frame such as
    :attr:`curricula.ecosystem.frames.Frames.candidates`: BM25 on the evaluate stage's candidates)."""
    return pt.Transformer.from_df(candidates, uniform=False)

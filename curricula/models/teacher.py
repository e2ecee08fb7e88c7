"""The teacher behind Penha & Hauff's BERT_pred and BERT_loss scoring functions (2020, §3 Table 2 and §4).

"We fine-tune BERT on D_train for the conversation response ranking task ... using a balanced number of relevant
and non-relevant context and response pairs ... cross entropy loss and the Adam optimizer with learning rate of
5e-5 and epsilon = 1e-8." Here the cross-encoder has one logit and binary cross-entropy (equivalent to two-class
softmax cross-entropy); the default model is the packaged MiniLM, optionally cut to its first ``layers`` layers.

The teacher sees the train split only. Scoring the very pairs it was trained on overstates its confidence, so
``folds > 1`` cross-fits: train queries are split into folds by query, and each fold is scored by a teacher trained
on the other folds; the saved model is then trained on all train queries (for evaluation as a reference row).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import torch

from curricula.data.base import seeded_split
from curricula.data.ingest import candidate_pairs
from curricula.models import load_ranker, score_pair_rows, score_pairs
from curricula.models.cross_encoder import CrossEncoderRanker
from curricula.models.runtime import JobRuntime, start_job
from curricula.plumbing.shards import WHOLE, Shard
from curricula.training.core import FitConfig, fit
from curricula.training.spec import RankerSpec, Runtime
from curricula.training.losses import binary_ce
from curricula.training.transfer import to_device

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TeacherConfig:
    """Knobs of the teacher (config section ``teacher``). Paper scale: 12-layer BERT, length 512, lr 5e-5.
    ``deterministic``: deterministic CUDA kernels (:func:`curricula.models.runtime.use_deterministic`)."""

    model: str = "minilm"
    layers: int | None = 2
    pooling: str | None = None
    max_length: int = 64
    steps: int = 300
    batch_size: int = 16
    lr: float = 5e-5
    eps: float = 1e-8
    warmup: float = 0.1
    folds: int = 1
    seed: int = 42
    device: str = "auto"
    precision: str = "auto"
    threads: int = 2
    score_batch_size: int = 128
    deterministic: bool = False

    @property
    def runtime(self) -> Runtime:
        """How the teacher's jobs run (:func:`curricula.models.runtime.start_job`)."""
        return Runtime(device=self.device, precision=self.precision, threads=self.threads,
                       deterministic=self.deterministic)

    @property
    def ranker(self) -> RankerSpec:
        """The cross-encoder the teacher fine-tunes."""
        return RankerSpec(ranker="cross_encoder", model=self.model, layers=self.layers, pooling=self.pooling,
                          max_length=self.max_length)


def balanced_batches(labels: np.ndarray, steps: int, batch_size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Index batches with ``batch_size // 2`` positives and the rest negatives, drawn uniformly with replacement.

    Penha & Hauff 2020 §4: "a balanced number of relevant and non-relevant context and response pairs".
    """
    pos = np.flatnonzero(labels > 0)
    neg = np.flatnonzero(labels <= 0)
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("the teacher needs both relevant and non-relevant training pairs")
    n_pos = batch_size // 2
    for _ in range(steps):
        yield np.concatenate([rng.choice(pos, n_pos), rng.choice(neg, batch_size - n_pos)])


def train_cross_encoder(contexts: list[str], responses: list[str], labels: np.ndarray, cfg: TeacherConfig,
                        runtime: JobRuntime, progress: bool = True, cache: dict[str, list[int]] | None = None):
    """Fine-tune a cross-encoder on balanced batches (AdamW, linear warm-up and decay:
    :func:`curricula.training.core.fit`) on the job's device; returns (the ranker, per-step losses).

    Each distinct text is tokenised once, the first time a batch draws it (the ranker's ``token_cache``, ``cache``
    when given, so that the folds of one cross-fitting job share it): 600 steps of 16 draw each of the default run's
    3,000 contexts about 3 times. The ids, and so the batches and the losses, are those of tokenising every batch."""
    device = runtime.device
    ranker = CrossEncoderRanker.build(cfg.ranker, cfg.seed)
    ranker.token_cache = {} if cache is None else cache
    ranker.to(device)
    y = torch.tensor((labels > 0).astype(np.float32))
    batches = balanced_batches(labels, cfg.steps, cfg.batch_size, np.random.default_rng(cfg.seed))

    def step_loss(step: int) -> torch.Tensor:
        idx = next(batches)  # steps run in order, one batch each
        # only the batch's texts not seen before are tokenised (not all 30,000 pairs: 600 steps of 16 draw 9,600)
        logits = ranker.pair_logits([contexts[i] for i in idx], [responses[i] for i in idx], device, cfg.precision)
        return binary_ce(logits, to_device(y[idx], device)).mean()  # pinned, non-blocking on CUDA

    fit_cfg = FitConfig(steps=cfg.steps, lr=cfg.lr, optimizer="adamw", eps=cfg.eps, weight_decay=0.0,
                        warmup=cfg.warmup, fused=True)  # as the train stage: the 30522 x 384 embedding table's update
    result = fit(ranker.module, step_loss, fit_cfg, seed=cfg.seed, progress=progress, desc="teacher")
    return ranker, result.losses


def training_texts(pairs: pl.DataFrame) -> tuple[list[str], list[str], np.ndarray]:
    """Contexts, responses and binary labels (rel > 0) of a pairs frame with columns context, response, rel."""
    return pairs["context"].to_list(), pairs["response"].to_list(), (pairs["rel"].to_numpy() > 0).astype(np.int64)


def train_teacher(pairs: pl.DataFrame, cfg: TeacherConfig, model_out: str | Path, runtime: JobRuntime,
                  progress: bool = True) -> dict:
    """Fine-tune the teacher on all train ``pairs`` (qid, docid, rel, context, response) and save it."""
    t0 = time.time()
    contexts, responses, labels = training_texts(pairs)
    ranker, losses = train_cross_encoder(contexts, responses, labels, cfg, runtime, progress)
    ranker.save(model_out)
    return {"pairs": pairs.height, "positives": int(labels.sum()), "steps": cfg.steps,
            "first_loss": float(np.mean(losses[:20])), "final_loss": float(np.mean(losses[-20:])),
            "seconds": round(time.time() - t0, 1)}


def scores_frame(pairs: pl.DataFrame, scores: np.ndarray) -> pl.DataFrame:
    """TEACHER_SCORES: qid, docid, score (the logit), loss (per-pair BCE in nats against rel > 0)."""
    labels = (pairs["rel"].to_numpy() > 0).astype(np.float32)
    loss = binary_ce(torch.from_numpy(scores.astype(np.float32)), torch.from_numpy(labels)).numpy()
    return pl.DataFrame({"qid": pairs["qid"], "docid": pairs["docid"], "score": scores.astype(np.float64),
                         "loss": loss.astype(np.float64)})


def score_with_model(model_dir: str | Path, pairs: pl.DataFrame, cfg: TeacherConfig, runtime: JobRuntime,
                     progress: bool = True, shard: Shard = WHOLE) -> pl.DataFrame:
    """TEACHER_SCORES rows (:func:`scores_frame`) of a saved cross-encoder for ``pairs`` (columns qid, docid,
    context, response, rel) on the job's device; with ``shard`` only the pairs in that shard's batches
    (:mod:`curricula.plumbing.shards`)."""
    ranker = load_ranker(model_dir, device=runtime.device, max_length=cfg.max_length)
    rows, scores = score_pair_rows(ranker, pairs["context"].to_list(), pairs["response"].to_list(),
                                   batch_size=cfg.score_batch_size, precision=cfg.precision, progress=progress,
                                   desc="teacher scoring", shard=shard)
    return scores_frame(pairs[rows], scores)


def crossfit_scores(pairs: pl.DataFrame, cfg: TeacherConfig, runtime: JobRuntime, progress: bool = True
                    ) -> np.ndarray:
    """Each pair's logit from a teacher trained on the other ``cfg.folds`` folds (folds are split by query)."""
    if cfg.folds < 2:
        raise ValueError("cross-fitting needs folds >= 2")
    contexts, responses, labels = training_texts(pairs)
    cache: dict[str, list[int]] = {}  # word-piece ids of the texts, shared by the folds' training and scoring
    fold_of = seeded_split(pairs["qid"].unique().to_list(), {str(f): 1.0 for f in range(cfg.folds)}, cfg.seed)
    folds = np.array([fold_of[q] for q in pairs["qid"].to_list()])
    scores = np.empty(pairs.height, dtype=np.float32)
    for f in range(cfg.folds):
        held = np.flatnonzero(folds == str(f))
        rest = np.flatnonzero(folds != str(f))
        log.info("cross-fitting fold %d/%d: train on %d pairs, score %d", f + 1, cfg.folds, len(rest), len(held))
        ranker, _ = train_cross_encoder([contexts[i] for i in rest], [responses[i] for i in rest],
                                        labels[rest], cfg, runtime, progress, cache)
        scores[held] = _score(ranker, [contexts[i] for i in held], [responses[i] for i in held], cfg, progress)
    return scores


def _score(ranker, contexts, responses, cfg: TeacherConfig, progress: bool) -> np.ndarray:
    return score_pairs(ranker, contexts, responses, batch_size=cfg.score_batch_size, precision=cfg.precision,
                       progress=progress, desc="teacher scoring")


# -------------------------------------------------------------------------------------------- the rules' jobs
def teacher_config(cfg: dict, seed: int) -> TeacherConfig:
    """A :class:`TeacherConfig` from the config's ``teacher`` section (unknown keys are a TypeError)."""
    return TeacherConfig(**{**cfg, "seed": seed})


def fit_teacher(data: Mapping[str, pl.DataFrame], model_out: str | Path, cfg: TeacherConfig,
                relevant_min: int = 1, runtime: JobRuntime | None = None) -> dict:
    """Rule ``teacher_train``: fine-tune the teacher on the train split's candidate pairs of the ingest frames
    ``data`` (:func:`curricula.data.ingest.read_ingest`), save it atomically to ``model_out`` and log its stats.
    ``runtime``: the job's (:func:`curricula.models.runtime.start_job` of ``cfg.runtime`` when not given)."""
    runtime = runtime or start_job(cfg.runtime, True, "teacher training")
    pairs = candidate_pairs(data, splits=("train",), relevant_min=relevant_min)
    stats = train_teacher(pairs, cfg, model_out, runtime)
    log.info("teacher trained: %s", stats)
    return stats


def teacher_scores(data: Mapping[str, pl.DataFrame], model_dir: str | Path, cfg: TeacherConfig,
                   relevant_min: int = 1, shard: Shard = WHOLE, runtime: JobRuntime | None = None) -> pl.DataFrame:
    """Rule ``teacher_score``: the teacher's logit and per-pair loss (``TEACHER_SCORES``, sorted by qid, docid) for
    every candidate of every split of the ingest frames ``data``.

    Train pairs are scored by the saved teacher (``model_dir``), or with ``cfg.folds > 1`` cross-fitted (each fold
    by a teacher trained on the other folds). Dev and test pairs are always scored by the saved teacher (trained on
    train only), which makes the teacher an evaluation reference. ``loss`` is BCE against the label
    (rel >= relevant_min).

    With ``shard`` (rule ``teacher_score_shard``) only that shard's batches of pairs are scored
    (:mod:`curricula.plumbing.shards`); :func:`curricula.plumbing.gather.gather_shards` joins the shards.
    Cross-fitting trains ``folds`` teachers inside the job, so it is not sharded. ``runtime``: the job's
    (:func:`curricula.models.runtime.start_job` of ``cfg.runtime`` when not given).
    """
    runtime = runtime or start_job(cfg.runtime, True, "teacher scoring")
    pairs = candidate_pairs(data, splits=("train", "dev", "test"), relevant_min=relevant_min)
    train = pairs.filter(pl.col("split") == "train")
    rest = pairs.filter(pl.col("split") != "train")
    if cfg.folds > 1:
        if shard.count > 1:
            raise ValueError(f"teacher.folds={cfg.folds} cross-fits {cfg.folds} teachers in one job: "
                             "set shards.teacher to 1 (or teacher.folds to 1) to shard teacher scoring")
        train_frame = scores_frame(train, crossfit_scores(train, cfg, runtime))
        rest_frame = (score_with_model(model_dir, rest, cfg, runtime) if rest.height
                      else scores_frame(rest, np.empty(0)))
        out = pl.concat([train_frame, rest_frame])
    else:
        out = score_with_model(model_dir, pl.concat([train, rest]), cfg, runtime, shard=shard)
    return out.sort("qid", "docid")

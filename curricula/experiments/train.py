"""Curriculum training of a ranker (rule ``train``): one (experiment, seed) per job.

Each step (Su et al. 2021 Algorithm 1, with Penha's and MacAvaney's axes in the same loop):

1. draw ``batch_size`` positives uniformly from the curriculum prefix the pacing allows
   (:class:`curricula.curriculum.ordering.CurriculumSampler`: Penha §3 / HCL-CC);
2. draw ``m`` negatives per positive (:class:`curricula.curriculum.negatives.NegativeSampler`: random, candidates,
   BM25, or HCL-IC from the dense neighbours with k = 10^h_p(t));
3. score the (1 + m) pairs of each positive with the ranker (:mod:`curricula.models`), take the per-element loss
   (:mod:`curricula.training.losses`), multiply by MacAvaney's weight W = D + (i/m)(1 - D) (eq. 3;
   :mod:`curricula.curriculum.weighting`) and average (eq. 4);
4. every ``eval_every`` steps, score the dev candidates, compute the dev metric with ir-measures, and keep the best
   model (model selection on dev only: test data is never read here, except by the diagnostic mode
   ``diagnostic_test``, which also scores the test candidates at every evaluation for the selection-noise analysis
   of ``analyses/selection_noise_lib.py``, keeps each dev query's value there (``dev_query_values``), and never
   selects, stops or keeps anything by them; with ``averaging`` the evaluations score, and the best is, a weight
   average: :class:`curricula.training.averaging.WeightAverage`);
5. every ``checkpoint_every`` steps, save the training state; a re-run of a killed job resumes from there and ends
   with the same weights as an uninterrupted run.

Steps 4-5, the optimiser and the schedule are the training core's (:func:`curricula.training.core.fit`); this module
says what one step and one evaluation are. Batches and negatives of step t are pure functions of (seed, t), so a
resumed run needs no sampler state beyond the step number.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import torch

from curricula.curriculum.negatives import NegativeSampler
from curricula.curriculum.ordering import Curriculum, CurriculumSampler
from curricula.curriculum.weighting import PairEase
from curricula.data.ingest import candidate_pairs
from curricula.evaluation.metrics import measure_means
from curricula.evaluation.rerank import ranker_per_query
from curricula.experiments.spec import TrainSpec, spec_params
from curricula.models import build_ranker, ranker_class
from curricula.models.runtime import JobRuntime, start_job
from curricula.plumbing.contracts import dev_curve_spec
from curricula.training.checkpoints import Checkpointer
from curricula.training.core import FitConfig, FitResult, fit
from curricula.training.losses import element_losses, weighted_mean
from curricula.training.spec import Evaluation
from curricula.training.transfer import to_device

if TYPE_CHECKING:
    from curricula.models.base import Ranker

log = logging.getLogger(__name__)

#: what training reads of the ingest tables (a query's turns are the loader's, not the ranker's)
TRAIN_COLUMNS = {"queries": ["qid", "split", "text"]}

#: bumped when the checkpoint layout changes, so a checkpoint of another layout is ignored, not misread
CHECKPOINT_FORMAT = 3  # 3: frozen parameters are left out of the checkpoint


def spec_fingerprint(spec: TrainSpec, seed: int) -> str:
    """A hash of everything that determines the trained weights: the run's params (:func:`curricula.experiments.
    spec.spec_params`; runtime-only knobs excluded), the seed and the checkpoint layout.

    The device is the spec's knob (``auto`` included), not the resolved one: the checkpoint records the device type
    and autocast dtype apart (:class:`~curricula.training.checkpoints.Checkpointer`'s ``arithmetic``).
    ``deterministic`` enters the params only when true, so a deterministic run never resumes a checkpoint of a run
    that was not."""
    blob = json.dumps({"spec": spec_params(spec), "seed": seed, "format": CHECKPOINT_FORMAT}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def dev_pairs(data: Mapping[str, Any], dev_queries: int | None, seed: int, relevant_min: int) -> pl.DataFrame:
    """Dev candidate pairs (qid, docid, context, response, rel) of a seeded subset of ``dev_queries`` queries.

    The subset depends on the config seed only, so every experiment and seed is selected on the same queries.
    """
    pairs = candidate_pairs(data, splits=("dev",), relevant_min=relevant_min)
    qids = pairs["qid"].unique().sort()
    if dev_queries and qids.len() > dev_queries:
        pick = np.sort(np.random.default_rng(seed).choice(qids.len(), dev_queries, replace=False))
        pairs = pairs.filter(pl.col("qid").is_in(qids.gather(pick).implode()))
    return pairs


def dev_metric(ranker, dev: pl.DataFrame, qrels: pl.DataFrame, evaluation: Evaluation, runtime: JobRuntime,
               relevant_min: int = 1, progress: bool = False, desc: str = "dev") -> float:
    """The run's ``eval_metric`` (higher = better) of the ranker on the dev pairs: what model selection reads (and,
    on the test pairs, the diagnostic ``test_value``)."""
    return dev_metric_per_query(ranker, dev, qrels, evaluation, runtime, relevant_min, progress, desc)[0]


def dev_metric_per_query(ranker, dev: pl.DataFrame, qrels: pl.DataFrame, evaluation: Evaluation,
                         runtime: JobRuntime, relevant_min: int = 1, progress: bool = False, desc: str = "dev"
                         ) -> tuple[float, list[float]]:
    """The run's ``eval_metric`` on the dev pairs (:func:`dev_metric`) and, from the same scores, its value per dev
    query, in qid order: a diagnostic run's ``dev_query_values``, from which a selection made on fewer dev queries is
    replayed."""
    metric = evaluation.eval_metric
    pq = ranker_per_query(ranker, dev, qrels, [metric], batch_size=evaluation.score_batch_size,
                          device=runtime.device, precision=runtime.precision, relevant_min=relevant_min,
                          progress=progress, desc=desc)
    per_query = pq.filter(pl.col("measure") == metric).sort("qid")["value"].to_list()
    return measure_means(pq, [metric])[metric], per_query


def eval_pairs(data: Mapping[str, Any], evaluation: Evaluation, config_seed: int, relevant_min: int
               ) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The dev pairs model selection reads (:func:`dev_pairs`) and, with ``diagnostic_test``, every test candidate
    pair (else None); ValueError when either split has no candidates."""
    dev = dev_pairs(data, evaluation.dev_queries, config_seed, relevant_min)
    if dev.height == 0:
        raise ValueError("no dev candidates: model selection on dev needs a dev split with candidates")
    test = candidate_pairs(data, splits=("test",), relevant_min=relevant_min) if evaluation.diagnostic_test else None
    if test is not None and test.height == 0:
        raise ValueError("no test candidates: diagnostic_test scores the test split at every evaluation")
    return dev, test


def train_texts(queries: pl.DataFrame, docs: pl.DataFrame) -> tuple[dict[Any, str], list[str]]:
    """The context of each training query by qid (only training contexts are ever drawn) and every response's text
    by its code (the row of ``docs``)."""
    train_queries = queries.filter(pl.col("split") == "train")
    return dict(zip(train_queries["qid"].to_list(), train_queries["text"].to_list())), docs["text"].to_list()


@dataclass
class RankerSteps:
    """What one training step and one dev evaluation of :func:`train_ranker` are (steps 1-4 of the module's list):
    the ranker, the positive and negative samplers, the loss weights (``ease``, None without ``weighting``), the
    texts (:func:`train_texts`) and the evaluation pairs (:func:`eval_pairs`)."""

    spec: TrainSpec
    runtime: JobRuntime
    ranker: Ranker
    sampler: CurriculumSampler
    negs: NegativeSampler
    ease: PairEase | None
    context_of: dict[Any, str]
    doc_texts: list[str]
    dev: pl.DataFrame
    test: pl.DataFrame | None
    qrels: pl.DataFrame
    relevant_min: int

    def step_loss(self, step: int) -> torch.Tensor:
        """The loss of step ``step``: the batch's positives, ``m`` negatives each, the per-element loss of the
        (1 + m) pairs and its mean weighted by MacAvaney et al.'s W (eq. 3-4; unweighted without ``ease``)."""
        objective, negs, device = self.spec.objective, self.negs, self.runtime.device
        batch = self.sampler.batch(step)
        qids = batch["qid"].to_list()
        pos = np.array([negs.code_of[d] for d in batch["docid"].to_list()], dtype=np.int64)
        group = np.concatenate([pos[:, None], negs.sample(qids, step)], axis=1)  # (B, 1 + m)
        contexts = [self.context_of[q] for q in qids for _ in range(group.shape[1])]
        responses = [self.doc_texts[c] for c in group.reshape(-1)]
        logits = self.ranker.pair_logits(contexts, responses, device, self.runtime.precision)
        losses = element_losses(objective.loss, logits.view(group.shape), objective.margin)
        w = None
        if self.ease is not None:
            q = np.array([negs.q_of[x] for x in qids], dtype=np.int64)
            w = self.ease.weights(q, group, objective.loss, step, fallback=negs.last_fallback)
            w = to_device(torch.from_numpy(w), device)  # pinned, non-blocking on CUDA
        return weighted_mean(losses, w)

    def evaluate(self, done: int) -> dict[str, Any]:
        """The dev curve row after ``done`` steps: the dev metric (``value``), the curriculum's ``allowed`` prefix and
        negative space, and with ``diagnostic_test`` the test metric and each dev query's value."""
        evaluation, negs = self.spec.evaluation, self.negs
        value, per_query = dev_metric_per_query(self.ranker, self.dev, self.qrels, evaluation, self.runtime,
                                                self.relevant_min)
        row = {"metric": evaluation.eval_metric, "value": value, "allowed": self.sampler.allowed(done - 1),
               "negatives_k": negs.space(done - 1) if negs.mode in ("neighbors", "bm25") else 0}
        if self.test is not None:  # diagnostic only: recorded, never compared (fit reads "value")
            row["test_value"] = dev_metric(self.ranker, self.test, self.qrels, evaluation, self.runtime,
                                           self.relevant_min, desc="test")
            row["dev_query_values"] = per_query  # selection on fewer dev queries is replayed from them
        return row

    def log_fallbacks(self) -> None:
        """Log how often the samplers and the loss weights fell back (no candidate left, an unranked negative, a
        draw the false-negative guard could not check)."""
        negs, ease = self.negs, self.ease
        if negs.fallbacks:
            log.info("negatives: %d draw(s) fell back to the random pool (no candidate left)", negs.fallbacks)
        if ease is not None and ease.unlisted:
            log.info("weights: %d fallback negative(s) outside the difficulty table weighed as unranked (h = 0)",
                     ease.unlisted)
        if negs.guard_unchecked:
            log.info("negatives: %d draw(s) from past the stored neighbours could not be checked by the "
                     "false-negative guard (every stored neighbour of their query was above it)", negs.guard_unchecked)


def train_ranker(
    data: Mapping[str, Any],
    spec: TrainSpec,
    seed: int,
    *,
    curriculum_dir: str | Path,
    model_out: str | Path,
    checkpoint_dir: str | Path,
    weights: pl.DataFrame | None = None,
    neighbors: pl.DataFrame | str | Path | None = None,
    run: pl.DataFrame | str | Path | None = None,
    query_vectors: pl.DataFrame | str | Path | None = None,
    doc_vectors: pl.DataFrame | str | Path | None = None,
    relevant_min: int = 1,
    config_seed: int = 42,
    progress: bool = True,
    on_step=None,
    runtime: JobRuntime | None = None,
) -> pl.DataFrame:
    """Train one ranker; save the best-on-dev model to ``model_out``; return the dev curve (DEV_CURVE rows, or
    DEV_CURVE_TEST rows with ``diagnostic_test``).

    ``data`` holds the ingest frames (queries, docs, qrels, candidates); ``spec`` is a run's typed spec
    (:func:`curricula.experiments.specs.experiment_specs`); ``runtime`` the job's (:func:`curricula.models.runtime.
    start_job` of ``spec.runtime`` when not given). ``on_step(step)`` is called after every optimiser step (tests
    use it to simulate a killed job). With ``diagnostic_test`` every evaluation also scores all test candidates and
    records the ``eval_metric`` there as ``test_value``; the dev value alone selects and stops.
    """
    if runtime is None:
        runtime = start_job(spec.runtime, ranker_class(spec.ranker.ranker).transformer, "training")
    arm = spec.arm  # the curriculum's every length decided once, in steps (the budget may be longer)
    # patience counts only after min_steps: the grid's longest curriculum (experiment_runs sets it, so every arm
    # gets the same minimum budget), else once this arm's curriculum axes have ended (pacing and the loss weights)
    cfg = FitConfig.of(spec.fit, length=spec.fit.min_steps or arm.end)
    queries, docs = data["queries"], data["docs"]
    sampler = CurriculumSampler(Curriculum(curriculum_dir), arm.pacing, spec.objective.batch_size, seed)
    negs = NegativeSampler(arm.negatives, queries=queries, docs=docs, qrels=data["qrels"],
                           candidates=data["candidates"], relevant_min=relevant_min, neighbors=neighbors, run=run,
                           seed=seed, query_vectors=query_vectors, doc_vectors=doc_vectors)
    context_of, doc_texts = train_texts(queries, docs)
    ease = None
    if arm.weighting is not None:
        if weights is None:  # the same TypeError PairEase met on None, named
            raise TypeError(f"train_ranker: the arm weighs its loss by {arm.weighting.scoring!r}: pass that "
                            f"function's difficulty table as weights")
        ease = PairEase.from_weighting(weights, arm.weighting, negs.q_of, negs.code_of, len(doc_texts))
    dev, test = eval_pairs(data, spec.evaluation, config_seed, relevant_min)
    ranker = build_ranker(spec.ranker, seed).to(runtime.device)
    steps = RankerSteps(spec, runtime, ranker, sampler, negs, ease, context_of, doc_texts, dev, test, data["qrels"],
                        relevant_min)
    ckpt = Checkpointer(checkpoint_dir, spec_fingerprint(spec, seed), runtime.arithmetic)
    result = fit(ranker.module, steps.step_loss, cfg, seed=seed, evaluate=steps.evaluate, checkpoint=ckpt,
                 on_step=on_step, progress=progress, desc="train")
    ranker.save(model_out)
    steps.log_fallbacks()
    ckpt.clear()
    return curve_frame(result)


def curve_frame(result: FitResult) -> pl.DataFrame:
    """The DEV_CURVE rows of a fit (DEV_CURVE_TEST's when its evaluations recorded a diagnostic ``test_value``):
    one per evaluation, ``best`` marking the one whose weights were kept and ``stopped`` (last row only) saying
    whether the budget or early stopping ended training."""
    last = len(result.curve) - 1
    rows = [{**row, "best": row["step"] == result.best_step, "stopped": result.stopped if i == last else None}
            for i, row in enumerate(result.curve)]
    spec = dev_curve_spec(result.curve[0] if result.curve else ())
    return pl.DataFrame([tuple(row[c] for c in spec.columns) for row in rows], schema=spec.columns, orient="row")

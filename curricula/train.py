"""Curriculum training of a ranker (rule ``train``): one (experiment, seed) per job.

Each step (Su et al. 2021 Algorithm 1, with Penha's and MacAvaney's axes in the same loop):

1. draw ``batch_size`` positives uniformly from the curriculum prefix the pacing allows
   (:class:`curricula.curriculum.CurriculumSampler`: Penha §3 / HCL-CC);
2. draw ``m`` negatives per positive (:class:`curricula.negatives.NegativeSampler`: random, candidates, BM25, or
   HCL-IC from the dense neighbours with k = 10^h_p(t));
3. score the (1 + m) pairs of each positive with the ranker (:mod:`curricula.models`), take the per-element loss
   (:mod:`curricula.losses`), multiply by MacAvaney's weight W = D + (i/m)(1 - D) (eq. 3; :mod:`weighting`) and
   average (eq. 4);
4. every ``eval_every`` steps, score the dev candidates, compute the dev metric with ir-measures, and keep the best
   model (model selection on dev only: test data is never read here);
5. every ``checkpoint_every`` steps, save model, optimiser, scheduler, RNG state, the dev curve and the best model
   so far; a re-run of a killed job resumes from there and ends with the same weights as an uninterrupted run.

Batches and negatives of step t are pure functions of (seed, t), so a resumed run needs no sampler state beyond
the step number. Checkpoints are plain tensors and containers, loaded with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import torch

from curricula.curriculum import Curriculum, CurriculumSampler
from curricula.ingest import candidate_pairs, read_ingest
from curricula.losses import POINTWISE, element_losses, weighted_mean
from curricula.models import Ranker, build_ranker, score_pair_frame
from curricula.negatives import NegativeSampler
from curricula.tables import TableSpec, write_table, write_text_atomically

log = logging.getLogger(__name__)

DEV_CURVE = TableSpec(
    "dev_curve",
    {"step": pl.Int64, "metric": pl.String, "value": pl.Float64, "train_loss": pl.Float64,
     "allowed": pl.Int64, "negatives_k": pl.Int64},
    key=("step",),
)


# ----------------------------------------------------------------------------------------------- weights
class PairEase:
    """Ease D in [0, 1] (1 = easy) of training pairs from one function's difficulty table, for eq. 3 weights.

    Pointwise losses weigh each (q, d) by its own D_point = 1 - difficulty. Pairwise losses weigh (q, d+, d-) by
    MacAvaney's D_pair = (h(d+) - h(d-) + 1) / 2 (eq. 7/9/11) for the pair-level functions, whose raw value is
    the heuristic h; for query-level functions every pair of a query has the query's ease. Lookups are a binary
    search in a sorted key array: O(B log N) per batch.
    """

    def __init__(self, table: pl.DataFrame, scoring: str, q_of: Mapping[str, int], code_of: Mapping[str, int],
                 n_docs: int):
        from curricula.difficulty import MACAVANEY

        self.scoring = scoring
        self.pair_level = scoring in MACAVANEY
        q = np.array([q_of.get(x, -1) for x in table["qid"].to_list()], dtype=np.int64)
        d = np.array([code_of.get(x, -1) for x in table["docid"].to_list()], dtype=np.int64)
        keep = (q >= 0) & (d >= 0)
        keys = q[keep] * n_docs + d[keep]
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.n_docs = n_docs
        self.difficulty = table[scoring].to_numpy()[keep][order].astype(np.float64)
        self.raw = table[f"{scoring}_raw"].to_numpy()[keep][order].astype(np.float64)

    def _rows(self, q: np.ndarray, d: np.ndarray) -> np.ndarray:
        keys = q * self.n_docs + d
        rows = np.searchsorted(self.keys, keys)
        rows = np.minimum(rows, len(self.keys) - 1)
        if not np.all(self.keys[rows] == keys):
            raise KeyError(f"{int((self.keys[rows] != keys).sum())} trained pair(s) have no {self.scoring!r} "
                           "difficulty (negatives outside the difficulty table's training pairs)")
        return rows

    def ease(self, q: np.ndarray, docs: np.ndarray, loss: str) -> np.ndarray:
        """Ease per loss element: (B, 1 + m) for pointwise losses, (B, m) for pairwise ones.

        ``q`` is (B,) query codes, ``docs`` (B, 1 + m) doc codes with the positive in column 0.
        """
        width = docs.shape[1] if loss in POINTWISE else docs.shape[1] - 1
        if not self.pair_level:  # one value per query: the positive's row carries it
            return np.repeat(1.0 - self.difficulty[self._rows(q, docs[:, 0])][:, None], width, axis=1)
        rows = self._rows(np.repeat(q[:, None], docs.shape[1], axis=1), docs)
        if loss in POINTWISE:
            return 1.0 - self.difficulty[rows]
        from curricula.difficulty.macavaney import pairwise

        h = self.raw[rows]
        return np.asarray(pairwise(h[:, :1], h[:, 1:]), dtype=np.float64)


# ----------------------------------------------------------------------------------------------- helpers
def spec_fingerprint(spec: Mapping[str, Any], seed: int) -> str:
    """A hash of everything that determines the trained weights (runtime knobs excluded)."""
    from curricula.experiments import job_params

    blob = json.dumps({"spec": job_params(spec), "seed": seed}, sort_keys=True, default=str)
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


def evaluate_pairs(ranker: Ranker, pairs: pl.DataFrame, qrels: pl.DataFrame, spec: Mapping[str, Any],
                   device: torch.device, relevant_min: int, progress: bool = False) -> float:
    """The dev metric (ir-measures name, e.g. ``AP``) of the ranker's scores on ``pairs``."""
    from curricula.metrics import mean_metrics

    run = score_pair_frame(ranker, pairs, batch_size=spec["score_batch_size"], device=device,
                           precision=spec["precision"], progress=progress, desc="dev")
    rel = qrels.filter(pl.col("qid").is_in(pairs["qid"].unique().implode()))
    return mean_metrics(run, rel, [spec["eval_metric"]], relevant_min)[spec["eval_metric"]]


def make_optimizer(model, spec: Mapping[str, Any]):
    from transformers import get_linear_schedule_with_warmup

    cls = torch.optim.AdamW if spec["optimizer"] == "adamw" else torch.optim.Adam
    params = [p for p in model.parameters() if p.requires_grad]
    # the fused kernel (same update rule) is ~4x faster on CPU for ConvKNRM's 11.7M trainable embedding weights
    optim = cls(params, lr=spec["lr"], eps=spec["eps"], weight_decay=spec["weight_decay"], fused=True)
    sched = get_linear_schedule_with_warmup(optim, int(round(spec["warmup"] * spec["steps"])), spec["steps"])
    return optim, sched


def _save_atomic(obj: Any, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _state_dict_cpu(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}


class Checkpointer:
    """``checkpoint.pt`` in a folder: model, optimiser, scheduler, RNG state, dev curve and the best weights so far.

    The folder sits beside the job's outputs, not among them, so Snakemake does not delete it when a job dies.
    A checkpoint whose fingerprint differs from the job's (the experiment changed) is ignored and replaced.
    """

    def __init__(self, folder: str | Path, fingerprint: str):
        self.folder = Path(folder)
        self.fingerprint = fingerprint

    def save(self, step: int, model, optim, sched, curve: list[dict], best: dict, recent: list[float]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        state = {
            "fingerprint": self.fingerprint, "step": step, "model": _state_dict_cpu(model),
            "optimizer": optim.state_dict(), "scheduler": sched.state_dict(), "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "curve": curve, "best": best, "recent_losses": recent,
        }
        _save_atomic(state, self.folder / "checkpoint.pt")

    def load(self) -> dict | None:
        path = self.folder / "checkpoint.pt"
        if not path.exists():
            return None
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("fingerprint") != self.fingerprint:
            log.info("ignoring checkpoint %s: it belongs to another configuration", path)
            return None
        return state

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


# ----------------------------------------------------------------------------------------------- training
def train_ranker(
    data: Mapping[str, Any],
    spec: Mapping[str, Any],
    seed: int,
    *,
    curriculum_dir: str | Path,
    model_out: str | Path,
    checkpoint_dir: str | Path,
    weights: pl.DataFrame | None = None,
    neighbors: pl.DataFrame | None = None,
    run: pl.DataFrame | None = None,
    relevant_min: int = 1,
    config_seed: int = 42,
    progress: bool = True,
    on_step=None,
) -> pl.DataFrame:
    """Train one ranker; save the best-on-dev model to ``model_out``; return the dev curve (DEV_CURVE rows).

    ``data`` holds the ingest frames (queries, docs, qrels, candidates); ``spec`` is a resolved experiment spec
    (:func:`curricula.experiments.experiment_specs`). ``on_step(step)`` is called after every optimiser step
    (tests use it to simulate a killed job).
    """
    from tqdm.auto import tqdm

    from curricula.hf import select_device, set_threads
    from curricula.weighting import curriculum_weight, iteration_of

    t_start = time.time()
    set_threads(spec.get("threads"))
    device = select_device(spec.get("device", "auto"))
    steps = int(spec["steps"])
    queries, docs = data["queries"], data["docs"]
    sampler = CurriculumSampler(Curriculum(curriculum_dir), spec["pacing"], steps, spec["batch_size"], seed)
    negs = NegativeSampler(spec["negatives"], queries=queries, docs=docs, qrels=data["qrels"],
                           candidates=data["candidates"], relevant_min=relevant_min, neighbors=neighbors, run=run,
                           total_steps=steps, seed=seed)
    context_of = dict(zip(queries["qid"].to_list(), queries["text"].to_list()))
    doc_texts = docs["text"].to_list()
    weighting = spec.get("weighting")
    ease = None
    if weighting:
        from curricula.experiments import weight_m

        ease = PairEase(weights, weighting["scoring"], negs.q_of, negs.code_of, len(doc_texts))
        m_iter, anti, it_steps = weight_m(weighting), bool(weighting.get("anti", False)), \
            int(weighting.get("iteration_steps", 32))
    dev = dev_pairs(data, spec["dev_queries"], config_seed, relevant_min)
    if dev.height == 0:
        raise ValueError("no dev candidates: model selection on dev needs a dev split with candidates")

    ranker = build_ranker(spec, seed).to(device)
    model = ranker.module
    optim, sched = make_optimizer(model, spec)
    torch.manual_seed(seed)
    ckpt = Checkpointer(checkpoint_dir, spec_fingerprint(spec, seed))
    curve: list[dict] = []
    best: dict = {"step": -1, "value": -math.inf}
    recent: list[float] = []  # training losses since the last dev evaluation
    start = 0
    state = ckpt.load()
    if state is not None:
        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        curve, best, start = list(state["curve"]), dict(state["best"]), int(state["step"])
        recent = list(state["recent_losses"])
        log.info("resuming from the checkpoint at step %d of %d (best dev %s %.4f at step %d)", start, steps,
                 spec["eval_metric"], best["value"], best["step"])

    model.train()
    bar = tqdm(range(start, steps), total=steps, initial=start, desc="train", disable=not progress, unit="step")
    for step in bar:
        batch = sampler.batch(step)
        qids = batch["qid"].to_list()
        pos = np.array([negs.code_of[d] for d in batch["docid"].to_list()], dtype=np.int64)
        group = np.concatenate([pos[:, None], negs.sample(qids, step)], axis=1)  # (B, 1 + m)
        contexts = [context_of[q] for q in qids for _ in range(group.shape[1])]
        responses = [doc_texts[c] for c in group.reshape(-1)]
        logits = ranker.pair_logits(contexts, responses, device, spec["precision"])
        losses = element_losses(spec["loss"], logits.view(group.shape), spec["margin"])
        w = None
        if ease is not None:
            q = np.array([negs.q_of[x] for x in qids], dtype=np.int64)
            d = ease.ease(q, group, spec["loss"])
            if anti:
                d = 1.0 - d
            w = torch.from_numpy(curriculum_weight(d, iteration_of(step, it_steps), m_iter)).to(device)
        loss = weighted_mean(losses, w)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        optim.step()
        sched.step()
        recent.append(float(loss.detach()))
        done = step + 1
        if done % spec["eval_every"] == 0 or done == steps:
            value = evaluate_pairs(ranker, dev, data["qrels"], spec, device, relevant_min)
            curve.append({"step": done, "metric": spec["eval_metric"], "value": value,
                          "train_loss": float(np.mean(recent)) if recent else math.nan,
                          "allowed": sampler.allowed(step),
                          "negatives_k": negs.space(step) if negs.mode in ("neighbors", "bm25") else 0})
            recent = []
            bar.set_postfix({spec["eval_metric"]: f"{value:.4f}"})
            log.info("step %d/%d: dev %s %.4f, train loss %.4f, allowed %d/%d, %.1f s", done, steps,
                     spec["eval_metric"], value, curve[-1]["train_loss"], curve[-1]["allowed"],
                     len(sampler.curriculum), time.time() - t_start)
            if value > best["value"]:
                best = {"step": done, "value": value, "state": _state_dict_cpu(model)}
        if done % spec["checkpoint_every"] == 0 and done < steps:
            ckpt.save(done, model, optim, sched, curve, best, recent)
        if on_step is not None:
            on_step(done)
    bar.close()
    if "state" in best:
        model.load_state_dict(best["state"])
    ranker.save(model_out)
    if negs.fallbacks:
        log.info("negatives: %d draw(s) fell back to the random pool (no candidate left)", negs.fallbacks)
    log.info("best dev %s %.4f at step %d of %d; %.1f s", spec["eval_metric"], best["value"], best["step"], steps,
             time.time() - t_start)
    ckpt.clear()
    return pl.DataFrame(curve, schema=DEV_CURVE.columns, orient="row")


def train_stage(inputs: Mapping[str, str | Path], outputs: Mapping[str, str | Path], spec: Mapping[str, Any],
                seed: int, *, relevant_min: int = 1, config_seed: int = 42) -> pl.DataFrame:
    """Rule ``train``: read the inputs one experiment needs, train, write model/, dev_curve.parquet, config.json.

    ``inputs``: queries, docs, qrels, candidates, curriculum (folder) and, when the spec needs them, weights
    (the weighting function's difficulty table), neighbors, run. The checkpoint folder is ``<model>.checkpoint``.
    """
    from curricula.difficulty import difficulty_spec
    from curricula.tables import NEIGHBORS, RUN, read_table

    data = read_ingest(inputs)
    names = set(inputs.keys())  # a Snakemake Namedlist's `in` looks at values, not names
    extra = {}
    if spec.get("weighting"):
        extra["weights"] = read_table(inputs["weights"], difficulty_spec([spec["weighting"]["scoring"]]))
    if "neighbors" in names:
        extra["neighbors"] = read_table(inputs["neighbors"], NEIGHBORS)
    if "run" in names:
        extra["run"] = read_table(inputs["run"], RUN)
    model_out = Path(outputs["model"])
    curve = train_ranker(data, spec, seed, curriculum_dir=inputs["curriculum"], model_out=model_out,
                         checkpoint_dir=model_out.with_name(model_out.name + ".checkpoint"),
                         relevant_min=relevant_min, config_seed=config_seed, **extra)
    write_table(curve, outputs["dev_curve"], DEV_CURVE)
    write_text_atomically(outputs["config"],
                          json.dumps({"seed": seed, "spec": dict(spec)}, indent=2, sort_keys=True, default=str) + "\n")
    return curve

"""The computations the GPU smoke check compares (:mod:`curricula.smoke.gpu`), each a function of the device and the
sizes only, so the CPU reference and the GPU run compute exactly the same thing.

The inputs are made here, not read: pairs of 3-12 words drawn with numpy's PCG64 (stable across machines and
versions) from a fixed word list, labels alternating 1, 0; every ranker is built untrained from one seed with one
transformer layer of the packaged MiniLM (the cross-encoder) or its embeddings (the others).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

#: every ranker the pipeline trains
RANKERS = ("cross_encoder", "convknrm", "cnn_qa", "lstm_qa")
SEED, BATCH = 13, 8
WORDS = ("the a to of and in is it you that he was for on are with as his they be at one have this from or had by "
         "word but what some we can out other were all there when up use your how said an each she which do their "
         "time if will way about many then them write would like so these her long make thing see him two has look "
         "more day could go come did number sound no most people my over know water than call first who may down "
         "side been now find rain paris weather fine thanks tomorrow friend sunny hello").split()
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Sizes:
    """How much a smoke run computes: ``pairs`` scored per ranker, ``steps`` trained (the first ``compared_steps``
    compared), the kill at ``resume_at``, ``texts`` encoded (the first half also search as queries), ``k``
    neighbours."""

    pairs: int = 1024
    steps: int = 50
    compared_steps: int = 10
    resume_at: int = 10
    texts: int = 32
    k: int = 5


def smoke_texts(n: int, seed: int = SEED) -> list[str]:
    """``n`` texts of 3-12 words from :data:`WORDS` (the same on every machine)."""
    rng = np.random.default_rng(seed)
    return [" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), rng.integers(3, 13))) for _ in range(n)]


def smoke_pairs(n: int) -> tuple[list[str], list[str], np.ndarray]:
    """(contexts, responses, labels) of ``n`` pairs; labels alternate 1, 0 (float32)."""
    texts = smoke_texts(2 * n)
    return texts[:n], texts[n:], (np.arange(n) % 2 == 0).astype(np.float32)


def build(name: str, device: torch.device):
    """The untrained ranker ``name`` (one seed, one layer / the packaged embeddings), on ``device``."""
    from curricula.models import build_ranker

    spec = {"ranker": name, "model": "minilm", "layers": 1, "max_length": 32, "architecture": {}}
    return build_ranker(spec, SEED).to(device)


def ranker_logits(name: str, device: torch.device, sizes: Sizes, precision: str) -> np.ndarray:
    """Logits of the untrained ranker on the ``sizes.pairs`` pairs (float32, input order)."""
    from curricula.models.base import score_pairs

    contexts, responses, _ = smoke_pairs(sizes.pairs)
    return score_pairs(build(name, device), contexts, responses, batch_size=64, device=device, precision=precision,
                       progress=False)


def train_losses(name: str, device: torch.device, sizes: Sizes, checkpoint=None, on_step=None):
    """(per-step losses, ranker) of ``sizes.steps`` fp32 steps of pointwise cross-entropy on batches of 8 pairs in
    a fixed order, through the pipeline's :func:`~curricula.training.core.fit` (Adam at the ranker's default rate
    and schedule)."""
    from curricula.models import DEFAULT_LR, DEFAULT_SCHEDULE
    from curricula.training.core import FitConfig, fit
    from curricula.training.losses import binary_ce

    ranker = build(name, device)
    contexts, responses, labels = smoke_pairs(sizes.pairs)
    labels_t = torch.from_numpy(labels)

    def step_loss(step: int) -> torch.Tensor:
        idx = [(step * BATCH + i) % sizes.pairs for i in range(BATCH)]
        logits = ranker.pair_logits([contexts[i] for i in idx], [responses[i] for i in idx], device, "fp32")
        return binary_ce(logits, labels_t[idx].to(device)).mean()

    cfg = FitConfig(steps=sizes.steps, lr=DEFAULT_LR[name], optimizer="adam", schedule=DEFAULT_SCHEDULE[name],
                    checkpoint_every=sizes.resume_at if checkpoint is not None else 0, fused=True)
    result = fit(ranker.module, step_loss, cfg, seed=SEED, checkpoint=checkpoint, on_step=on_step, progress=False)
    return [float(x) for x in result.losses], ranker


class Killed(Exception):
    """Raised after a step to stop a training run as a kill would (after its checkpoint was written)."""


def kill_and_resume(name: str, device: torch.device, sizes: Sizes, folder: Path) -> float:
    """Max |weight difference| between a run killed at ``sizes.resume_at`` and resumed from its checkpoint, and an
    uninterrupted run."""
    from curricula.training.checkpoints import Checkpointer

    def kill(done: int) -> None:
        if done == sizes.resume_at:
            raise Killed

    checkpoint = Checkpointer(folder, f"smoke-{name}")
    try:
        train_losses(name, device, sizes, checkpoint=checkpoint, on_step=kill)
    except Killed:
        pass
    resumed = train_losses(name, device, sizes, checkpoint=checkpoint)[1].module.state_dict()
    whole = train_losses(name, device, sizes)[1].module.state_dict()
    return max(float((resumed[k].float() - whole[k].float()).abs().max()) for k in whole)


def mc_dropout_repeats(name: str, device: torch.device, sizes: Sizes) -> float:
    """Max |difference| between two MC-dropout runs (4 passes) of one ranker with one seed."""
    from curricula.models.base import mc_dropout_probabilities

    ranker = build(name, device)
    contexts, responses, _ = smoke_pairs(min(sizes.pairs, 256))
    runs = []
    for _ in range(2):
        torch.manual_seed(SEED)
        runs.append(mc_dropout_probabilities(ranker, contexts, responses, passes=4, batch_size=64, device=device,
                                             precision="fp32", progress=False))
    return float(np.max(np.abs(runs[0] - runs[1])))


def dense_vectors(device: torch.device, sizes: Sizes) -> np.ndarray:
    """fp32 vectors of ``sizes.texts`` texts by one MiniLM layer (the pipeline's :func:`encode`)."""
    from curricula.retrieval.dense import encode
    from curricula.retrieval.similarity import vectors_to_numpy

    texts = smoke_texts(sizes.texts, seed=SEED + 1)
    frame = encode(texts, [f"t{i}" for i in range(len(texts))], "minilm", layers=1, max_length=32, device=str(device),
                   precision="fp32", progress=False)
    return vectors_to_numpy(frame)


def neighbour_ids(vectors: np.ndarray, sizes: Sizes) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, scores) of the exact top-``k`` of the first half of ``vectors`` among all of them
    (:func:`~curricula.retrieval.dense.neighbors`, this environment's FAISS)."""
    import polars as pl

    from curricula.retrieval.dense import neighbors

    def frame(rows: np.ndarray) -> pl.DataFrame:
        return pl.DataFrame({"id": [f"{i:04d}" for i in range(len(rows))], "vector": rows.astype(np.float32)})

    nb = neighbors(frame(vectors[: len(vectors) // 2]), frame(vectors), sizes.k, progress=False)
    ids = nb["docid"].cast(pl.Int64).to_numpy().reshape(-1, sizes.k)
    return ids, nb["score"].to_numpy().reshape(-1, sizes.k)


def ids_equal_but_ties(ids: np.ndarray, ref_ids: np.ndarray, ref_scores: np.ndarray, atol: float = 1e-6) -> bool:
    """Whether two neighbour lists agree wherever the reference's scores do not tie (a position whose score equals
    a neighbouring position's within ``atol`` may hold either id)."""
    tie = np.zeros(ref_scores.shape, dtype=bool)
    close = np.isclose(ref_scores[:, 1:], ref_scores[:, :-1], rtol=0, atol=atol)
    tie[:, 1:] |= close
    tie[:, :-1] |= close
    return bool(((ids == ref_ids) | tie).all())


def workstation_gpu_jobs() -> tuple[int, list[tuple[str, int]]]:
    """(the ``gpu`` each GPU-capable job should ask: 1 where this machine shows a card, else 0; the (rule, gpu) of
    every such job) from a dry run of the default grid at tiny size through profiles/workstation."""
    from curricula.pipeline.devices import GPU_RULES
    from curricula.plumbing.gpus import visible_gpu_count

    config = {"dataset": {"name": "smoke", "format": "chitchat",
                          "options": {"max_instances": {"train": 40, "dev": 10, "test": 10}}}}
    prefix = "job-resources: "
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "smoke.yaml").write_text(json.dumps(config))
        plugins = REPO / "tests" / "snakemake_plugins"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(plugins), os.environ.get("PYTHONPATH")]))}
        out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-s", str(REPO / "Snakefile"), "--directory",
                              tmp, "--profile", str(REPO / "profiles" / "workstation"), "--logger=job-stats",
                              "--configfile", str(Path(tmp) / "smoke.yaml")],
                             capture_output=True, text=True, env=env, timeout=300)
    if out.returncode:
        raise RuntimeError(f"the dry run failed: {out.stderr.strip().splitlines()[-1]}")
    jobs = [json.loads(line.removeprefix(prefix)) for line in out.stdout.splitlines() if line.startswith(prefix)]
    return (1 if visible_gpu_count() else 0), [(job["rule"], job["resources"].get("gpu", 0)) for job in jobs
                                               if job["rule"] in GPU_RULES]

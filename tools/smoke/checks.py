"""The computations the GPU smoke check compares (:mod:`tools.smoke.gpu`), each a function of the device and the
sizes only, so the CPU reference and the GPU run compute exactly the same thing; the comparisons themselves are
:mod:`tools.smoke.verdicts`.

The inputs are made here, not read: pairs of 3-12 words drawn with numpy's PCG64 (stable across machines and
versions) from a fixed word list, labels alternating 1, 0. The models (:func:`build`) are chosen so that a comparison
can only pass when the device computes what the CPU does:

* every ranker is built from one seed on the CPU, then moved: the cross-encoder on one layer of the packaged MiniLM
  with mean pooling (a ``[CLS]`` head on a 1-layer cut reads a near-constant state: logits spanning 4e-4, where
  any rounding decides their order); the others on its word-piece embeddings;
* the output layer of the cross-encoder, cnn_qa and lstm_qa is re-drawn from N(0, 0.2^2) with a CPU generator
  (:data:`HEAD_STD`), so the logits spread (measured at the default sizes: the cross-encoder's over -2.0..1.2
  instead of -0.2..0.1) and the loss leaves ln 2 within the compared steps;
* dropout is off (every ``torch.nn.Dropout``'s ``p`` set to 0, the module left in train mode, so training runs the
  pipeline's step: forward, backward and fused Adam) wherever a device's values meet the CPU's, since CUDA draws
  other masks than the CPU; on for MC dropout and for the cross-encoder's kill and resume, which compare the
  device with itself, so that the masks after a resume are the restored random state's;
* training is :func:`~curricula.training.core.fit` with Adam at the ranker's default rate
  (:data:`curricula.models.DEFAULT_LR`) and a constant schedule (the linear schedule's warm-up starts at rate 0 and
  would leave the compared first steps almost untrained).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: every ranker the pipeline trains
RANKERS = ("cross_encoder", "convknrm", "cnn_qa", "lstm_qa")
SEED, BATCH = 13, 8
#: std of the re-drawn output layer (None: as built; ConvKNRM's logits spread and its loss moves as built)
HEAD_STD: dict[str, float | None] = {"cross_encoder": 0.2, "convknrm": None, "cnn_qa": 0.2, "lstm_qa": 0.2}
#: the rankers whose MC-dropout passes are checked, and the passes per run
MC_RANKERS, MC_PASSES = ("cnn_qa", "cross_encoder"), 4
#: the rankers killed and resumed
RESUME_RANKERS = ("convknrm", "cross_encoder")
WORDS = ("the a to of and in is it you that he was for on are with as his they be at one have this from or had by "
         "word but what some we can out other were all there when up use your how said an each she which do their "
         "time if will way about many then them write would like so these her long make thing see him two has look "
         "more day could go come did number sound no most people my over know water than call first who may down "
         "side been now find rain paris weather fine thanks tomorrow friend sunny hello").split()
REPO = Path(__file__).resolve().parents[2]

Weights = dict[str, np.ndarray]


@dataclass(frozen=True)
class Sizes:
    """How much a smoke run computes: ``pairs`` scored per ranker (the first ``min(pairs, 256)`` in MC dropout),
    ``steps`` trained (the first ``compared_steps`` compared with the CPU), the kill at ``resume_at``, ``texts``
    encoded (the first half also search as queries), ``k`` neighbours compared."""

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


def output_layer(ranker: Any) -> torch.nn.Linear:
    """The linear layer that writes a ranker's logit(s): the cross-encoder's head (its
    :class:`~curricula.models.heads.MeanPooledCrossEncoder`), ConvKNRM's last combination layer, the QA networks'
    two-class output."""
    module = ranker.module
    if ranker.name == "cross_encoder":
        return module.head
    if ranker.name == "convknrm":
        return module.combine[-1] if isinstance(module.combine, torch.nn.Sequential) else module.combine
    return module.head.out


def build(name: str, device: torch.device, dropout: bool = False) -> Any:
    """The smoke model of ranker ``name`` on ``device``: built on the CPU from :data:`SEED` (one MiniLM layer, mean
    pooling for the cross-encoder), its output layer re-drawn with :data:`HEAD_STD`, every dropout rate set to 0
    unless ``dropout``."""
    from curricula.experiments.spec import freeze
    from curricula.models import build_ranker, resolve_architecture
    from curricula.training.spec import RankerSpec

    spec = RankerSpec(ranker=name, model="minilm", layers=1, max_length=32,
                      pooling="mean" if name == "cross_encoder" else None,
                      architecture=freeze(resolve_architecture(name, {})))
    ranker = build_ranker(spec, SEED)
    if HEAD_STD[name] is not None:
        layer = output_layer(ranker)
        draw = torch.Generator().manual_seed(SEED)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=draw) * HEAD_STD[name])
    if not dropout:
        for module in ranker.module.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
    return ranker.to(device)


def ranker_logits(name: str, device: torch.device, sizes: Sizes, precision: str) -> np.ndarray:
    """Logits of the smoke model (dropout off) on the ``sizes.pairs`` pairs (float32, input order)."""
    from curricula.models.base import score_pairs

    contexts, responses, _ = smoke_pairs(sizes.pairs)
    return score_pairs(build(name, device), contexts, responses, batch_size=64, device=device, precision=precision,
                       progress=False)


def _step_loss(ranker: Any, device: torch.device, sizes: Sizes) -> Callable[[int], torch.Tensor]:
    """The pointwise cross-entropy (nats, fp32) of step ``step``'s batch: pairs ``step * 8`` to ``step * 8 + 7``
    (modulo ``sizes.pairs``)."""
    from curricula.training.losses import binary_ce

    contexts, responses, labels = smoke_pairs(sizes.pairs)
    labels_t = torch.from_numpy(labels)

    def step_loss(step: int) -> torch.Tensor:
        idx = [(step * BATCH + i) % sizes.pairs for i in range(BATCH)]
        logits = ranker.pair_logits([contexts[i] for i in idx], [responses[i] for i in idx], device, "fp32")
        return binary_ce(logits, labels_t[idx].to(device)).mean()

    return step_loss


def train_losses(name: str, device: torch.device, sizes: Sizes, checkpoint: Any = None,
                 on_step: Callable[[int], None] | None = None, dropout: bool = False) -> tuple[list[float], Any, int]:
    """(per-step losses in nats, the ranker, the steps this call ran) of ``sizes.steps`` fp32 steps of the smoke
    model through the pipeline's :func:`~curricula.training.core.fit`: fused Adam at the ranker's default rate,
    constant schedule, a checkpoint every ``sizes.resume_at`` steps when ``checkpoint`` is given."""
    from curricula.models import DEFAULT_LR
    from curricula.training.core import FitConfig, fit

    ranker = build(name, device, dropout)
    loss_of = _step_loss(ranker, device, sizes)
    ran = [0]

    def counted(step: int) -> torch.Tensor:
        ran[0] += 1
        return loss_of(step)

    cfg = FitConfig(steps=sizes.steps, lr=DEFAULT_LR[name], optimizer="adam", schedule="constant",
                    checkpoint_every=sizes.resume_at if checkpoint is not None else 0, fused=True)
    result = fit(ranker.module, counted, cfg, seed=SEED, checkpoint=checkpoint, on_step=on_step, progress=False)
    return [float(x) for x in result.losses], ranker, ran[0]


@torch.no_grad()
def untrained_losses(name: str, device: torch.device, sizes: Sizes) -> np.ndarray:
    """The losses (nats) of the first ``sizes.compared_steps`` batches under the initial weights, as :func:`fit`
    would report them if no update ever changed a weight: what a device with a broken backward or optimiser gives."""
    ranker = build(name, device)
    ranker.module.train()
    loss_of = _step_loss(ranker, device, sizes)
    return np.asarray([float(loss_of(step)) for step in range(sizes.compared_steps)], dtype=np.float64)


class Killed(Exception):
    """Raised after a step to stop a training run as a kill would (after its checkpoint was written)."""


def weights(ranker: Any) -> Weights:
    """The ranker's state dict as fp32 host arrays."""
    return {key: value.detach().float().cpu().numpy() for key, value in ranker.module.state_dict().items()}


def kill_and_resume(name: str, device: torch.device, sizes: Sizes, folder: Path,
                    dropout: bool = False) -> tuple[Weights, Weights, int]:
    """(weights of a run killed after step ``sizes.resume_at`` and resumed from its checkpoint, weights of an
    uninterrupted run, the steps the resumed run computed: ``sizes.steps - sizes.resume_at`` when it resumed)."""
    from curricula.training.checkpoints import Checkpointer
    from curricula.training.determinism import arithmetic

    def kill(done: int) -> None:
        if done == sizes.resume_at:
            raise Killed

    checkpoint = Checkpointer(folder, f"smoke-{name}", arithmetic(device, None))
    try:
        train_losses(name, device, sizes, checkpoint=checkpoint, on_step=kill, dropout=dropout)
    except Killed:
        pass
    _, resumed, ran = train_losses(name, device, sizes, checkpoint=checkpoint, dropout=dropout)
    whole = train_losses(name, device, sizes, dropout=dropout)[1]
    return weights(resumed), weights(whole), ran


def mc_dropout_runs(name: str, device: torch.device, sizes: Sizes) -> np.ndarray:
    """(2 runs, :data:`MC_PASSES` passes, pairs) MC-dropout probabilities of the smoke model with its dropout on,
    each run after ``torch.manual_seed(SEED)`` (fp32, the first ``min(sizes.pairs, 256)`` pairs)."""
    from curricula.models.base import mc_dropout_probabilities

    ranker = build(name, device, dropout=True)
    contexts, responses, _ = smoke_pairs(min(sizes.pairs, 256))
    runs = []
    for _ in range(2):
        torch.manual_seed(SEED)
        runs.append(mc_dropout_probabilities(ranker, contexts, responses, passes=MC_PASSES, batch_size=64,
                                             device=device, precision="fp32", progress=False))
    return np.stack(runs)


def dense_vectors(device: torch.device, sizes: Sizes) -> np.ndarray:
    """fp32 vectors of ``sizes.texts`` texts by one MiniLM layer (the pipeline's :func:`encode`)."""
    from curricula.retrieval.dense import encode
    from curricula.retrieval.similarity import vectors_to_numpy

    texts = smoke_texts(sizes.texts, seed=SEED + 1)
    frame = encode(texts, [f"t{i}" for i in range(len(texts))], "minilm", layers=1, max_length=32, device=str(device),
                   precision="fp32", progress=False)
    return vectors_to_numpy(frame)


def faiss_build(device: torch.device) -> str:
    """Which FAISS this environment has and where :func:`neighbour_ids` searches on ``device``: a GPU build that sees
    a card (the CUDA 12 environment's faiss-gpu, :func:`curricula.retrieval.gpu_search.faiss_has_gpu`) on a CUDA
    device searches on the card, anything else on the CPU."""
    import faiss

    from curricula.retrieval.gpu_search import faiss_has_gpu

    gpu_build = hasattr(faiss, "StandardGpuResources")
    on_card = faiss_has_gpu(faiss) and device.type == "cuda"
    build = f"faiss {getattr(faiss, '__version__', '?')}, " + (
        f"GPU build seeing {int(faiss.get_num_gpus())} card(s)" if gpu_build else "CPU build (faiss-cpu)")
    return build + (f": searched on {device}" if on_card else ": searched on the CPU")


def neighbour_ids(vectors: np.ndarray, sizes: Sizes, device: torch.device | None = None,
                  width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(row indices, scores) of the exact top-``width`` (default ``sizes.k + 1``: one more than compared, so a
    tie across the k-th place is seen) of the first half of ``vectors`` among all of them, through
    :func:`~curricula.retrieval.dense.neighbors` on the job's ``device`` (on a GPU where this environment's FAISS is a
    GPU build, :func:`faiss_build`)."""
    import polars as pl

    from curricula.retrieval.dense import neighbors

    width = width or sizes.k + 1

    def frame(rows: np.ndarray) -> pl.DataFrame:
        return pl.DataFrame({"id": [f"{i:04d}" for i in range(len(rows))], "vector": rows.astype(np.float32)})

    nb = neighbors(frame(vectors[: len(vectors) // 2]), frame(vectors), width, progress=False,
                   device="cpu" if device is None else str(device))
    ids = nb["docid"].cast(pl.Int64).to_numpy().reshape(-1, width)
    return ids, nb["score"].to_numpy().reshape(-1, width)


def workstation_gpu_jobs() -> tuple[int, list[tuple[str, int]]]:
    """(the ``gpu`` each GPU-capable job should ask: 1 where this machine shows a card, else 0; the (rule, gpu) of
    every such job) from a dry run of the default grid at tiny size through profiles/workstation. The neighbour
    search is left out where the default environment runs it on the CPU (CUDA 13: faiss-cpu)."""
    from curricula.pipeline.devices import GPU_RULES
    from curricula.plumbing.gpus import visible_gpu_count
    from curricula.retrieval.gpu_search import neighbors_device

    on_cpu = {"dense_neighbors_shard"} if neighbors_device({"dense": {"device": "auto"}}) == "cpu" else set()

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
                                               if job["rule"] in set(GPU_RULES) - on_cpu]

"""Benchmark: ConvKNRM's training step and dev evaluation, this checkout's code against another commit's (``--base``,
default ``HEAD``: today's committed code), side by side in one process on the same thread.

The other commit's ``curricula`` package is unpacked (``git archive``) under the name ``curricula_base`` and imported
beside this checkout's. Both build the default config's baseline ConvKNRM (config.yaml, frozen embeddings unless
``--trainable``) with the same seed, and the base model loads the new one's weights, so both start from the same
numbers. The training batches are built once, up front, with this checkout's samplers and ``encode``/``collate``
(the default run's batches: 16 contexts x (1 + 1) responses from a scratch run's ``random`` curriculum, ``--root``),
so both variants time the same work: forward, loss, backward, fused AdamW step. The dev evaluation is each
package's own ``score_pair_frame`` on all dev pairs (``--dev-queries`` to cut), as the training loop calls it.

Rounds alternate which variant goes first; each round restarts both from the same weights and optimiser state. The
figure per variant is the median over rounds of the thread's CPU time (``time.thread_time``: robust to other
processes on the machine) and of the wall time. Agreement is printed as well: the largest difference between the
two variants' losses along the steps and between their dev scores (0 when the arithmetic is the same to the bit).

    .venv/bin/python bench/bench_convknrm.py --root <run> [--base HEAD] [--steps 100] [--rounds 3] [--threads 1]

``--kernels compiled`` runs this checkout's variant with the compiled C passes (``architecture.compiled: true``: the
window vectors, the kernel sums and K-NRM eq. 4, curricula/models/compiled.py) against ``--base``.
``--compiled`` compares this checkout with itself instead: the compiled passes against torch's operations, the rest
as above.

``<run>`` is a scratch folder holding ``results/chitchat`` of the default config up to its ``random`` curriculum
(``snakemake --cores 1 --directory <run> --snakefile Snakefile --configfile config.yaml --
results/chitchat/curricula/random``).
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from curricula.curriculum.negatives import NegativeSampler  # noqa: E402
from curricula.curriculum.ordering import Curriculum, CurriculumSampler  # noqa: E402
from curricula.data.ingest import read_ingest  # noqa: E402
from curricula.experiments.spec import parse_train_spec, spec_params  # noqa: E402
from curricula.experiments.specs import experiment_specs  # noqa: E402
from curricula.experiments.train import dev_pairs  # noqa: E402
from curricula.plumbing.config import load_config  # noqa: E402

BASE = "curricula_base"


def import_base(ref: str, into: Path) -> ModuleType:
    """The ``curricula`` package of commit ``ref``, unpacked into ``into`` and imported as ``curricula_base`` (every
    reference to ``curricula.`` in its sources renamed, so that it never imports this checkout's modules)."""
    blob = subprocess.run(["git", "-C", str(REPO), "archive", ref, "curricula"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    (into / "curricula").rename(into / BASE)
    pattern = re.compile(r"\bcurricula(?=[.\s])")
    for path in (into / BASE).rglob("*.py"):
        path.write_text(pattern.sub(BASE, path.read_text()))
    sys.path.insert(0, str(into))
    return importlib.import_module(BASE)


def default_params(trainable: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The baseline run's params (config.yaml), on the CPU, with the embeddings frozen unless ``trainable``, without
    the arithmetic version (each package's parser sets its own)."""
    config = load_config(REPO / "config.yaml")
    spec = experiment_specs(config)["baseline"]
    params = {**spec_params(spec), "device": "cpu",
              "architecture": {**spec.ranker.arch(), "freeze_embeddings": not trainable}}
    params.pop("arithmetic", None)  # each package's parser fills in its own arithmetic version
    return params, config


def compiled_params(params: dict[str, Any], compiled: bool) -> dict[str, Any]:
    """``params`` with ConvKNRM's compiled passes (``compiled: true``: window vectors, kernel sums, eq. 4) on, or as
    they are."""
    if not compiled:
        return params
    return {**params, "architecture": {**params["architecture"], "compiled": True}}


def training_batches(root: Path, params: dict[str, Any], steps: int, seed: int, encoder: Any) -> list[tuple]:
    """``steps`` collated training batches of the default run (``random`` curriculum, the arm's negatives) and
    each one's group shape (contexts, 1 + negatives)."""
    spec = parse_train_spec(params)
    base = root / "results" / "chitchat"
    data = read_ingest({n: base / "data" / f"{n}.parquet" for n in ("queries", "docs", "qrels", "candidates")})
    sampler = CurriculumSampler(Curriculum(base / "curricula" / "random"), spec.arm.pacing,
                                spec.objective.batch_size, seed)
    negs = NegativeSampler(spec.arm.negatives, queries=data["queries"], docs=data["docs"], qrels=data["qrels"],
                           candidates=data["candidates"], seed=seed)
    context_of = dict(zip(data["queries"]["qid"].to_list(), data["queries"]["text"].to_list()))
    doc_texts = data["docs"]["text"].to_list()
    out = []
    for step in range(steps):
        batch = sampler.batch(step)
        qids = batch["qid"].to_list()
        pos = np.array([negs.code_of[d] for d in batch["docid"].to_list()], dtype=np.int64)
        group = np.concatenate([pos[:, None], negs.sample(qids, step)], axis=1)
        contexts = [context_of[q] for q in qids for _ in range(group.shape[1])]
        responses = [doc_texts[c] for c in group.reshape(-1)]
        out.append((encoder.collate(encoder.encode(contexts, responses)), group.shape))
    return out, data


class Variant:
    """One package's ranker, optimiser and loss, restartable from a saved state."""

    def __init__(self, name: str, pkg: str, params: dict[str, Any], seed: int):
        self.name = name
        self.mod = {m: importlib.import_module(f"{pkg}.{m}") for m in
                    ("models", "experiments.spec", "training.core", "training.losses", "models.runtime")}
        self.spec = self.mod["experiments.spec"].parse_train_spec(params)
        self.ranker = self.mod["models"].build_ranker(self.spec.ranker, seed)
        self.start: dict[str, torch.Tensor] = {}

    def restart(self, state: dict[str, torch.Tensor]) -> None:
        self.ranker.module.load_state_dict(state)
        core = self.mod["training.core"]
        self.optim, self.sched = core.make_optimizer(self.ranker.module.parameters(), core.FitConfig.of(self.spec.fit))
        self.ranker.train()

    def step(self, collated: dict[str, torch.Tensor], shape: tuple[int, int]) -> float:
        losses, objective = self.mod["training.losses"], self.spec.objective
        logits = self.ranker.logits(collated, torch.device("cpu"), "fp32")
        loss = losses.weighted_mean(losses.element_losses(objective.loss, logits.view(shape), objective.margin), None)
        self.optim.zero_grad(set_to_none=True)
        loss.backward()
        self.optim.step()
        self.sched.step()
        return loss.item()

    def dev_scores(self, dev) -> np.ndarray:
        frame = self.mod["models"].score_pair_frame(self.ranker, dev, batch_size=self.spec.evaluation.score_batch_size,
                                                    device=torch.device("cpu"), precision="fp32", progress=False)
        return frame["score"].to_numpy()


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(thread CPU seconds, wall seconds, result) of one call."""
    c, w = time.thread_time(), time.perf_counter()
    out = fn()
    return time.thread_time() - c, time.perf_counter() - w, out


def run_rounds(variants: list[Variant], batches: list[tuple], dev, rounds: int) -> dict[str, dict[str, list]]:
    """Per variant: CPU and wall seconds of all steps and of one dev evaluation per round, its losses and scores."""
    state = {k: v.clone() for k, v in variants[0].ranker.module.state_dict().items()}
    out: dict[str, dict[str, list]] = {v.name: {"step_cpu": [], "step_wall": [], "eval_cpu": [], "eval_wall": []}
                                       for v in variants}
    for r in range(rounds):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            v.restart(state)
            cpu, wall, losses = timed(lambda: [v.step(c, s) for c, s in batches])
            out[v.name]["step_cpu"].append(cpu / len(batches))
            out[v.name]["step_wall"].append(wall / len(batches))
            out[v.name]["losses"] = losses
            cpu, wall, scores = timed(lambda: v.dev_scores(dev))
            out[v.name]["eval_cpu"].append(cpu)
            out[v.name]["eval_wall"].append(wall)
            out[v.name]["scores"] = scores
    return out


def cpu_flags() -> str:
    """The lscpu flags that decide the kernels torch runs here."""
    try:
        flags = set(subprocess.run(["lscpu"], capture_output=True, text=True).stdout.split())
    except OSError:
        return "lscpu unavailable"
    return " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags) or "none of avx2/avx512"


def report(out: dict[str, dict[str, list]], base: str, new: str, steps: int, pairs: int) -> None:
    med = {name: {k: statistics.median(v) for k, v in o.items() if k.endswith(("cpu", "wall"))}
           for name, o in out.items()}
    print(f"| variant | step CPU ms | step wall ms | dev evaluation CPU s | dev evaluation wall s |")
    print("|---|---|---|---|---|")
    for name, m in med.items():
        print(f"| {name} | {1000 * m['step_cpu']:.2f} | {1000 * m['step_wall']:.2f} | {m['eval_cpu']:.3f} | "
              f"{m['eval_wall']:.3f} |")
    for what, key in (("training step", "step_cpu"), ("dev evaluation", "eval_cpu")):
        print(f"speed ratio {base} / {new}, {what} (thread CPU time): {med[base][key] / med[new][key]:.2f}x")
    loss_diff = max(abs(a - b) for a, b in zip(out[base]["losses"], out[new]["losses"]))
    score_diff = float(np.abs(out[base]["scores"] - out[new]["scores"]).max())
    print(f"max |loss difference| over {steps} steps: {loss_diff:.3g}; "
          f"max |dev score difference| over {pairs} pairs after them: {score_diff:.3g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, type=Path)
    ap.add_argument("--base", default="HEAD", help="the commit whose code is compared (default: HEAD)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dev-queries", type=int, default=0, help="dev queries scored per evaluation (0 = all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trainable", action="store_true", help="train the embeddings too (default: frozen)")
    ap.add_argument("--compiled", action="store_true",
                    help="compare the compiled passes (architecture.compiled) against torch's operations, "
                         "both this checkout's code")
    ap.add_argument("--kernels", choices=("torch", "compiled"), default="torch",
                    help="this checkout's variant by torch's operations or the compiled passes, against --base")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    params, config = default_params(args.trainable)
    with tempfile.TemporaryDirectory() as tmp:
        if args.compiled:
            new = Variant("compiled passes", "curricula", compiled_params(params, True), args.seed)
            base = Variant("torch's operations", "curricula", params, args.seed)
        else:
            import_base(args.base, Path(tmp))
            mine = compiled_params(params, args.kernels == "compiled")
            new = Variant("this checkout" + (", compiled passes" if args.kernels == "compiled" else ""),
                          "curricula", mine, args.seed)
            base = Variant(f"base {args.base}", BASE, params, args.seed)
        base.ranker.module.load_state_dict(new.ranker.module.state_dict())
        batches, data = training_batches(args.root, params, args.steps, args.seed, new.ranker)
        dev = dev_pairs(data, args.dev_queries or None, config["pipeline_seed"], 1)
        print(f"CPU flags: {cpu_flags()}; torch threads {torch.get_num_threads()}; {args.steps} training steps "
              f"(batch {batches[0][1][0]} x {batches[0][1][1]}), dev evaluation of {dev.height} pairs; median of "
              f"{args.rounds} alternated rounds")
        out = run_rounds([base, new], batches, dev, args.rounds)
        report(out, base.name, new.name, args.steps, dev.height)


if __name__ == "__main__":
    main()

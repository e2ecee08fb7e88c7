"""The smoke check for a first GPU: every GPU path once, against CPU reference values computed beforehand.

    python -m curricula.smoke.gpu --write-reference   # on a CPU machine: curricula/smoke/cpu_reference.npz
    python -m curricula.smoke.gpu                     # on the GPU machine (under 10 minutes on one GPU)

It prints one line per check (``PASS`` / ``FAIL`` / ``INFO``, what was compared, the number and its bound) and a
closing ``N passed, N failed`` line, and exits 1 when a check failed. The checks (docs/cluster.md):

1. the device: torch, CUDA and driver versions, the GPU and its compute capability, the precision each ranker's
   ``auto`` resolves to (:func:`curricula.models.hf.autocast_dtype`);
2. scoring: every ranker (untrained, seeded) on the reference pairs in fp32, logits within 1e-4 of the CPU's; the
   cross-encoder in its ``auto`` precision with Spearman >= 0.9999 against the CPU's fp32 logits;
3. training: ``steps`` fp32 steps per ranker on the same batches, the first 10 losses within 1e-3 relative of
   the CPU's;
4. kill and resume at step 10 (ConvKNRM, the cross-encoder): weights within 1e-5 of an uninterrupted run, and
   equal for ConvKNRM with deterministic algorithms (config ``deterministic``);
5. MC dropout: two runs with one seed give the same probabilities;
6. dense encoding: cosine >= 0.99999 with the CPU's vectors (fp32); the exact neighbour search of this environment's
   FAISS (the CPU build, as on the CPU nodes) returns the reference ids, apart from ties;
7. a dry run of the workstation profile: every job of a GPU-capable rule asks for one card (none without a GPU).

With ``--device cpu`` the same checks run on the CPU (the tests do so against a reference they write).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from curricula.smoke.checks import (RANKERS, Sizes, dense_vectors, ids_equal_but_ties, kill_and_resume,
                                    mc_dropout_repeats, neighbour_ids, ranker_logits, train_losses,
                                    workstation_gpu_jobs)

REFERENCE = Path(__file__).with_name("cpu_reference.npz")


@dataclass
class Report:
    """The lines of a smoke run and its counts."""

    lines: list[str] = field(default_factory=list)
    passed: int = 0
    failed: int = 0

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.lines.append(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")
        self.passed, self.failed = self.passed + ok, self.failed + (not ok)
        print(self.lines[-1], flush=True)

    def info(self, name: str, detail: str) -> None:
        self.lines.append(f"INFO {name}: {detail}")
        print(self.lines[-1], flush=True)

    def run(self, name: str, body: Callable[[], None]) -> None:
        """Run one check's body; an exception is that check's failure (the others still run)."""
        try:
            body()
        except Exception as err:  # a smoke check reports every failure and goes on
            self.check(name, False, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")


# ---------------------------------------------------------------------------------------------- the reference
def write_reference(path: Path, sizes: Sizes) -> None:
    """Compute every reference value on the CPU in fp32 and save them (a small .npz) with how they were made."""
    cpu = torch.device("cpu")
    arrays: dict[str, np.ndarray] = {}
    for name in RANKERS:
        arrays[f"logits/{name}"] = ranker_logits(name, cpu, sizes, "fp32")
        arrays[f"losses/{name}"] = np.asarray(train_losses(name, cpu, sizes)[0], dtype=np.float64)
    arrays["vectors"] = dense_vectors(cpu, sizes)
    arrays["neighbour_ids"], arrays["neighbour_scores"] = neighbour_ids(arrays["vectors"], sizes)
    made = {"sizes": asdict(sizes), "torch": torch.__version__, "machine": platform.machine(),
            "cpu_bf16": bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())}
    np.savez_compressed(path, meta=np.array(json.dumps(made, sort_keys=True)), **arrays)


def read_reference(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(path) as data:
        arrays = {key: data[key] for key in data.files}
    return json.loads(str(arrays.pop("meta"))), arrays


# ---------------------------------------------------------------------------------------------- the checks
def driver_version() -> str:
    """The NVIDIA driver's version as ``nvidia-smi`` reports it (torch does not expose it), or why it is unknown."""
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({type(err).__name__})"
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"


def device_line(report: Report, device: torch.device) -> None:
    """Check 1: what this machine is; fails when a CUDA device was asked for and torch cannot use it."""
    from curricula.models.device import describe, device_record
    from curricula.models.hf import autocast_dtype

    precisions = ", ".join(f"{name} {'bf16' if autocast_dtype(device, 'auto', name == 'cross_encoder') else 'fp32'}"
                           for name in RANKERS)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        report.info("device", f"{describe(device_record(device, None))}; {props.total_memory / 2**30:.0f} GiB; "
                              f"arch list {torch.cuda.get_arch_list()}; driver {driver_version()}")
    else:
        report.info("device", describe(device_record(device, None)))
    report.info("precision auto", precisions)


def scoring_checks(report: Report, device: torch.device, sizes: Sizes, ref: dict[str, np.ndarray]) -> None:
    """Check 2: fp32 logits of every ranker within 1e-4; the cross-encoder's auto precision ranks alike."""
    from scipy.stats import spearmanr

    for name in RANKERS:
        def fp32(name: str = name) -> None:
            diff = float(np.max(np.abs(ranker_logits(name, device, sizes, "fp32") - ref[f"logits/{name}"])))
            report.check(f"scoring {name} fp32", diff <= 1e-4, f"max |logit - CPU| {diff:.2e} (<= 1e-4)")
        report.run(f"scoring {name} fp32", fp32)

    def auto() -> None:
        rho = float(spearmanr(ranker_logits("cross_encoder", device, sizes, "auto"),
                              ref["logits/cross_encoder"]).statistic)
        report.check("scoring cross_encoder auto", rho >= 0.9999, f"Spearman with CPU fp32 {rho:.6f} (>= 0.9999)")
    report.run("scoring cross_encoder auto", auto)


def training_checks(report: Report, device: torch.device, sizes: Sizes, ref: dict[str, np.ndarray]) -> None:
    """Check 3: the first ``compared_steps`` fp32 losses of every ranker within 1e-3 relative of the CPU's."""
    n = sizes.compared_steps
    for name in RANKERS:
        def body(name: str = name) -> None:
            losses = np.asarray(train_losses(name, device, sizes)[0], dtype=np.float64)
            rel = float(np.max(np.abs(losses[:n] - ref[f"losses/{name}"][:n]) / np.abs(ref[f"losses/{name}"][:n])))
            finite = bool(np.isfinite(losses).all())
            report.check(f"training {name}", rel <= 1e-3 and finite,
                         f"{len(losses)} steps, first {n} losses within {rel:.2e} relative (<= 1e-3), "
                         f"last loss {losses[-1]:.4f}")
        report.run(f"training {name}", body)


def resume_and_dropout_checks(report: Report, device: torch.device, sizes: Sizes, folder: Path) -> None:
    """Checks 4 and 5: kill and resume (ConvKNRM, the cross-encoder); MC dropout repeatable (cnn_qa, cross-encoder)."""
    for name in ("convknrm", "cross_encoder"):
        def resume(name: str = name) -> None:
            diff = kill_and_resume(name, device, sizes, folder / name)
            report.check(f"resume {name}", diff <= 1e-5, f"max |weight - uninterrupted| {diff:.2e} (<= 1e-5) after "
                                                         f"a kill at step {sizes.resume_at}")
        report.run(f"resume {name}", resume)
    def exact() -> None:
        from curricula.training.determinism import use_deterministic

        use_deterministic(True)
        try:
            diff = kill_and_resume("convknrm", device, sizes, folder / "deterministic")
        finally:
            torch.use_deterministic_algorithms(False)
        report.check("resume convknrm deterministic", diff == 0.0, f"max |weight - uninterrupted| {diff:.2e} (== 0 "
                                                                   f"with deterministic algorithms)")
    report.run("resume convknrm deterministic", exact)
    for name in ("cnn_qa", "cross_encoder"):
        def dropout(name: str = name) -> None:
            diff = mc_dropout_repeats(name, device, sizes)
            report.check(f"mc dropout {name}", diff == 0.0, f"max |run 1 - run 2| {diff:.2e} (== 0, same seed)")
        report.run(f"mc dropout {name}", dropout)


def dense_checks(report: Report, device: torch.device, sizes: Sizes, ref: dict[str, np.ndarray]) -> None:
    """Check 6: dense vectors' cosine with the CPU's; neighbour ids of the reference vectors."""
    def vectors() -> None:
        got = dense_vectors(device, sizes)
        cosine = float(np.min(np.sum(got * ref["vectors"], axis=1)
                              / np.linalg.norm(got, axis=1) / np.linalg.norm(ref["vectors"], axis=1)))
        report.check("dense encoding", cosine >= 0.99999, f"min cosine with CPU {cosine:.7f} (>= 0.99999)")
    report.run("dense encoding", vectors)

    def search() -> None:
        ids, _ = neighbour_ids(ref["vectors"], sizes)
        ok = ids_equal_but_ties(ids, ref["neighbour_ids"], ref["neighbour_scores"])
        report.check("faiss search", ok, f"{int((ids == ref['neighbour_ids']).sum())} of {ids.size} neighbour ids "
                                         f"equal to the reference (others only where the reference ties)")
    report.run("faiss search", search)


def profile_check(report: Report) -> None:
    """Check 7: the workstation profile's dry run asks one card for every GPU-capable job (0 without a GPU)."""
    def body() -> None:
        expected, jobs = workstation_gpu_jobs()
        wrong = sorted({rule for rule, gpu in jobs if gpu != expected})
        report.check("workstation profile", bool(jobs) and not wrong,
                     f"{len(jobs)} GPU-capable jobs planned, each asking for gpu={expected}"
                     + (f"; wrong: {wrong}" if wrong else ""))
    report.run("workstation profile", body)


def smoke(device: torch.device, reference: Path, folder: Path) -> Report:
    """Every check on ``device`` against ``reference``; the report (its lines were printed as they came)."""
    report = Report()
    made, ref = read_reference(reference)
    sizes = Sizes(**made["sizes"])
    report.info("reference", f"{reference.name}: made with torch {made['torch']} on {made['machine']}; {sizes}")
    device_line(report, device)
    scoring_checks(report, device, sizes, ref)
    training_checks(report, device, sizes, ref)
    resume_and_dropout_checks(report, device, sizes, folder)
    dense_checks(report, device, sizes, ref)
    profile_check(report)
    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description="GPU smoke check against CPU reference values.")
    parser.add_argument("--write-reference", action="store_true", help="compute the reference on the CPU, write it")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--device", default="cuda", help="the device checked (default cuda; cpu for a dry check)")
    parser.add_argument("--pairs", type=int, default=Sizes.pairs, help="with --write-reference: pairs scored")
    parser.add_argument("--steps", type=int, default=Sizes.steps, help="with --write-reference: training steps")
    args = parser.parse_args(argv)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before any cuBLAS call: the deterministic check
    if args.write_reference:
        write_reference(args.reference, Sizes(pairs=args.pairs, steps=args.steps))
        print(f"wrote {args.reference}")
        return 0
    from curricula.models.device import select_device

    with tempfile.TemporaryDirectory() as tmp:
        report = smoke(select_device(args.device), args.reference, Path(tmp))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())

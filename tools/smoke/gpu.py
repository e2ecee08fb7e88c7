"""The smoke check for a first GPU: every GPU path once, against CPU reference values computed beforehand.

    python -m tools.smoke.gpu --write-reference   # on a CPU machine: tools/smoke/cpu_reference.npz
    python -m tools.smoke.gpu --self-test         # on the CPU: every check fails on a perturbed value
    python -m tools.smoke.gpu                     # on the GPU machine (a few minutes on one GPU)

It prints one line per check (``PASS`` / ``FAIL`` / ``INFO``, what was compared, the number and its bound) and a
closing ``N passed, N failed`` line, and exits 1 when a check failed. The checks (docs/cluster.md; the models are
:mod:`tools.smoke.checks`', the bounds and their derivations :mod:`tools.smoke.verdicts`'):

1. the device: torch, CUDA and driver versions, the GPU and its compute capability, the precision each ranker's
   ``auto`` resolves to (:func:`curricula.models.hf.autocast_dtype`);
2. scoring, dropout off: every ranker's fp32 logits within 1e-4 x max |CPU logit| of the CPU's (on CPU logits that
   spread); the cross-encoder in its ``auto`` precision with Spearman >= 0.9999 against the CPU's fp32 logits;
3. training, dropout off: 50 fp32 steps per ranker on the same batches, the first 10 losses within 1e-3 relative
   of the CPU's, whose losses moved >= 1e-2 from the untrained model's (so a broken backward fails);
4. kill and resume at step 10: ConvKNRM's weights within 1e-5 of an uninterrupted run, and equal with
   deterministic algorithms; the cross-encoder's (dropout on: the restored random state draws the masks) equal
   with deterministic algorithms; each resumed run computed only the steps after the checkpoint;
5. MC dropout (cnn_qa, the cross-encoder): two runs with one seed identical, two passes of a run different;
6. dense encoding: cosine >= 0.99999 with the CPU's vectors (fp32); the exact neighbour search (on the card where
   this environment's FAISS is a GPU build, else faiss-cpu) returns the reference ids, apart from ties;
7. a dry run of the workstation profile: every job of a GPU-capable rule asks for one card (none without a GPU).

With ``--device cpu`` the same checks run on the CPU (the tests do so against a reference they write);
``--precision`` forces the precision of check 2's cross-encoder run (``auto`` resolves to bf16 on CPUs with
AVX512-BF16 or AMX and on GPUs of compute capability 8.0 or more, else fp32).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from curricula.models.hf import PRECISIONS
from tools.smoke import checks
from tools.smoke.checks import MC_RANKERS, RANKERS, Sizes
from tools.smoke.reference import REFERENCE, read_reference, write_reference
from tools.smoke.verdicts import (RESUME_ATOL, Verdict, logits_verdict, losses_verdict, mc_dropout_verdict,
                                      neighbours_verdict, profile_verdict, ranking_verdict, resume_verdict,
                                      vectors_verdict)

__all__ = ["REFERENCE", "Report", "main", "read_reference", "smoke", "write_reference"]


@dataclass
class Report:
    """The lines of a smoke run and its counts."""

    lines: list[str] = field(default_factory=list)
    passed: int = 0
    failed: int = 0

    def check(self, name: str, verdict: Verdict) -> None:
        self.lines.append(f"{'PASS' if verdict.ok else 'FAIL'} {name}: {verdict.detail}")
        self.passed, self.failed = self.passed + verdict.ok, self.failed + (not verdict.ok)
        print(self.lines[-1], flush=True)

    def info(self, name: str, detail: str) -> None:
        self.lines.append(f"INFO {name}: {detail}")
        print(self.lines[-1], flush=True)

    def run(self, name: str, body: Callable[[], Verdict]) -> None:
        """Run one check's body and report its verdict; an exception is that check's failure (the others still
        run)."""
        try:
            verdict = body()
        except Exception as err:  # a smoke check reports every failure and goes on
            verdict = Verdict(False, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        self.check(name, verdict)


# ---------------------------------------------------------------------------------------------- check 1
def driver_version() -> str:
    """The NVIDIA driver's version as ``nvidia-smi`` reports it (torch does not expose it), or why it is unknown."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"unknown ({type(err).__name__})"
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"


def precision_name(device: torch.device, precision: str, transformer: bool) -> str:
    """``bf16`` or ``fp32``: what ``precision`` resolves to for a (``transformer``) ranker on ``device``."""
    from curricula.models.hf import autocast_dtype

    return "bf16" if autocast_dtype(device, precision, transformer) else "fp32"


def device_line(report: Report, device: torch.device, precision: str) -> None:
    """Check 1: what this machine is, and the precision each ranker's ``auto`` resolves to (INFO lines)."""
    from curricula.models.device import describe, device_record

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        report.info("device", f"{describe(device_record(device, None))}; {props.total_memory / 2**30:.0f} GiB; "
                              f"arch list {torch.cuda.get_arch_list()}; driver {driver_version()}")
    else:
        report.info("device", describe(device_record(device, None)))
    resolved = ", ".join(f"{name} {precision_name(device, 'auto', name == 'cross_encoder')}" for name in RANKERS)
    forced = "" if precision == "auto" else f"; the cross-encoder's scoring check runs {precision} (--precision)"
    report.info("precision auto", resolved + forced)


# ---------------------------------------------------------------------------------------------- checks 2-7
def scoring_checks(report: Report, device: torch.device, sizes: Sizes, ref: dict[str, np.ndarray],
                   made: dict, precision: str = "auto") -> None:
    """Check 2: every ranker's fp32 logits (:func:`~tools.smoke.verdicts.logits_verdict`); the cross-encoder's
    in ``precision`` ranked as the CPU's fp32 (:func:`~tools.smoke.verdicts.ranking_verdict`)."""
    for name in RANKERS:
        report.run(f"scoring {name} fp32", lambda name=name: logits_verdict(
            checks.ranker_logits(name, device, sizes, "fp32"), ref[f"logits/{name}"]))

    def ranking() -> Verdict:
        got = checks.ranker_logits("cross_encoder", device, sizes, precision)
        verdict = ranking_verdict(got, ref["logits/cross_encoder"], made["cpu_bf16_spearman"])
        return Verdict(verdict.ok, f"runs {precision_name(device, precision, True)}; {verdict.detail}")
    report.run("scoring cross_encoder auto" + ("" if precision == "auto" else f" forced {precision}"), ranking)


def training_checks(report: Report, device: torch.device, sizes: Sizes, ref: dict[str, np.ndarray]) -> None:
    """Check 3: every ranker's fp32 training losses (:func:`~tools.smoke.verdicts.losses_verdict`)."""
    for name in RANKERS:
        report.run(f"training {name}", lambda name=name: losses_verdict(
            checks.train_losses(name, device, sizes)[0], ref[f"losses/{name}"], ref[f"untrained/{name}"],
            sizes.compared_steps))


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """Deterministic algorithms inside (:func:`curricula.models.runtime.use_deterministic`), off after."""
    from curricula.models.runtime import use_deterministic

    use_deterministic(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


def resume_checks(report: Report, device: torch.device, sizes: Sizes, folder: Path) -> None:
    """Check 4: kill and resume (:func:`~tools.smoke.verdicts.resume_verdict`): ConvKNRM as CUDA runs by
    default (within :data:`~tools.smoke.verdicts.RESUME_ATOL`) and deterministic (equal); the cross-encoder,
    dropout on, deterministic (equal)."""
    expected = sizes.steps - sizes.resume_at

    def resume(name: str, exact: bool, dropout: bool) -> Verdict:
        where = folder / f"{name}-{'deterministic' if exact else 'default'}"
        with deterministic() if exact else contextlib.nullcontext():
            resumed, whole, ran = checks.kill_and_resume(name, device, sizes, where, dropout=dropout)
        return resume_verdict(resumed, whole, ran, expected, 0.0 if exact else RESUME_ATOL)

    report.run("resume convknrm", lambda: resume("convknrm", False, False))
    report.run("resume convknrm deterministic", lambda: resume("convknrm", True, False))
    report.run("resume cross_encoder deterministic", lambda: resume("cross_encoder", True, True))


def dropout_checks(report: Report, device: torch.device, sizes: Sizes) -> None:
    """Check 5: MC dropout (:func:`~tools.smoke.verdicts.mc_dropout_verdict`)."""
    for name in MC_RANKERS:
        report.run(f"mc dropout {name}", lambda name=name: mc_dropout_verdict(checks.mc_dropout_runs(name, device,
                                                                                                     sizes)))


def dense_checks(report: Report, device: torch.device, sizes: Sizes, ref: dict[str, np.ndarray]) -> None:
    """Check 6: dense vectors' cosine with the CPU's; the exact search's ids of the reference vectors."""
    report.run("dense encoding", lambda: vectors_verdict(checks.dense_vectors(device, sizes), ref["vectors"]))
    try:
        report.info("faiss", checks.faiss_build(device))
    except Exception as err:  # the search check below reports the failure
        report.info("faiss", f"{type(err).__name__}: {err}")
    report.run("faiss search", lambda: neighbours_verdict(checks.neighbour_ids(ref["vectors"], sizes, device)[0],
                                                          ref["neighbour_ids"], ref["neighbour_scores"], sizes.k))


def smoke(device: torch.device, reference: Path, folder: Path, precision: str = "auto") -> Report:
    """Every check on ``device`` against ``reference``; the report (its lines were printed as they came)."""
    report = Report()
    made, ref = read_reference(reference)
    sizes = Sizes(**made["sizes"])
    report.info("reference", f"{reference.name}: torch {made['torch']} on {made['cpu']} ({' '.join(made['cpu_flags'])}"
                             f"; bf16 {made['cpu_bf16']}); {sizes}")
    device_line(report, device, precision)
    scoring_checks(report, device, sizes, ref, made, precision)
    training_checks(report, device, sizes, ref)
    resume_checks(report, device, sizes, folder)
    dropout_checks(report, device, sizes)
    dense_checks(report, device, sizes, ref)
    report.run("workstation profile", lambda: profile_verdict(*checks.workstation_gpu_jobs()))
    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    return report


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m tools.smoke.gpu``."""
    parser = argparse.ArgumentParser(description="GPU smoke check against CPU reference values.")
    parser.add_argument("--write-reference", action="store_true", help="compute the reference on the CPU, write it")
    parser.add_argument("--self-test", action="store_true",
                        help="on the CPU: each check fails on a value perturbed beyond its bound")
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--device", default="cuda", help="the device checked (default cuda; cpu for a dry check)")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="the precision of the cross-encoder's scoring check (default auto)")
    parser.add_argument("--pairs", type=int, default=Sizes.pairs, help="with --write-reference: pairs scored")
    parser.add_argument("--steps", type=int, default=Sizes.steps, help="with --write-reference: training steps")
    return parser


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from curricula.models.device import select_device

    args = parser().parse_args(argv)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before any cuBLAS call: the deterministic checks
    if args.write_reference:
        made = write_reference(args.reference, Sizes(pairs=args.pairs, steps=args.steps))
        print(f"wrote {args.reference} (CPU bf16 Spearman {made['cpu_bf16_spearman']:.7f})")
        return 0
    if args.self_test:
        from tools.smoke.selftest import self_test

        return 0 if self_test(args.reference) else 1
    try:
        device = select_device(args.device)
    except Exception as err:  # a card torch cannot use: the one failure there is
        print(f"FAIL device: {type(err).__name__}: {err}\n0 passed, 1 failed", flush=True)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        report = smoke(device, args.reference, Path(tmp), args.precision)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())

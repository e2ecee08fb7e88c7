"""The self-test of the GPU smoke check, on the CPU: every check passes on the CPU reference's own values and fails
on each of its perturbations, each beyond the check's bound (a logit, a loss, a weight, an MC pass, a vector, an id,
a job's card count), so that a PASS on a GPU means the comparison could have failed.

    python -m tools.smoke.gpu --self-test

It feeds the comparisons of :mod:`tools.smoke.verdicts` the values stored in the reference (and, for the profile
check, one dry run of the workstation profile, a few seconds): no model runs. One line per check,
``self-test <check>: fails on <perturbation>; <perturbation> (ok)``, and a closing count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tools.smoke import verdicts as v
from tools.smoke.checks import MC_RANKERS, RANKERS, Sizes
from tools.smoke.reference import REFERENCE, read_reference, weights_of

Args = tuple


@dataclass(frozen=True)
class Case:
    """One check: its comparison, the reference's own values (must pass) and the perturbed ones (each must fail)."""

    check: str
    verdict: Callable[..., v.Verdict]
    unperturbed: Args
    perturbed: Sequence[tuple[str, Args]]


def nudged(values: np.ndarray, at: int, by: float) -> np.ndarray:
    """A copy of ``values`` with the flat element ``at`` increased by ``by``."""
    out = np.array(values, dtype=values.dtype, copy=True)
    out.flat[at] += by
    return out


def scoring_cases(ref: dict[str, np.ndarray], made: dict) -> list[Case]:
    """Check 2: a logit off by twice the bound; a reference whose logits do not spread; two ranks swapped."""
    cases = []
    for name in RANKERS:
        logits = ref[f"logits/{name}"]
        off = 2 * v.LOGIT_REL * float(np.abs(logits).max())
        flat = 0.0179 + (logits - logits.mean()) * (3.7e-4 / np.ptp(logits))  # as a fresh head on a 1-layer cut
        cases.append(Case(f"scoring {name} fp32", v.logits_verdict, (logits, logits), [
            (f"a logit off by {off:.1e} (2 x the bound)", (nudged(logits, len(logits) // 2, off), logits)),
            ("logits like a fresh head's on a 1-layer cut (0.0177..0.0181: the reference unfit)", (flat, flat))]))
    fp32, bf16 = ref["logits/cross_encoder"], ref["logits_bf16/cross_encoder"]
    order = np.argsort(fp32)
    low, high = order[len(order) // 10], order[9 * len(order) // 10]
    swapped = bf16.copy()
    swapped[[low, high]] = bf16[[high, low]]
    rho = made["cpu_bf16_spearman"]
    cases.append(Case("scoring cross_encoder auto", v.ranking_verdict, (bf16, fp32, rho), [
        ("the CPU's bf16 logits with the 10% and 90% quantiles' pairs swapped", (swapped, fp32, rho)),
        ("a reference whose own bf16 ranks at 0.9987 (a [CLS] head on a 1-layer cut)", (bf16, fp32, 0.9987))]))
    return cases


def training_cases(ref: dict[str, np.ndarray], sizes: Sizes) -> list[Case]:
    """Check 3: a loss off by twice the bound; a broken backward (the untrained model's losses); a NaN."""
    cases, n = [], sizes.compared_steps
    for name in RANKERS:
        losses, untrained = ref[f"losses/{name}"], ref[f"untrained/{name}"]
        at = n // 2
        broken = np.concatenate([untrained, losses[n:]])
        cases.append(Case(f"training {name}", v.losses_verdict, (losses, losses, untrained, n), [
            ("a loss off by 2e-3 relative", (nudged(losses, at, 2 * v.LOSS_REL * abs(losses[at])), losses,
                                            untrained, n)),
            ("a broken backward (the untrained model's first losses)", (broken, losses, untrained, n)),
            ("a NaN loss", (nudged(losses, len(losses) - 1, np.nan), losses, untrained, n))]))
    return cases


def resume_cases(ref: dict[str, np.ndarray], sizes: Sizes) -> list[Case]:
    """Check 4: a weight off by twice the bound (one ulp where the bound is 0); a run that restarted from step 0."""
    steps, after = sizes.steps, sizes.steps - sizes.resume_at
    cases = []
    for name, atol in (("convknrm", v.RESUME_ATOL), ("convknrm", 0.0), ("cross_encoder", 0.0)):
        whole = weights_of(ref, name)
        key = sorted(whole)[0]
        step = 2 * atol or float(np.spacing(np.abs(whole[key]).max()))
        off = {**whole, key: nudged(whole[key], 0, step)}
        label = f"resume {name}" + (" deterministic" if not atol else "")
        cases.append(Case(label, v.resume_verdict, (whole, whole, after, after, atol), [
            (f"a weight off by {step:.1e}" + (" (one ulp)" if not atol else ""), (off, whole, after, after, atol)),
            ("a resumed run that restarted from step 0", (whole, whole, steps, after, atol))]))
    return cases


def dropout_cases(ref: dict[str, np.ndarray]) -> list[Case]:
    """Check 5: one probability of the second run off by an ulp; every pass equal (dropout off)."""
    cases = []
    for name in MC_RANKERS:
        runs = ref[f"mc/{name}"]
        second = runs.copy()
        second[1, 0, 0] = np.nextafter(second[1, 0, 0], np.float32(1))
        still = np.repeat(runs[:, :1], runs.shape[1], axis=1)
        cases.append(Case(f"mc dropout {name}", v.mc_dropout_verdict, (runs,), [
            ("one probability of run 2 off by one ulp", (second,)),
            ("every pass alike (dropout off)", (still,))]))
    return cases


def turned(vectors: np.ndarray, row: int, angle: float) -> np.ndarray:
    """A copy of ``vectors`` with ``row`` turned by ``angle`` radians (towards the next row, made orthogonal)."""
    out = vectors.astype(np.float64).copy()
    a, b = out[row], out[(row + 1) % len(out)]
    b = b - a * (a @ b) / (a @ a)
    out[row] = a * np.cos(angle) + b / np.linalg.norm(b) * np.linalg.norm(a) * np.sin(angle)
    return out.astype(vectors.dtype)


def dense_cases(ref: dict[str, np.ndarray], sizes: Sizes) -> list[Case]:
    """Check 6: a vector turned by 0.01 rad (cosine 0.99995); two ids swapped where the scores do not tie."""
    vectors, ids, scores, k = ref["vectors"], ref["neighbour_ids"], ref["neighbour_scores"], sizes.k
    gaps = np.argwhere(np.abs(np.diff(scores[:, :k], axis=1)) > 10 * v.TIE_ATOL)
    row, col = (int(x) for x in gaps[0])
    swapped = ids.copy()
    swapped[row, [col, col + 1]] = ids[row, [col + 1, col]]
    outside = ids.copy()
    outside[row, col] = max(set(range(len(vectors))) - set(ids[row].tolist()))
    return [Case("dense encoding", v.vectors_verdict, (vectors, vectors), [
                ("a vector turned by 0.01 rad (cosine 0.99995)", (turned(vectors, 3, 0.01), vectors))]),
            Case("faiss search", v.neighbours_verdict, (ids, ids, scores, k), [
                ("two neighbours swapped whose scores do not tie", (swapped, ids, scores, k)),
                ("a neighbour replaced by a document outside the list", (outside, ids, scores, k))])]


def profile_cases(expected: int, jobs: list[tuple[str, int]]) -> list[Case]:
    """Check 7: one job asking for another card count; no GPU-capable job planned."""
    wrong = [(jobs[0][0], 1 - expected), *jobs[1:]] if jobs else [("train", 1 - expected)]
    return [Case("workstation profile", v.profile_verdict, (expected, jobs), [
        (f"one {wrong[0][0]} job asking for gpu={1 - expected}", (expected, wrong)),
        ("no GPU-capable job planned", (expected, []))])]


def judge(case: Case) -> tuple[bool, str]:
    """Whether ``case`` passes unperturbed and fails on each perturbation, and its self-test line."""
    plain = case.verdict(*case.unperturbed)
    if not plain.ok:
        return False, f"self-test {case.check}: FAILS on the unperturbed CPU reference: {plain.detail} (WRONG)"
    missed = [label for label, args in case.perturbed if case.verdict(*args).ok]
    if missed:
        return False, f"self-test {case.check}: passes on {'; '.join(missed)} (WRONG)"
    return True, f"self-test {case.check}: fails on {'; '.join(label for label, _ in case.perturbed)} (ok)"


def self_cases(reference: Path = REFERENCE, jobs: tuple[int, list[tuple[str, int]]] | None = None) -> list[Case]:
    """Every check's case from ``reference``; ``jobs`` (expected cards, (rule, gpu) per job) from a dry run of the
    workstation profile when not given."""
    from tools.smoke.checks import workstation_gpu_jobs

    made, ref = read_reference(reference)
    sizes = Sizes(**made["sizes"])
    expected, planned = jobs if jobs is not None else workstation_gpu_jobs()
    return [*scoring_cases(ref, made), *training_cases(ref, sizes), *resume_cases(ref, sizes), *dropout_cases(ref),
            *dense_cases(ref, sizes), *profile_cases(expected, planned)]


def self_test(reference: Path = REFERENCE, jobs: tuple[int, list[tuple[str, int]]] | None = None) -> bool:
    """Print one line per check (:func:`judge`) and a closing count; whether every check behaved."""
    results = [judge(case) for case in self_cases(reference, jobs)]
    for _, line in results:
        print(line, flush=True)
    wrong = sum(not ok for ok, _ in results)
    print(f"self-test: {len(results) - wrong} of {len(results)} checks pass on the CPU reference and fail on each "
          f"perturbation" + (f"; {wrong} WRONG" if wrong else ""), flush=True)
    return not wrong

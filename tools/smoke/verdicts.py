"""The comparisons of the GPU smoke check: pure functions of the measured values and the CPU reference, each
returning a :class:`Verdict`, so that the self-test (:mod:`tools.smoke.selftest`) can feed them perturbed
values without running a model.

Every bound sits between what a healthy device can differ by and what a fault does, with its derivation beside it.
The figures quoted were measured on the CPU with the smoke models of :mod:`tools.smoke.checks` at the default
sizes (``/tmp`` scripts, not kept; the method is described with each bound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: fp32 logits: max |logit - CPU| <= LOGIT_REL x max |CPU logit|. fp32's unit roundoff is 2^-24 = 6e-8; another
#: summation order (cuBLAS/cuDNN tiles against oneDNN's) changes a length-K dot product by about sqrt(K) roundoffs
#: of its terms' size, 2.4e-6 for K = 1536 (MiniLM's feed-forward), and a logit is ~10 such layers deep. Measured:
#: other CPU kernels (1 against 2 threads, oneDNN off) move the logits by <= 8e-7 of their max; every weight
#: perturbed by a relative 1e-7 (an ulp) by <= 9e-7, by 1e-6 by <= 5e-6. So 1e-4 leaves >= 20x over a device whose
#: every weight were off by 1e-6, while TF32 left on fails: rounding only the weights to its 10-bit mantissa moves
#: the logits by 2.6e-4 (cnn_qa) to 8e-4 (lstm_qa) of their max, and TF32 rounds the activations too.
LOGIT_REL = 1e-4
#: the CPU logits must spread over at least this share of their max |logit|, so that the bound is <= 1e-3 of their
#: spread (a device computing a constant fails by >= 500x): a fresh head on a 1-layer cut spans 2% (0.0177..0.0180)
MIN_SPREAD = 0.1
#: the cross-encoder in its ``auto`` precision: Spearman with the CPU's fp32 logits. With the heads in fp32 only the
#: body runs in bf16 (8 significant bits, rounding 2^-9 = 2e-3), which moves the smoke model's logits by ~2e-3 of
#: their spread (max over 1,024 pairs: 2.1e-3); for Gaussian logits with independent noise of r x their std,
#: 1 - Spearman = (6/pi) x (arcsin(1/2) - arcsin(1/(2 sqrt(1 + r^2)))) ~ 0.55 r^2. Measured on the CPU at 1,024 pairs:
#: 0.9999897 in native bf16 (AVX512-BF16), 0.9999895 emulated (oneDNN capped at AVX2): 1 - Spearman 1.0e-5, a tenth
#: of the bound's 1e-4 (a bf16 noise 3x the CPU's still passes). It is blind to what keeps the order (even a bf16
#: head, whose rounded logits rank at 0.999997 here): the fp32 checks see values; this one sees a bf16 path that
#: reorders, as a wrong kernel or mangled inputs do (two pairs at the 10% and 90% quantiles swapped: 1 - 7.5e-3).
MIN_SPEARMAN = 0.9999
#: training losses (nats): |loss - CPU| <= LOSS_REL x |CPU loss| over the first ``compared_steps`` steps. Measured: a
#: relative perturbation of every initial weight and every gradient by 1e-6 moves the first 10 losses by <= 1.9e-6
#: relative (by 1e-5: <= 3.3e-4, cnn_qa, whose max-pooling switches positions); later steps diverge (ConvKNRM's by
#: 4e-3 at steps 20-30 under the same 1e-6), so only the first 10 are compared.
LOSS_REL = 1e-3
#: the CPU's losses must move away from the untrained model's on the same batches (what a device with a broken
#: backward or optimiser reports) by at least this many times LOSS_REL within the compared steps. Measured: 2.3e-2
#: (lstm_qa) to 8.5e-2 (cross-encoder) relative, i.e. 23-85x the bound.
MIN_MOVE = 10.0
#: kill and resume without deterministic algorithms (ConvKNRM): max |weight - uninterrupted run's|. CUDA's embedding
#: backward adds with atomics in any order; emulated by a noise of 1e-7 x max |gradient| on every gradient after the
#: resume, ConvKNRM's weights after 50 steps move by <= 1.2e-6. (The cross-encoder is not compared so: Adam turns the
#: rounding of gradients that are 0 in exact arithmetic, such as the attention key bias's, into steps of up to the
#: learning rate, and the same emulation moves its weights by 1.3e-4; it resumes in deterministic mode, exactly.)
RESUME_ATOL = 1e-5
#: MC dropout: two passes of one run must differ by at least this mean |probability difference| over the pairs
#: (measured with dropout on: 0.066 for cnn_qa, 0.097 for the cross-encoder; with dropout off 0 exactly)
MIN_PASS_DIFF = 1e-3
#: dense vectors: min cosine with the CPU's (fp32, one MiniLM layer: differences of ~1e-7 give 1 - 1e-12)
MIN_COSINE = 0.99999
#: neighbour scores closer than this (cosines) count as tied: fp32 scores of two builds differ by ~1e-7
TIE_ATOL = 1e-5


@dataclass(frozen=True)
class Verdict:
    """One check's outcome: ``ok`` and the line's detail (what was compared, the number and its bound)."""

    ok: bool
    detail: str


def _shape_problem(got: np.ndarray, ref: np.ndarray) -> Verdict | None:
    if got.shape != ref.shape:
        return Verdict(False, f"shape {got.shape}, the reference's {ref.shape}")
    if not np.isfinite(got).all():
        return Verdict(False, f"{int((~np.isfinite(got)).sum())} values not finite")
    return None


def logits_verdict(got: np.ndarray, ref: np.ndarray) -> Verdict:
    """fp32 logits against the CPU's: max |difference| <= :data:`LOGIT_REL` x max |CPU logit|, on CPU logits that
    spread over >= :data:`MIN_SPREAD` of their max."""
    problem = _shape_problem(got, ref)
    if problem:
        return problem
    scale, spread = float(np.abs(ref).max()), float(ref.max() - ref.min())
    diff = float(np.abs(got.astype(np.float64) - ref).max())
    ok = diff <= LOGIT_REL * scale and spread >= MIN_SPREAD * scale
    return Verdict(ok, f"max |logit - CPU| {diff:.2e} (<= {LOGIT_REL:g} x max |CPU logit| {scale:.3f}); CPU logits "
                       f"span {ref.min():.3f}..{ref.max():.3f} (>= {MIN_SPREAD:g} x max)")


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two vectors."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def ranking_verdict(got: np.ndarray, ref: np.ndarray, cpu_bf16: float) -> Verdict:
    """The cross-encoder's logits in its ``auto`` precision against the CPU's fp32 logits: Spearman >=
    :data:`MIN_SPEARMAN`, on a reference whose own bf16 logits (``cpu_bf16``: their Spearman with its fp32 ones, on
    the CPU that wrote it) pass the same bound, i.e. a model whose logits spread enough for bf16 rounding not to
    decide their order (a ``[CLS]`` head on a 1-layer cut gives 0.9987 there)."""
    problem = _shape_problem(got, ref)
    if problem:
        return problem
    rho = spearman(got, ref)
    drift = float(np.abs(got.astype(np.float64) - ref).max()) / float(ref.max() - ref.min())
    return Verdict(rho >= MIN_SPEARMAN and cpu_bf16 >= MIN_SPEARMAN,
                   f"Spearman with CPU fp32 {rho:.7f} (>= {MIN_SPEARMAN}; the CPU's own bf16 {cpu_bf16:.7f}, >= "
                   f"{MIN_SPEARMAN} too); max |logit - CPU| {drift:.1e} of the CPU's spread")


def losses_verdict(got: Sequence[float], ref: np.ndarray, untrained: np.ndarray, compared: int) -> Verdict:
    """Training losses against the CPU's: all finite, as many, the first ``compared`` within :data:`LOSS_REL`
    relative; and the CPU's moved from the ``untrained`` losses by >= :data:`MIN_MOVE` x the bound (else a device
    whose backward did nothing would pass)."""
    losses = np.asarray(got, dtype=np.float64)
    problem = _shape_problem(losses, ref)
    if problem:
        return problem
    n = compared
    rel = float(np.max(np.abs(losses[:n] - ref[:n]) / np.abs(ref[:n])))
    move = float(np.max(np.abs(ref[:n] - untrained[:n]) / np.abs(ref[:n])))
    ok = rel <= LOSS_REL and move >= MIN_MOVE * LOSS_REL
    return Verdict(ok, f"{len(losses)} steps, the first {n} within {rel:.1e} relative (<= {LOSS_REL:g}); the CPU's "
                       f"moved {move:.1e} from the untrained model's (>= {MIN_MOVE * LOSS_REL:g}); last loss "
                       f"{losses[-1]:.4f}")


def resume_verdict(resumed: Mapping[str, np.ndarray], whole: Mapping[str, np.ndarray], ran: int, expected: int,
                   atol: float) -> Verdict:
    """Kill and resume: the resumed run computed ``expected`` steps (it did resume) and its weights are within
    ``atol`` (:data:`RESUME_ATOL`, or 0: equal) of the uninterrupted run's."""
    if set(resumed) != set(whole) or any(resumed[k].shape != whole[k].shape for k in whole):
        return Verdict(False, "the resumed and the uninterrupted run have different weights' names or shapes")
    diff = max(float(np.abs(resumed[k].astype(np.float64) - whole[k]).max(initial=0.0)) for k in whole)
    bound = f"<= {atol:g}" if atol else "== 0"
    return Verdict(diff <= atol and ran == expected,
                   f"max |weight - uninterrupted| {diff:.2e} ({bound}); the resumed run computed {ran} steps "
                   f"(== {expected})")


def mc_dropout_verdict(runs: np.ndarray) -> Verdict:
    """MC dropout (``runs``: 2 runs x passes x pairs, probabilities): the two runs with one seed identical, and every
    two passes of a run differing by a mean |difference| >= :data:`MIN_PASS_DIFF`."""
    if runs.ndim != 3 or runs.shape[0] != 2 or runs.shape[1] < 2:
        return Verdict(False, f"shape {runs.shape}: expected 2 runs of 2 or more passes")
    repeat = float(np.abs(runs[0] - runs[1]).max())
    passes = runs[0].astype(np.float64)
    least = min(float(np.abs(passes[i] - passes[j]).mean()) for i in range(len(passes))
                for j in range(i + 1, len(passes)))
    return Verdict(repeat == 0.0 and least >= MIN_PASS_DIFF,
                   f"max |run 1 - run 2| {repeat:.2e} (== 0, one seed); passes within a run differ by a mean "
                   f"{least:.3f} at least (>= {MIN_PASS_DIFF:g})")


def vectors_verdict(got: np.ndarray, ref: np.ndarray) -> Verdict:
    """Dense vectors against the CPU's: min cosine >= :data:`MIN_COSINE`."""
    problem = _shape_problem(got, ref)
    if problem:
        return problem
    g, r = got.astype(np.float64), ref.astype(np.float64)
    cosine = float(np.min(np.sum(g * r, axis=1) / np.linalg.norm(g, axis=1) / np.linalg.norm(r, axis=1)))
    return Verdict(cosine >= MIN_COSINE, f"min cosine with CPU {cosine:.7f} (>= {MIN_COSINE})")


def tie_groups(scores: np.ndarray, atol: float = TIE_ATOL) -> np.ndarray:
    """Per row of a sorted score matrix, the group number of each position: consecutive positions whose scores
    differ by at most ``atol`` share one."""
    close = np.abs(np.diff(scores, axis=1)) <= atol
    return np.concatenate([np.zeros((len(scores), 1), dtype=np.int64), np.cumsum(~close, axis=1)], axis=1)


def ids_equal_but_ties(ids: np.ndarray, ref_ids: np.ndarray, ref_scores: np.ndarray, k: int,
                       atol: float = TIE_ATOL) -> bool:
    """Whether the first ``k`` neighbour ids agree with the reference's apart from ties: the reference lists one more
    than ``k`` (ids and scores, score descending), and each of the first ``k`` positions holds an id of the
    reference's tie group at that position (:func:`tie_groups`), every id once per row, the same set of ids in a
    group that ends before the k-th place."""
    groups = tie_groups(ref_scores, atol)
    for got, want, group in zip(ids[:, :k], ref_ids, groups):
        if len(set(got.tolist())) != k:
            return False
        for g in np.unique(group[:k]):
            members, at = set(want[group == g].tolist()), np.flatnonzero(group[:k] == g)
            inside = (group == g).sum() == len(at)  # the whole group lies within the first k
            if not set(got[at].tolist()) <= members or (inside and set(got[at].tolist()) != members):
                return False
    return True


def neighbours_verdict(ids: np.ndarray, ref_ids: np.ndarray, ref_scores: np.ndarray, k: int) -> Verdict:
    """The exact search's first ``k`` ids of the reference vectors against the reference's, apart from ties."""
    if ids.shape[0] != ref_ids.shape[0] or ids.shape[1] < k or ref_ids.shape[1] <= k:
        return Verdict(False, f"ids of shape {ids.shape}, the reference's {ref_ids.shape}: expected >= {k} "
                              f"columns of {ref_ids.shape[0]} queries")
    same = int((ids[:, :k] == ref_ids[:, :k]).sum())
    return Verdict(ids_equal_but_ties(ids, ref_ids, ref_scores, k, TIE_ATOL),
                   f"{same} of {ref_ids.shape[0] * k} neighbour ids equal to the reference (the others only where "
                   f"the reference's scores tie within {TIE_ATOL:g})")


def profile_verdict(expected: int, jobs: Sequence[tuple[str, int]]) -> Verdict:
    """The workstation profile's dry run: GPU-capable jobs were planned, and every one asks for ``expected`` cards
    (1 where this machine shows a card, else 0)."""
    wrong = sorted({rule for rule, gpu in jobs if gpu != expected})
    return Verdict(bool(jobs) and not wrong, f"{len(jobs)} GPU-capable jobs planned, each to ask for gpu={expected}"
                                             + (f"; wrong: {wrong}" if wrong else ""))

"""K-NRM's Gaussian kernel pooling (Xiong et al. 2017 §3, eq. 3-4), the soft-match features of ConvKNRM
(:mod:`curricula.models.convknrm`): the kernels' centres and widths, the pooling of similarity matrices, and its CPU
path, which evaluates the kernels at document tokens only (:class:`RowKernelSum`), with three exps per similarity
instead of one per kernel (:func:`kernel_ladder`) and denormals flushed (:func:`flushed_denormals`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import torch


def kernel_mus(n: int) -> list[float]:
    """K-NRM kernel centres: 1.0 (exact match), then n - 1 centres evenly inside (-1, 1), e.g. 0.9, 0.7, ..., -0.9
    for n = 11 (Xiong et al. 2017 §3)."""
    if n < 2:
        raise ValueError("kernel pooling needs at least 2 kernels (the exact-match one and one soft one)")
    step = 2.0 / (n - 1)
    return [1.0] + [1.0 - step / 2 - i * step for i in range(n - 1)]


def kernel_sigmas(n: int, exact: float = 1e-3, soft: float = 0.1) -> list[float]:
    """Kernel widths: ``exact`` for the exact-match kernel at 1.0, ``soft`` for the others (K-NRM defaults)."""
    return [exact] + [soft] * (n - 1)


def kernel_pooling(sim: torch.Tensor, q_mask: torch.Tensor, d_mask: torch.Tensor, mus: torch.Tensor,
                   sigmas: torch.Tensor) -> torch.Tensor:
    """K-NRM soft-TF features (B, K) of similarity matrices ``sim`` (B, Lq, Ld).

    K_k(M_i) = sum_j exp(-(M_ij - mu_k)^2 / (2 sigma_k^2)) over valid document positions j;
    phi_k = sum_i 0.01 * log(max(K_k(M_i), 1e-10)) over valid query positions i (Xiong et al. 2017 eq. 3-4; the
    0.01 scale and the 1e-10 floor as in the authors' implementation). Masks are 1 for tokens, 0 for padding.

    On CPU the kernels are evaluated at the document positions that are tokens only (:class:`RowKernelSum`: most
    of a padded batch of responses is padding); elsewhere, and when ``mus`` or ``sigmas`` need gradients, on the
    whole padded matrix (:func:`kernel_pooling_dense`). Both compute the same kernel values up to float round-off
    (the CPU path by :func:`kernel_ladder`, and it floors or flushes values below about 1e-38); the sums over j run
    in another order.
    """
    if sim.device.type != "cpu" or mus.requires_grad or sigmas.requires_grad:
        return kernel_pooling_dense(sim, q_mask, d_mask, mus, sigmas)
    batch, lq, ld = sim.shape
    positions = (d_mask.reshape(-1) > 0).nonzero().squeeze(1)  # flat (b, j) of the document tokens
    rows = sim.transpose(1, 2).reshape(batch * ld, lq).index_select(0, positions)  # (N, Lq): one row per token
    pair = torch.div(positions, ld, rounding_mode="floor")
    return log_soft_tf(RowKernelSum.apply(rows, pair, batch, mus, sigmas), q_mask)


def log_soft_tf(soft_tf: torch.Tensor, q_mask: torch.Tensor) -> torch.Tensor:
    """K-NRM eq. 4: phi_k = sum over valid query positions i of 0.01 * log(max(K_k(M_i), 1e-10)), (B, K) from the
    soft-TF (B, K, Lq) of :class:`RowKernelSum`."""
    return masked_logs(soft_tf, q_mask).sum(dim=2)


def masked_logs(soft_tf: torch.Tensor, q_mask: torch.Tensor) -> torch.Tensor:
    """The terms of K-NRM eq. 4 before the sum over query positions: 0.01 * log(max(K_k(M_i), 1e-10)) at valid
    positions i, 0 at padding; ``soft_tf`` (..., B, K, Lq), ``q_mask`` (B, Lq)."""
    return torch.log(soft_tf.clamp(min=1e-10)) * 0.01 * q_mask[:, None, :]


def kernel_pooling_dense(sim: torch.Tensor, q_mask: torch.Tensor, d_mask: torch.Tensor, mus: torch.Tensor,
                         sigmas: torch.Tensor) -> torch.Tensor:
    """:func:`kernel_pooling` on the whole padded (B, Lq, Ld, K) kernel tensor (padding masked out)."""
    k = torch.exp(-((sim.unsqueeze(-1) - mus) ** 2) / (2 * sigmas**2))  # (B, Lq, Ld, K)
    soft_tf = (k * d_mask[:, None, :, None]).sum(dim=2)  # (B, Lq, K)
    logs = torch.log(soft_tf.clamp(min=1e-10)) * 0.01 * q_mask[..., None]
    return logs.sum(dim=1)


#: the floor of a kernel's exponent on the CPU path. exp(-87) = 1.6e-38 is the smallest power of e above float32's
#: smallest normal number; below it torch's vectorised exp takes a slow path (measured: 10-14x slower per element
#: for exponents in [-100, 0] or [-1e6, 0] than once floored), and the exact-match kernel (sigma 1e-3) sends most
#: exponents far below it. A floored kernel value adds at most 64 x 1.6e-38 to a soft-TF sum, which the sum's
#: 1e-10 floor and float32 rounding absorb, so the features are those of the unfloored exp up to round-off.
EXP_FLOOR = -87.0


def ladder_anchor(count: int) -> int:
    """The kernel (index among all ``count``, the exact-match one first) that :func:`kernel_ladder` computes by exp
    and climbs from: the middle soft kernel."""
    return 1 + (count - 2) // 2


def ladder_applies(mus: Sequence[float], sigmas: Sequence[float], low: float, high: float) -> bool:
    """Whether :func:`kernel_ladder` may compute the soft kernels (all but the first) of similarities in
    [``low``, ``high``]: at least two of them, centres evenly spaced (descending), one width, and the anchor kernel
    (the middle one, computed by exp) above :data:`EXP_FLOOR` over the whole range, so that the ladder starts from
    normal floats (for cosine matches in [-1, 1] and K-NRM's 11 kernels its exponent is at least -60.5)."""
    soft_mus, soft_sigmas = list(mus[1:]), list(sigmas[1:])
    if len(soft_mus) < 2 or max(soft_sigmas) - min(soft_sigmas) > 1e-6 * max(soft_sigmas):
        return False
    steps = [a - b for a, b in zip(soft_mus, soft_mus[1:])]
    if min(steps) <= 0 or max(steps) - min(steps) > 1e-6 * max(steps):
        return False
    anchor = mus[ladder_anchor(len(mus))]
    reach = max(abs(high - anchor), abs(low - anchor))
    return reach * reach / (2 * soft_sigmas[0] ** 2) < -EXP_FLOOR


#: log2(e): every exponential on the CPU path is a power of 2 (``torch.exp2``), its exponent scaled by this constant
#: (measured, AVX512 EPYC, one thread, 435,000 floats: exp 0.54 ms, exp2 0.16 ms)
LOG2E = 1.0 / math.log(2.0)


def kernel_ladder(s: torch.Tensor, mus: Sequence[float], sigmas: Sequence[float],
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """(K, N, Lq) kernel values exp(-(s - mu_k)^2 / (2 sigma_k^2)) of similarities ``s`` (N, Lq), K-NRM eq. 3 with
    two exponentials and one reciprocal per similarity instead of K exponentials (when :func:`ladder_applies`;
    unitless, in [0, 1], 1 = at the centre), laid out kernel by kernel: each kernel's values are one contiguous
    (N, Lq) block.

    The first kernel (the exact-match one) is one exponential, its exponent floored at :data:`EXP_FLOOR`. The soft
    kernels have centres mu_{j+1} = mu_j - delta and one width sigma, so (s - mu_{j+1})^2 = (s - mu_j)^2
    + 2 delta (s - mu_j) + delta^2 and each kernel is its neighbour times a ratio: v_{j+1} = v_j r_j with
    r_j = exp(-delta (s - mu_j) / sigma^2 - delta^2 / (2 sigma^2)) and r_{j+1} = r_j exp(-delta^2 / sigma^2); the
    same holds upwards with u_j = exp(delta (s - mu_j) / sigma^2 - delta^2 / (2 sigma^2)) = exp(-delta^2 / sigma^2)
    / r_j at the anchor. The ladder starts at the middle soft kernel (one exponential), climbs down by r (one
    exponential) and up by u (a reciprocal of r). Every exponential is computed as exp2 of the exponent times
    log2(e) (:data:`LOG2E`). The values equal the per-kernel exps up to a relative 3e-5 (a rung's ratio carries the
    rounding of an exponent of up to 60). Values far in a Gaussian's tail leave float32's normal range (below
    1.2e-38) as the rungs shrink them, where they vanish in the soft-TF sums as the floored ones do.
    ``out``: a buffer of at least K * N * Lq floats to write into (its start is returned, viewed (K, N, Lq))."""
    n, lq = s.shape
    count = len(mus)
    k = s.new_empty(count, n, lq) if out is None else out[: count * n * lq].view(count, n, lq)
    x = s - mus[0]
    torch.exp2(x.mul_(x).mul_(-LOG2E / (2 * sigmas[0] ** 2)).clamp_(min=EXP_FLOOR * LOG2E), out=k[0])
    anchor = ladder_anchor(count)
    var, delta = sigmas[1] ** 2, (mus[1] - mus[count - 1]) / (count - 2)
    y = s - mus[anchor]
    torch.exp2(torch.mul(y, y).mul_(-LOG2E / (2 * var)), out=k[anchor])
    shrink = math.exp(-delta * delta / var)
    down = y.mul_(-delta * LOG2E / var).sub_(delta * delta * LOG2E / (2 * var)).exp2_()
    up = torch.reciprocal(down).mul_(shrink)
    for j in range(anchor + 1, count):  # towards smaller centres
        torch.mul(k[j - 1], down, out=k[j])
        if j + 1 < count:
            down.mul_(shrink)
    for j in range(anchor - 1, 0, -1):  # towards larger centres
        torch.mul(k[j + 1], up, out=k[j])
        if j > 1:
            up.mul_(shrink)
    return k


@contextlib.contextmanager
def flushed_denormals() -> Iterator[None]:
    """Float32 results below 1.2e-38 flushed to 0 on this thread (x86 FTZ/DAZ) inside the block, then not.

    The kernel ladder's far rungs and their gradients fall below float32's normal range, where each multiply takes
    about twice as long (measured, AVX512 EPYC: 5.5 against 2.8 us per 38,400 products); such values vanish in the
    soft-TF sums whether they are tiny or 0. Torch exposes no getter, so the block ends with flushing off (torch's
    default)."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def kernel_sums(soft: torch.Tensor, pair: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Add each row's kernel values into its pair's soft-TF: ``soft`` (K, B, Lq) += the rows of ``values``
    (K, N, Lq, contiguous) of pair ``pair[n]``, as one sum over the (K * N) rows into the (K * B) rows (measured,
    one thread, 2,300 rows x 189 positions x 11 kernels: 1.2 ms, against 2.6 ms as one sum along the middle axis)."""
    count, batch, lq = soft.shape
    at = (pair[None, :] + torch.arange(count, device=pair.device)[:, None] * batch).reshape(-1)
    soft.view(count * batch, lq).index_add_(0, at, values.reshape(-1, lq))
    return soft


class RowKernelSum(torch.autograd.Function):
    """Soft-TF (B, K, Lq) of match rows ``rows`` (N, Lq), one per document token, row n of pair ``pair[n]``:
    out[b, k, i] = sum over the rows n of pair b of exp(-(rows[n, i] - mu_k)^2 / (2 sigma_k^2)).

    Kernel values in a (K, N, Lq) layout, one contiguous block per kernel, by :func:`kernel_ladder` when
    :func:`ladder_applies` (K-NRM's kernels on cosine matches), else by one exp per kernel with the operations of
    :func:`kernel_pooling_dense` (the same bits, but for exponents below :data:`EXP_FLOOR`). The sums over a pair's
    rows run kernel-major too, and the result is returned as a (B, K, Lq) view. The backward pass is written out:
    d value / d s = value * (mu_k - s) / sigma_k^2, so the gradient is R1 - s R0 with R0 = sum_k g_k v_k / sigma_k^2
    and R1 = sum_k g_k v_k mu_k / sigma_k^2 over the soft kernels (one (2, K) @ (K, N * Lq) product: the
    kernel-major layout makes it one matrix product instead of N small ones) plus the exact-match kernel's term,
    kept apart (its 1 / sigma^2 = 1e6 would cancel). ``mus`` and ``sigmas`` are constants here (no gradient).
    Denormal results are flushed (:func:`flushed_denormals`).
    """

    #: kernel values a scoring pass computes at once (a chunk of rows: 8 MB in float32), in one reused buffer. A
    #: whole scoring batch's would be 60 MB, freshly allocated per batch, and the page faults of first touching it
    #: cost more than the arithmetic (measured: a scoring batch's ladder 3.7 ms in a warm buffer, 10-14 ms in a
    #: fresh one); smaller chunks cost more calls (each chunk is about 20 operations)
    CHUNK = 1 << 21

    @staticmethod
    def forward(ctx, rows: torch.Tensor, pair: torch.Tensor, batch: int, mus: torch.Tensor,
                sigmas: torch.Tensor) -> torch.Tensor:
        n, lq = rows.shape
        count = mus.shape[0]
        soft = rows.new_zeros(count, batch, lq)  # (K, B, Lq)
        with flushed_denormals():
            mu, sigma = mus.tolist(), sigmas.tolist()
            low, high = rows.aminmax() if n else (torch.tensor(0.0), torch.tensor(0.0))
            ladder = ladder_applies(mu, sigma, float(low), float(high))

            def values(part: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
                if ladder:
                    return kernel_ladder(part, mu, sigma, out=out)
                x = torch.sub(part[None, :, :], mus[:, None, None],
                              out=None if out is None else out[: count * part.numel()].view(count, *part.shape))
                # exp(-((s - mu) ** 2) / (2 sigma^2)) with the exponent floored at EXP_FLOOR (see there)
                return x.mul_(x).div_(-(2 * sigmas**2)[:, None, None]).clamp_(min=EXP_FLOOR).exp_()

            if ctx.needs_input_grad[0]:
                # at once, kept for the backward pass (measured: a training step 38-39 ms at once, 43-44 ms in
                # chunks of fresh memory)
                k = values(rows)
                kernel_sums(soft, pair, k)
                ctx.save_for_backward(rows, pair, k, mus, sigmas)
                return soft.permute(1, 0, 2)
            # no backward pass will read the values: in chunks of one reused buffer
            step = max(1, RowKernelSum.CHUNK // (count * lq))
            buffer = rows.new_empty(count * min(step, n) * lq)
            for at in range(0, n, step):
                kernel_sums(soft, pair[at : at + step], values(rows[at : at + step], buffer))
        return soft.permute(1, 0, 2)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        rows, pair, k, mus, sigmas = ctx.saved_tensors
        count, n, lq = k.shape
        with flushed_denormals():
            # (K, N, Lq): d loss / d kernel value (from a contiguous copy: 1.3 against 2.3 ms from the permuted view)
            g = grad.permute(1, 0, 2).contiguous().index_select(1, pair)
            g.mul_(k)
            inv = 1 / sigmas**2
            weights = torch.stack([inv, mus * inv])
            weights[:, 0] = 0  # the exact-match kernel apart
            r = torch.mm(weights.to(g.dtype), g.view(count, n * lq)).view(2, n, lq)
            grad_rows = r[1].sub_(r[0].mul_(rows))
            grad_rows.addcmul_(g[0], (rows - mus[0]).mul_(-inv[0]))
        return grad_rows, None, None, None, None

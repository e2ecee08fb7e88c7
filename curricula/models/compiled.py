"""The compiled CPU passes of ConvKNRM: K-NRM's kernel sums alone (``architecture.compiled_pooling: true``), or every
pass written here (``architecture.compiled: true``): the n-gram vectors at token windows, the kernel sums and K-NRM
eq. 4's logs summed over each query n-gram's positions.

The kernel sums: the kernel values of every match row and their sums over a pair's rows in one pass
(``csrc/kernel_pooling.c``), where the torch path (:class:`curricula.models.kernel_pooling.RowKernelSum`) makes about
twenty passes over a (K, N, Lq) tensor of kernel values and keeps it for the backward pass. Forward and backward are
written out; the backward pass computes the kernel values again instead of keeping them.

The window vectors: each window's convolution (the sum of its tap-table rows), ReLU and L2 normalisation in one pass
per window (``csrc/window_vectors.c``), where torch's path (:func:`curricula.models.packed.window_vectors`) makes about
five passes over the (windows, C) vectors forward and ten backward; the backward pass adds each window's gradient
into its table rows in the same pass.

The pooled logs (eq. 4): 0.01 log(max(soft-TF, 1e-10)) at the valid query positions summed per query n-gram, from the
kernel sums' (K, sides * B, Lq) layout straight to the (B, query n-grams, sides, K) features in one pass, with a log
polynomial of its own (Cephes' logf), where torch's path (:meth:`curricula.models.convknrm.ConvKNRMModule.pooled_logs`)
makes a clamp, a log, two products, a batched product with a position indicator and a copy, each with its backward.

The C sources are built at first use with the machine's C compiler (``$CC``, else ``cc``) into a shared library under
the user's cache (``$XDG_CACHE_HOME/curricula/kernels``, else ``~/.cache/curricula/kernels``; ``CURRICULA_KERNEL_CACHE``
overrides), named by a digest of the source, the flags, the compiler's version and the CPU's architecture and
instruction-set flags (``-march=native`` code may not run on another CPU of a cluster sharing the home folder), and
loaded with ctypes. It is compiled with ``-O3 -march=native -ffp-contract=off`` and no fast-math, its exponential a
polynomial of its own, so its element-wise arithmetic (no sums reordered, no fused multiply-adds) gives the same bits
whatever the vector width. It runs on the calling thread (no intra-op threads: the training jobs run on one thread
each). Its values equal the torch path's up to float round-off (another exponential and another order of the sums
over a pair's rows), so a run with it is another arithmetic: the knob is in the run's params and digest.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import torch

from curricula.models.kernel_pooling import RowKernelSum, flushed_denormals, ladder_applies
from curricula.models.packed import Windows, window_vectors
from curricula.plumbing.provenance import cpu_info

#: the C sources, built into one library
SOURCES = tuple(Path(__file__).with_name("csrc") / name for name in ("kernel_pooling.c", "window_vectors.c"))
#: the compiler flags: vectorised for this CPU, IEEE element-wise arithmetic (no contraction into FMAs, no fast-math)
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-std=c99")
#: the most kernels the C code holds per block (its value buffer)
MAX_KERNELS = 64
#: the most channels of a window vector, or query positions of a soft-TF row, the C code holds (its buffers)
MAX_CHANNELS = 4096


class CompiledKernelError(RuntimeError):
    """The compiled kernel sums cannot be built or used here; the message names the fix."""


def cache_folder() -> Path:
    """Where built libraries are kept: ``$CURRICULA_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/curricula/kernels``,
    else ``~/.cache/curricula/kernels``."""
    if os.environ.get("CURRICULA_KERNEL_CACHE"):
        return Path(os.environ["CURRICULA_KERNEL_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "curricula" / "kernels"


def compiler() -> tuple[str, str]:
    """(path, first line of ``--version``) of the C compiler, ``$CC`` or ``cc``; CompiledKernelError naming the fix
    when there is none."""
    name = os.environ.get("CC", "cc")
    path = shutil.which(name)
    if path is None:
        raise CompiledKernelError(f"architecture.compiled and compiled_pooling need a C compiler and found no {name!r} "
                                  "on PATH: install gcc (or set CC), or leave compiled and compiled_pooling unset")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    return path, (version.splitlines() or ["unknown"])[0]


def build(folder: Path | None = None) -> Path:
    """The shared library of :data:`SOURCES` built for this machine, compiled once into ``folder`` (default
    :func:`cache_folder`) under a digest of the source, flags, compiler version and CPU (architecture and
    /proc/cpuinfo's flags), written atomically."""
    path, version = compiler()
    machine = f"{platform.machine()} {' '.join(sorted(cpu_info().get('flags', '').split()))}"
    parts = [*(source.read_bytes() for source in SOURCES), " ".join(FLAGS).encode(), version.encode(), machine.encode()]
    key = hashlib.sha256(b"\n".join(parts)).hexdigest()[:16]
    folder = cache_folder() if folder is None else folder
    target = folder / f"kernel_pooling-{key}.so"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        built = Path(tmp) / target.name
        out = subprocess.run([path, *FLAGS, *map(str, SOURCES), "-o", str(built)], capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            raise CompiledKernelError(f"compiling {', '.join(map(str, SOURCES))} with {path} failed ({version}): "
                                      f"{out.stderr[-1500:]}; leave architecture.compiled_pooling and compiled "
                                      "unset to use the torch path")
        os.replace(built, target)
    return target


@cache
def library() -> ctypes.CDLL:
    """The loaded library (built first if need be), its functions typed."""
    lib = ctypes.CDLL(str(build()))
    ptr, n = ctypes.c_void_p, ctypes.c_int64
    lib.row_kernel_sum_forward.argtypes = [ptr, ptr, n, n, n, ptr, ptr, n, ptr]
    lib.row_kernel_sum_forward.restype = None
    lib.row_kernel_sum_backward.argtypes = [ptr, ptr, n, n, n, ptr, ptr, n, ptr, ptr]
    lib.row_kernel_sum_backward.restype = None
    lib.window_vectors_forward.argtypes = [ptr, ptr, n, n, n, n, ctypes.c_float, ptr, ptr]
    lib.window_vectors_forward.restype = None
    lib.window_vectors_backward.argtypes = [ptr, n, n, n, n, ctypes.c_float, ptr, ptr, ptr, ptr]
    lib.window_vectors_backward.restype = None
    lib.pooled_logs_forward.argtypes = [ptr, ptr, n, n, n, n, ptr, n, ptr]
    lib.pooled_logs_forward.restype = None
    lib.pooled_logs_backward.argtypes = [ptr, ptr, n, n, n, n, ptr, n, ptr, ptr]
    lib.pooled_logs_backward.restype = None
    return lib


def compiled_applies(rows: torch.Tensor, mus: torch.Tensor, sigmas: torch.Tensor) -> bool:
    """Whether the compiled path computes these kernel sums: float32 rows on the CPU, constant kernels (no
    gradient), at most :data:`MAX_KERNELS`, and K-NRM's ladder applicable to the rows' range
    (:func:`~curricula.models.kernel_pooling.ladder_applies`)."""
    if rows.device.type != "cpu" or rows.dtype != torch.float32 or mus.requires_grad or sigmas.requires_grad:
        return False
    if not 3 <= mus.shape[0] <= MAX_KERNELS:
        return False
    low, high = (float(v) for v in rows.detach().aminmax()) if rows.numel() else (0.0, 0.0)
    return ladder_applies(mus.tolist(), sigmas.tolist(), low, high)


def _args(rows: torch.Tensor, pair: torch.Tensor, batch: int, mus: torch.Tensor, sigmas: torch.Tensor) -> list:
    return [rows.data_ptr(), pair.data_ptr(), rows.shape[0], rows.shape[1], batch, mus.data_ptr(), sigmas.data_ptr(),
            mus.shape[0]]


class CompiledRowKernelSum(torch.autograd.Function):
    """:class:`~curricula.models.kernel_pooling.RowKernelSum` by the compiled pass: soft-TF (B, K, Lq) of match rows
    ``rows`` (N, Lq), row n of pair ``pair[n]``; the caller checks :func:`compiled_applies`. Keeps only the rows and
    pairs for the backward pass, which computes the kernel values again."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, pair: torch.Tensor, batch: int, mus: torch.Tensor,
                sigmas: torch.Tensor) -> torch.Tensor:
        rows, pair = rows.contiguous(), pair.contiguous().to(torch.int64)
        mus, sigmas = mus.contiguous().float(), sigmas.contiguous().float()
        soft = rows.new_zeros(mus.shape[0], batch, rows.shape[1])  # (K, B, Lq)
        if rows.shape[0]:
            with flushed_denormals():
                library().row_kernel_sum_forward(*_args(rows, pair, batch, mus, sigmas), soft.data_ptr())
        ctx.batch = batch
        ctx.save_for_backward(rows, pair, mus, sigmas)
        return soft.permute(1, 0, 2)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        rows, pair, mus, sigmas = ctx.saved_tensors
        g = grad.permute(1, 0, 2).contiguous().float()  # (K, B, Lq)
        grad_rows = torch.empty_like(rows)
        if rows.shape[0]:
            with flushed_denormals():
                library().row_kernel_sum_backward(*_args(rows, pair, ctx.batch, mus, sigmas), g.data_ptr(),
                                                  grad_rows.data_ptr())
        return grad_rows, None, None, None, None


def row_kernel_sum(rows: torch.Tensor, pair: torch.Tensor, batch: int, mus: torch.Tensor, sigmas: torch.Tensor,
                   compiled: bool = False) -> torch.Tensor:
    """Soft-TF (B, K, Lq) of match rows by the compiled pass when ``compiled`` and it applies
    (:func:`compiled_applies`), else by the torch path (:class:`~curricula.models.kernel_pooling.RowKernelSum`)."""
    if compiled and compiled_applies(rows, mus, sigmas):
        return CompiledRowKernelSum.apply(rows, pair, batch, mus, sigmas)
    return RowKernelSum.apply(rows, pair, batch, mus, sigmas)


class CompiledWindowVectors(torch.autograd.Function):
    """:func:`curricula.models.packed.window_vectors` by the compiled pass: (n, C) unit vectors ReLU(v) / max(|ReLU(v)|,
    eps) of each window's convolution v, the sum of its tap-table rows (``index`` (columns, n); rows equal to
    ``zero_row`` skipped), eps = 1e-12 as in ``F.normalize``. Keeps the vectors and their norms for the backward pass,
    which adds each window's gradient into its table rows, window by window."""

    EPS = 1e-12

    @staticmethod
    def forward(ctx, table: torch.Tensor, index: torch.Tensor, zero_row: int) -> torch.Tensor:
        table, index = table.contiguous(), index.contiguous().to(torch.int64)
        columns, n = index.shape
        out = table.new_empty(n, table.shape[1])
        norms = table.new_empty(n)
        if n:
            library().window_vectors_forward(table.data_ptr(), index.data_ptr(), columns, n, table.shape[1], zero_row,
                                             CompiledWindowVectors.EPS, out.data_ptr(), norms.data_ptr())
        ctx.zero_row, ctx.rows = zero_row, table.shape[0]
        ctx.save_for_backward(index, out, norms)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        index, out, norms = ctx.saved_tensors
        grad = grad.contiguous().float()
        grad_table = grad.new_zeros(ctx.rows, out.shape[1])
        if out.shape[0]:
            library().window_vectors_backward(index.data_ptr(), index.shape[0], index.shape[1], out.shape[1],
                                              ctx.zero_row, CompiledWindowVectors.EPS, out.data_ptr(),
                                              norms.data_ptr(), grad.data_ptr(), grad_table.data_ptr())
        return grad_table, None, None


def unit_window_vectors(table: torch.Tensor, windows: Windows, zero_row: int, compiled: bool = False) -> torch.Tensor:
    """(n, C) the unit n-gram vectors of ``windows`` by the compiled pass when ``compiled`` and the table is float32
    on the CPU with at most :data:`MAX_CHANNELS` channels, else by torch's operations
    (:func:`~curricula.models.packed.window_vectors`); ``zero_row``: the table's row of zeros."""
    if compiled and table.device.type == "cpu" and table.dtype == torch.float32 and table.shape[1] <= MAX_CHANNELS:
        return CompiledWindowVectors.apply(table, windows.index.t(), zero_row)
    return window_vectors(table, windows)


class CompiledPooledLogs(torch.autograd.Function):
    """K-NRM eq. 4 by the compiled pass: (B, query n-grams * sides * K) features, laid out query n-gram, then document
    n-gram (side), then kernel, from the soft-TF ``soft`` (K, sides * B, Lq), row t * B + b, and the query positions'
    mask ``q_mask`` (B, Lq), whose positions are the query n-grams' side by side (``widths``, summing to Lq)."""

    @staticmethod
    def forward(ctx, soft: torch.Tensor, q_mask: torch.Tensor, widths: tuple[int, ...], batch: int) -> torch.Tensor:
        soft, q_mask = soft.contiguous(), q_mask.contiguous().float()
        count, rows, lq = soft.shape
        sides = rows // batch
        segments = torch.tensor(widths, dtype=torch.int64)
        out = soft.new_empty(batch, len(widths) * sides * count)
        library().pooled_logs_forward(soft.data_ptr(), q_mask.data_ptr(), count, sides, batch, lq,
                                      segments.data_ptr(), len(widths), out.data_ptr())
        ctx.batch = batch
        ctx.save_for_backward(soft, q_mask, segments)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        soft, q_mask, segments = ctx.saved_tensors
        count, rows, lq = soft.shape
        grad = grad.contiguous().float()
        grad_soft = torch.empty_like(soft)
        library().pooled_logs_backward(soft.data_ptr(), q_mask.data_ptr(), count, rows // ctx.batch, ctx.batch, lq,
                                       segments.data_ptr(), segments.numel(), grad.data_ptr(), grad_soft.data_ptr())
        return grad_soft, None, None, None


def pooled_logs_apply(soft: torch.Tensor, widths: Sequence[int]) -> bool:
    """Whether :class:`CompiledPooledLogs` computes eq. 4 of this soft-TF: float32 on the CPU, at most
    :data:`MAX_CHANNELS` query positions, the widths covering them."""
    return (soft.device.type == "cpu" and soft.dtype == torch.float32 and soft.shape[-1] <= MAX_CHANNELS
            and sum(widths) == soft.shape[-1])


__all__ = ["CompiledKernelError", "CompiledPooledLogs", "CompiledRowKernelSum", "CompiledWindowVectors", "FLAGS",
           "MAX_CHANNELS", "MAX_KERNELS", "SOURCES", "build", "cache_folder", "compiled_applies", "compiler", "library",
           "pooled_logs_apply", "row_kernel_sum", "unit_window_vectors"]

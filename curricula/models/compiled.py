"""The compiled CPU path of K-NRM's kernel sums (``architecture.compiled_pooling: true``, ConvKNRM): the kernel values
of every match row and their sums over a pair's rows in one pass (``csrc/kernel_pooling.c``), where the torch path
(:class:`curricula.models.kernel_pooling.RowKernelSum`) makes about twenty passes over a (K, N, Lq) tensor of kernel
values and keeps it for the backward pass. Forward and backward are written out; the backward pass computes the
kernel values again instead of keeping them.

The C source is built at first use with the machine's C compiler (``$CC``, else ``cc``) into a shared library under
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
from functools import cache
from pathlib import Path

import torch

from curricula.models.kernel_pooling import RowKernelSum, flushed_denormals, ladder_applies
from curricula.plumbing.provenance import cpu_info

SOURCE = Path(__file__).with_name("csrc") / "kernel_pooling.c"
#: the compiler flags: vectorised for this CPU, IEEE element-wise arithmetic (no contraction into FMAs, no fast-math)
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-std=c99")
#: the most kernels the C code holds per block (its value buffer)
MAX_KERNELS = 64


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
        raise CompiledKernelError(f"architecture.compiled_pooling needs a C compiler and found no {name!r} on PATH: "
                                  "install gcc (or set CC), or leave compiled_pooling unset")
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    return path, (version.splitlines() or ["unknown"])[0]


def build(folder: Path | None = None) -> Path:
    """The shared library of :data:`SOURCE` built for this machine, compiled once into ``folder`` (default
    :func:`cache_folder`) under a digest of the source, flags, compiler version and CPU (architecture and
    /proc/cpuinfo's flags), written atomically."""
    path, version = compiler()
    machine = f"{platform.machine()} {' '.join(sorted(cpu_info().get('flags', '').split()))}"
    key = hashlib.sha256(b"\n".join([SOURCE.read_bytes(), " ".join(FLAGS).encode(), version.encode(),
                                     machine.encode()])).hexdigest()[:16]
    folder = cache_folder() if folder is None else folder
    target = folder / f"kernel_pooling-{key}.so"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        built = Path(tmp) / target.name
        out = subprocess.run([path, *FLAGS, str(SOURCE), "-o", str(built)], capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            raise CompiledKernelError(f"compiling {SOURCE} with {path} failed ({version}): {out.stderr[-1500:]}; "
                                      "leave architecture.compiled_pooling unset to use the torch path")
        os.replace(built, target)
    return target


@cache
def library() -> ctypes.CDLL:
    """The loaded library (built first if need be), its two functions typed."""
    lib = ctypes.CDLL(str(build()))
    ptr, n = ctypes.c_void_p, ctypes.c_int64
    lib.row_kernel_sum_forward.argtypes = [ptr, ptr, n, n, n, ptr, ptr, n, ptr]
    lib.row_kernel_sum_forward.restype = None
    lib.row_kernel_sum_backward.argtypes = [ptr, ptr, n, n, n, ptr, ptr, n, ptr, ptr]
    lib.row_kernel_sum_backward.restype = None
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


__all__ = ["CompiledKernelError", "CompiledRowKernelSum", "FLAGS", "MAX_KERNELS", "SOURCE", "build", "cache_folder",
           "compiled_applies", "compiler", "library", "row_kernel_sum"]

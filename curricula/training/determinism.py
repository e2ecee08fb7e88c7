"""Reproducibility on a GPU: the one device's RNG state a checkpoint keeps, and the
arithmetic (device type and autocast dtype) a checkpoint records.

On the CPU a re-run or a killed-and-resumed run of a config ends with the same bytes as the first, uninterrupted
one (same machine class and threads; ``tests/test_workflow.py``, ``tests/test_train_runs.py``). On CUDA several kernels
do not (atomic adds in the backward of indexed gathers such as ConvKNRM's, the memory-efficient attention backward,
cuBLAS's split reductions): two runs of one config differ in their last bits, and a killed-and-resumed run ends with
other weights than an uninterrupted one. :func:`curricula.models.runtime.use_deterministic` (config ``deterministic:
true``, switched on at a job's start) trades speed for bit-identical re-runs there.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def device_rng_state(device: torch.device) -> torch.Tensor | None:
    """The RNG state a checkpoint keeps besides the CPU's: that of the CUDA card ``device`` (the module's) alone,
    one ByteTensor; None on the CPU (``torch.get_rng_state`` is the CPU's). One card's state, not every visible
    card's, so a checkpoint written where two GPUs were visible resumes where one is."""
    if device.type != "cuda":
        return None
    return torch.cuda.get_rng_state(device)


def restore_device_rng(device: torch.device, state: torch.Tensor | Sequence[torch.Tensor] | None) -> None:
    """Set the RNG of the CUDA card ``device`` from :func:`device_rng_state`'s ``state`` (nothing on the CPU or
    for None). A checkpoint of the earlier layout holds a list of every visible card's state (empty on a machine
    without CUDA): the entry of ``device``'s card is used when present."""
    if device.type != "cuda" or state is None:
        return
    if isinstance(state, (list, tuple)):
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index >= len(state):
            return
        state = state[index]
    torch.cuda.set_rng_state(state, device)


def arithmetic(device: torch.device | str, dtype: torch.dtype | None) -> dict[str, str]:
    """What a checkpoint records of how a run computes: the device type (``cpu`` / ``cuda``; not the card's index)
    and the autocast dtype there (the caller's :func:`curricula.models.hf.autocast_dtype` of its precision; None =
    no autocast, ``float32``), e.g. ``{"device": "cuda", "dtype": "bfloat16", "head": "float32"}`` (``head``, under
    autocast only: a cross-encoder's pooler and head run in fp32, :func:`curricula.models.heads.fp32_head`)
    (:class:`~curricula.training.checkpoints.Checkpointer` compares them on load)."""
    computes = {"device": torch.device(device).type, "dtype": str(dtype or torch.float32).removeprefix("torch.")}
    if dtype is not None:  # autocast: the heads run in fp32 (a checkpoint from bf16 heads does not resume here)
        computes["head"] = "float32"
    return computes

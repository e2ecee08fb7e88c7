"""Copies between the host and the device that do not make the host wait for the GPU.

* :func:`to_device` / :func:`batch_to_device`: a batch built on the host (token ids, masks, loss weights) goes to a
  CUDA device from page-locked (pinned) memory with a non-blocking copy, so the host goes on to the next batch
  while the copy runs; on the CPU it is ``tensor.to(device)`` as before (no copy at all).
* :func:`host_floats`: many one-element tensors (the per-step losses) to Python floats with one device-to-host
  copy, instead of a ``float(loss)`` per step that waits for the GPU to finish every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch


def to_device(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``tensor`` on ``device``. A host tensor bound for a CUDA device is pinned first and copied with
    ``non_blocking=True`` (the copy overlaps the host's work; the caching host allocator keeps the pinned block
    until the copy is done). Anything else is ``tensor.to(device)``: pinning needs CUDA (it fails on a CPU-only
    torch), and a CPU tensor on the CPU is returned as it is."""
    device = torch.device(device)
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def batch_to_device(batch: Mapping[str, torch.Tensor], device: torch.device | str) -> dict[str, torch.Tensor]:
    """Every tensor of a collated batch on ``device`` (:func:`to_device`)."""
    return {key: to_device(value, device) for key, value in batch.items()}


def host_floats(values: Sequence[torch.Tensor]) -> list[float]:
    """Python floats of one-element tensors (e.g. per-step losses), in order, with one device-to-host copy for all:
    each is exactly ``float(value)`` (a float32 or bfloat16 value widened to float64 is exact)."""
    if not values:
        return []
    return torch.stack([value.detach().reshape(()).to(torch.float64) for value in values]).tolist()

"""Variants timed in interleaved rounds, for the bench scripts that compare several ways of doing the same work in
one process (``bench_encode.py --batch-sizes``, ``bench_teacher_score.py --batch-sizes``).

Each round runs every variant once, and the order rotates from round to round, so a slow spell of a busy host falls
on every variant alike and their ratio holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def interleaved(variants: dict[str, Callable[[], Any]], repeat: int) -> tuple[dict, dict, dict]:
    """Each variant run ``repeat`` times in rounds whose order rotates; (wall seconds per variant, CPU seconds of
    this process per variant, last output each). On a busy host the CPU seconds of a one-thread run are the steadier
    figure: they leave out the time other processes held the core."""
    names, wall, cpu, outs = list(variants), {name: [] for name in variants}, {name: [] for name in variants}, {}
    for r in range(repeat):
        for name in names[r % len(names):] + names[: r % len(names)]:
            t0, c0 = time.perf_counter(), time.process_time()
            outs[name] = variants[name]()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return wall, cpu, outs

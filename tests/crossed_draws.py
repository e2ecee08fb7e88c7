"""Draws of the crossed seeds x queries random-effects model that the statistics tests share (tests/test_stats.py,
tests/test_error_rates.py, tests/test_report.py)."""

from __future__ import annotations

import numpy as np


def _crossed(rng: np.random.Generator, seeds: int, queries: int, mu: float, sd_seed: float, sd_query: float,
             sd_resid: float) -> np.ndarray:
    """Differences d[s, q] = mu + a_s + b_q + e_sq of the crossed random-effects model."""
    return (mu + rng.normal(0, sd_seed, (seeds, 1)) + rng.normal(0, sd_query, (1, queries))
            + rng.normal(0, sd_resid, (seeds, queries)))

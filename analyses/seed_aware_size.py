"""The seed-aware test's type-I error and power by simulation, against the two rules it replaced (issue 43).

    .venv/bin/python analyses/seed_aware_size.py [--draws 20000] [--seed 0]

Draws the grand mean and the three mean squares of a seeds x queries design of the crossed normal model
(:func:`curricula.statistics.seed_aware.simulate_mean_squares`) over a grid of true SDs (seed 0-0.05, query 0.01-0.1,
residual 0.1 and 0.25) at the test sizes the project uses (193, 300 and 1,500 test queries), and prints per number of
seeds the largest and the mean rejection rate at alpha 0.05 under the null, and the power at a true effect of 2.8
standard errors of the mean, of three rules:
- ``clipped + upper-limit df`` (:func:`curricula.statistics.seed_aware.mean_variance`, the test now);
- ``pretest`` (before issue 43: a seed component estimated at or below zero switched to MS_query with Q - 1 df);
- ``Satterthwaite`` (the unbiased MS_seed + MS_query - MS_resid with plain Satterthwaite df, no clipping).
The Monte-Carlo SE of one cell is sqrt(0.05 * 0.95 / draws) (0.0015 at 20,000 draws); the largest of the cells at a
true 5% lies about 3 SE above it (108 cells per number of seeds: 3 sizes x 2 residual SDs x 18).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import t as student_t

from curricula.statistics.seed_aware import rejection_rate, simulate_mean_squares

SEEDS = (2, 3, 4, 5, 7, 10, 20)
QUERIES = (193, 300, 1500)
SD_SEED = (0.0, 0.002, 0.005, 0.01, 0.02, 0.05)
SD_QUERY = (0.01, 0.03, 0.1)
SD_RESID = (0.1, 0.25)


def _rate(mean, scaled, df, seeds, queries) -> float:
    return float(np.mean(2 * student_t.sf(np.abs(mean) / np.sqrt(scaled / (seeds * queries)), df) < 0.05))


def pretest(mean, ms_s, ms_q, ms_r, seeds, queries) -> float:
    dfs, dfq, dfr = seeds - 1, queries - 1, (seeds - 1) * (queries - 1)
    total = ms_s + ms_q - ms_r
    ok = ms_s >= ms_r
    df = np.where(ok, total ** 2 / (ms_s ** 2 / dfs + ms_q ** 2 / dfq + ms_r ** 2 / dfr), dfq)
    return _rate(mean, np.where(ok, total, ms_q), df, seeds, queries)


def satterthwaite(mean, ms_s, ms_q, ms_r, seeds, queries) -> float:
    dfs, dfq, dfr = seeds - 1, queries - 1, (seeds - 1) * (queries - 1)
    total = ms_s + ms_q - ms_r
    df = total ** 2 / (ms_s ** 2 / dfs + ms_q ** 2 / dfq + ms_r ** 2 / dfr)
    return _rate(mean, np.where(total > 0, total, ms_r), np.where(total > 0, df, dfr), seeds, queries)


RULES = {"clipped + upper-limit df": rejection_rate, "pretest": pretest, "Satterthwaite": satterthwaite}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.draws:,} draws per cell; alpha 0.05; power at a true effect of 2.8 SE (seed SD 0.02, query SD 0.03)")
    print("\n| seeds | " + " | ".join(f"{r}: type-I max (mean) | power" for r in RULES) + " |")
    print("|---|" + "---|---|" * len(RULES))
    for seeds in SEEDS:
        null = {r: [] for r in RULES}
        power = {r: [] for r in RULES}
        for queries in QUERIES:
            for sd_resid in SD_RESID:
                for sd_seed in SD_SEED:
                    for sd_query in SD_QUERY:
                        sample = simulate_mean_squares(rng, seeds, queries, sd_seed, sd_query, sd_resid, args.draws)
                        for name, rule in RULES.items():
                            null[name].append(rule(*sample[:4], seeds, queries))
                mean, *ms, sd_mean = simulate_mean_squares(rng, seeds, queries, 0.02, 0.03, sd_resid, args.draws)
                for name, rule in RULES.items():
                    power[name].append(rule(mean + 2.8 * sd_mean, *ms, seeds, queries))
        print(f"| {seeds} | " + " | ".join(
            f"{100 * max(null[r]):.1f}% ({100 * np.mean(null[r]):.1f}%) | {np.mean(power[r]):.2f}" for r in RULES)
            + " |")


if __name__ == "__main__":
    main()

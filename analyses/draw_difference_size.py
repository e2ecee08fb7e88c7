"""The draw-difference test's error rate by simulation, at the sizes a replication compares two draws at.

    .venv/bin/python analyses/draw_difference_size.py [--draws 100000] [--seed 0]

Two independent draws of one comparison with the same true effect (0.02): for each, the grand mean and the three
mean squares of a seeds x queries design of the crossed normal model
turned into the seed-aware mean's variance and df, the two compared as
:func:`curricula.statistics.seed_aware.draw_difference_test` compares two findings
(:func:`curricula.statistics.seed_aware.draw_difference_rejection_rate`). Prints, per pair of seed counts
and number of test queries, the smallest and largest rejection rate at alpha 0.05 over the grid of true SDs (seed
0-0.03, query 0-0.03, residual 0.1 and 0.3) and the largest where the seed SD is 0. The Monte-Carlo SE of one
cell is sqrt(0.05 * 0.95 / draws) (0.0007 at 100,000 draws).
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

from curricula.statistics.seed_aware import draw_difference_rejection_rate

SEED_PAIRS = ((5, 20), (10, 10), (15, 20), (20, 20))
QUERIES = (259, 360)
SD_SEED = (0.0, 0.01, 0.03)
SD_QUERY = (0.0, 0.03)
SD_RESID = (0.1, 0.3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print("| seeds | queries | smallest rate | largest rate | largest, seed SD 0 |")
    print("|---|---|---|---|---|")
    for seeds, queries in itertools.product(SEED_PAIRS, QUERIES):
        rates = {sds: draw_difference_rejection_rate(rng, seeds, queries, *sds, args.draws)
                 for sds in itertools.product(SD_SEED, SD_QUERY, SD_RESID)}
        null_seed = max(rate for sds, rate in rates.items() if sds[0] == 0)
        print(f"| {seeds[0]} and {seeds[1]} | {queries} | {min(rates.values()):.4f} | {max(rates.values()):.4f} | "
              f"{null_seed:.4f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

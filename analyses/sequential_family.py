"""Seeds in rounds over a study's whole family of cells (issue 45): the family-wise error of the sequential Holm
procedure that ``curricula.study.rounds`` judges a study's cells by, against a fixed Bonferroni split and no adjustment.

    .venv/bin/python analyses/sequential_family.py [--cells 36] [--alpha 0.045] [--draws 2000] [--queries 200]
        [--seed 0] [--thresholds student]

Simulates ``--cells`` independent cells of the crossed normal model
(:func:`analyses.sequential_simulation.simulate_family`: query SD 0.05, residual SD 0.25, looks at 5, 10, 15
and 20 seeds, O'Brien-Fleming spending) in the scenarios below and prints, per rule
(:data:`analyses.sequential_simulation.FAMILY_RULES`; ``holm`` is the one the rounds use), the family-wise
error (the share of families where any true null was rejected: a difference at a cell with no effect, or equivalence at
a cell at or beyond its margin), the cells decided, the power on the cells with an effect and the seeds a cell trains on
average. The defaults are the study's: 9 sequential claims on 4 datasets (36 cells, 72 hypotheses) at alpha 0.05 times 9
/ 10 (the active-learning claim keeps its tenth; :func:`curricula.study.rounds.family_alpha`). Effects and the margin
are shares of a 0.5 AP baseline; the margin is the study's 2% (0.01 AP) unless a scenario says otherwise. The
Monte-Carlo SE of a rate near 5% is 0.49 points at 2,000 families.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from curricula.statistics.group_sequential import LOOKS
from sequential_simulation import FAMILY_RULES, SimulatedCell, simulate_family

BASELINE = 0.5
SD_QUERY, SD_RESID = 0.05, 0.25


def scenarios(cells: int, queries: int) -> list[tuple[str, float, list[SimulatedCell]]]:
    """(name, the null cells' seed SD, the cells)."""
    half = cells // 2

    def like(mu: float, sd_seed: float, margin: float = 0.01) -> SimulatedCell:
        return SimulatedCell(mu, sd_seed, SD_QUERY, SD_RESID, queries, margin)

    precise = SimulatedCell(0.04, 0.002, SD_QUERY, 0.1, 400, 0.08)  # both hypotheses rejected: no true null
    return [
        ("no effect anywhere, margin 2%", 0.02, [like(0.0, 0.02)] * cells),
        ("no effect anywhere, margin 6% (equivalence shown)", 0.01, [like(0.0, 0.01, 0.03)] * cells),
        ("every effect at the margin (2%)", 0.015, [like(0.01, 0.015)] * cells),
        ("half no effect, half 5%", 0.02, [like(0.0, 0.02)] * (cells - half) + [like(0.025, 0.02)] * half),
        ("half no effect, half 10%", 0.02, [like(0.0, 0.02)] * (cells - half) + [like(0.05, 0.02)] * half),
        ("half no effect (margin 0.4%, never equivalent), half 8% inside a 16% margin, precisely (Holm's worst case)",
         0.02, [like(0.0, 0.02, 0.002)] * (cells - half) + [precise] * half),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=36)
    parser.add_argument("--alpha", type=float, default=0.045)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--thresholds", default="student", choices=("student", "normal"))
    args = parser.parse_args()
    se = math.sqrt(0.05 * 0.95 / args.draws)
    print(f"{args.cells} cells ({2 * args.cells} hypotheses), alpha {args.alpha:g}, looks {list(LOOKS)}, "
          f"{args.draws:,} families a row, {args.queries} queries, {args.thresholds} thresholds; MC SE near 5%: "
          f"{100 * se:.2f} points\n")
    print("| scenario | seed SD | rule | family-wise error | cells decided | power (cells with an effect) "
          "| seeds a cell |")
    print("|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    for s, (name, sd_seed, cells) in enumerate(scenarios(args.cells, args.queries)):
        for rule in FAMILY_RULES:
            result = simulate_family(np.random.default_rng(args.seed + s), LOOKS, cells, args.draws, alpha=args.alpha,
                                     rule=rule, thresholds=args.thresholds)
            real = [r for r, cell in zip(result.rejection, cells) if cell.mu != 0]
            power = f"{100 * float(np.mean(real)):.1f}%" if real else "–"
            print(f"| {name} | {sd_seed:g} | {rule} | {100 * result.fwer:.1f}% | {result.decided:.1f} of "
                  f"{args.cells} | {power} | {result.mean_seeds:.1f} |", flush=True)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

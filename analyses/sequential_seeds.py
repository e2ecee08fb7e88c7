"""Adding seeds in rounds (issue 45, item 4): the sequential seed-aware rule's error rates and the seeds it saves.

    .venv/bin/python analyses/sequential_seeds.py [--draws 10000] [--queries 200] [--seed 0]
        [--tables boundaries,cost,calibration] [--calibration-sds 0,0.01,0.02,0.03,0.05,0.1]

Simulates whole seeds x queries matrices of the crossed normal model
(:func:`analyses.sequential_simulation.simulate_sequential`: query SD 0.05, residual SD 0.25, ``--queries``
test queries, looks at 5, 10, 15 and 20 seeds) and prints
1. the boundaries: per look the nominal p thresholds of normal theory
   (:func:`curricula.statistics.group_sequential.spending_boundaries`) and of the exact t-test of the seed means
   (:func:`curricula.statistics.group_sequential.student_boundaries`, the ones used);
2. per seed SD (0.015, 0.02, 0.03) and true effect (0, 1%, 2%, 3%, and 5% and 10% of 0.5 AP) with the equivalence
   margin at 2% of 0.5 AP (0.01): the share of cells called a difference (type-I error at effect 0, power otherwise)
   and called equivalent (including ', below the margin'), sequentially and by a fixed design of 20 seeds on the same
   draws (and by the first look's 5 seeds alone), the expected seeds per cell and the saving against 20;
3. the calibration: the type-I error of the difference test alone (no equivalence stopping, its worst case) over
   seed SDs 0-0.1 (``--calibration-sds``) for the thresholds used, normal-theory thresholds on the seed-aware p,
   normal boundaries on |t| with the df ignored, and p < 0.05 at every look. The rules of a row share their draws
   (common random numbers), so their differences are measured more precisely than each rate.
The Monte-Carlo SE of a rate near 5% is sqrt(0.05 * 0.95 / draws): 0.0022 at 10,000 draws.
"""

from __future__ import annotations

import argparse

import numpy as np

from curricula.statistics.group_sequential import (
    LOOKS,
    SequentialDesign,
    sequential_design,
    spending_boundaries,
    student_boundaries,
)
from sequential_simulation import simulate_sequential

BASELINE = 0.5  # AP of the baseline: effects and the margin are relative to it
EFFECTS = (0.0, 0.01, 0.02, 0.03, 0.05, 0.1)
SD_SEED = (0.015, 0.02, 0.03)
SD_QUERY, SD_RESID, MARGIN = 0.05, 0.25, 0.02
KINDS = {"obrien_fleming": "O'Brien-Fleming", "pocock": "Pocock"}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def boundaries() -> None:
    print("\n## Nominal p thresholds per look (alpha 0.05; difference two-sided, equivalence one-sided per test)\n")
    print("| spending | test | thresholds | " + " | ".join(f"{s} seeds" for s in LOOKS) + " |")
    print("|---|---|---|" + "---|" * len(LOOKS))
    for kind, name in KINDS.items():
        for sides, test in ((2, "difference"), (1, "equivalence")):
            for label, rule in (("normal theory", spending_boundaries), ("exact t (used)", student_boundaries)):
                print(f"| {name} | {test} | {label} | " + " | ".join(f"{p:.5f}" for p in rule(LOOKS, 0.05, kind, sides))
                      + " |")


def cost(draws: int, queries: int, seed: int) -> None:
    print(f"\n## Sequential (looks {', '.join(map(str, LOOKS))}) against a fixed design of {LOOKS[-1]} seeds; "
          f"{queries} queries, margin {MARGIN:.0%} of {BASELINE} AP\n")
    print("| spending | seed SD | true effect | difference called: sequential | fixed 20 | first look (5) "
          "| equivalent: sequential | fixed 20 | E[seeds] | saving | stopped at 5 / 10 / 15 / 20 | undecided |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind, name in KINDS.items():
        for i, sd_seed in enumerate(SD_SEED):
            for j, effect in enumerate(EFFECTS):
                r = simulate_sequential(np.random.default_rng([seed, i, j]), LOOKS, queries, sd_seed, SD_QUERY,
                                        SD_RESID, effect * BASELINE, draws, margin=MARGIN * BASELINE, kind=kind)
                stops = " / ".join(_pct(x) for x in r.stops)
                print(f"| {name} | {sd_seed} | {effect:.0%} | {_pct(r.rejection)} | {_pct(r.fixed_rejection)} | "
                      f"{_pct(r.first_look_rejection)} | {_pct(r.equivalence)} | {_pct(r.fixed_equivalence)} | "
                      f"{r.mean_seeds:.1f} | {_pct(1 - r.mean_seeds / LOOKS[-1])} | {stops} | {_pct(r.inconclusive)} |")


def calibration(draws: int, queries: int, seed: int, sd_seeds: list[float]) -> None:
    naive = SequentialDesign(LOOKS, 0.05, "p < 0.05 at every look", (0.05,) * len(LOOKS), (0.05,) * len(LOOKS))
    rules = {}
    for kind, name in KINDS.items():
        rules[f"{name}: exact t (used)"] = dict(design=sequential_design(LOOKS, 0.05, kind, "student"))
        rules[f"{name}: normal on p"] = dict(design=sequential_design(LOOKS, 0.05, kind, "normal"))
        rules[f"{name}: normal on abs(t), df ignored"] = dict(design=sequential_design(LOOKS, 0.05, kind, "normal"),
                                                               calibration="z")
    rules["p < 0.05 at every look"] = dict(design=naive)
    print(f"\n## Type-I error across the looks, difference test alone; {queries} queries, {draws:,} draws a cell\n")
    print("| seed SD | " + " | ".join(rules) + " | fixed 20 seeds |")
    print("|---|" + "---|" * (len(rules) + 1))
    for i, sd_seed in enumerate(sd_seeds):
        rates, fixed = [], 0.0
        for rule in rules.values():
            r = simulate_sequential(np.random.default_rng([seed, 100, i]), LOOKS, queries, sd_seed, SD_QUERY,
                                    SD_RESID, 0.0, draws, margin=None, **rule)
            rates.append(r.rejection)
            fixed = r.fixed_rejection
        print(f"| {sd_seed} | " + " | ".join(_pct(x) for x in rates) + f" | {_pct(fixed)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tables", default="boundaries,cost,calibration", help="which tables, comma-separated")
    parser.add_argument("--calibration-sds", default="0,0.01,0.02,0.03,0.05,0.1",
                        help="seed SDs of the calibration table, comma-separated")
    args = parser.parse_args()
    tables = args.tables.split(",")
    print(f"{args.draws:,} simulated cells per row; query SD {SD_QUERY}, residual SD {SD_RESID}; alpha 0.05; "
          f"Monte-Carlo SE of a 5% rate {np.sqrt(0.05 * 0.95 / args.draws):.4f}")
    if "boundaries" in tables:
        boundaries()
    if "cost" in tables:
        cost(args.draws, args.queries, args.seed)
    if "calibration" in tables:
        calibration(args.draws, args.queries, args.seed, [float(x) for x in args.calibration_sds.split(",")])


if __name__ == "__main__":
    main()

"""Old against new verdicts of the study: a quoted verdict table (one row per claim, one column per dataset, cells
like ``inconclusive (−1.6%)``) against a new findings table (``results/report/study/findings.csv``).

    .venv/bin/python bench/verdict_changes.py <(git show b6b558d:README.md) <study>/results/report/study/findings.csv

The page to read is one that quotes the old study: the earlier 3-seed table is read from the README of a commit
before 14b88c0 (b6b558d), since which the 5-seed study is quoted instead; that one is now on docs/findings.md (its
first ``| paper | claim |`` table), the page to pass when a later study is compared with it. This module's changed
verdicts of 14b88c0 are on docs/findings.md too (History).

Prints a Markdown table, one row per (claim, dataset): the old verdict and effect, the new verdict and effect, the
per-query p and the seed-aware p of the new run, the verdict the old rule would give on the new run (``old rule``),
whether the verdict changed, and which of the two changes moved it (``cause``). Claims are matched on their text.

The old rule is the one the old 3-seed table was judged by: a per-query paired t-test on seed-averaged values, and
"inconclusive" when |effect| < its MDE (alpha 0.05, power 0.8), i.e. when |t| < t_{0.975, n-1} + t_{0.8, n-1}; the
sign of the effect decides otherwise. It needs only the effect, the per-query p and the number of queries, all in
the findings table. So for a changed verdict:

- ``training``: the old rule on the new run already gives the new verdict; the run (the faithful protocol, the
  seeds) moved the effect, not the statistics;
- ``statistics``: the old rule on the new run still gives the old verdict; the seed-aware test, the equivalence test
  or the p < 0.05 rule moved it;
- ``both``: the old rule on the new run gives a third verdict.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import polars as pl
from scipy.stats import t as student_t

from curricula.statistics.stats import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, power_factor

CELL = re.compile(r"^(?P<verdict>[a-z ,]+?)\s*\((?P<pct>[−+\-]?[0-9.]+)%\)°?$")


def old_verdicts(readme: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """{(claim, dataset): (verdict, effect %)} from the first Markdown table whose header starts
    ``| paper | claim |``."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| paper | claim |"))
    datasets = [c.strip() for c in lines[start].strip("|").split("|")][2:]
    out = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        for dataset, cell in zip(datasets, cells[2:]):
            m = CELL.match(cell)
            out[(cells[1], dataset)] = (m["verdict"], m["pct"].replace("−", "-")) if m else (cell, "")
    return out


def old_rule(effect: float, p_per_query: float, queries: int, expect: str, alpha: float = 0.05,
             power: float = 0.8) -> str:
    """The verdict of the old 3-seed table: inconclusive when |effect| is below the per-query MDE, that is when
    the per-query t statistic |t| (recovered from the two-sided ``p_per_query`` with ``queries - 1`` df) is below
    t_{1-alpha/2} + t_{power}, the factor of :func:`curricula.statistics.stats.mde`; else reproduced or not by the effect's
    sign against ``expect``."""
    df = queries - 1
    if not math.isfinite(p_per_query) or df < 1 or effect == 0:
        return INCONCLUSIVE
    if float(student_t.isf(p_per_query / 2, df)) < power_factor(df, alpha, power):
        return INCONCLUSIVE
    return REPRODUCED if (effect > 0) == (expect == "better") else NOT_REPRODUCED


def cause(before: str, after: str, by_old_rule: str) -> str:
    """Which change moved a verdict (module docstring); empty when it did not change."""
    if before == after:
        return ""
    if by_old_rule == after:
        return "training"
    if by_old_rule == before:
        return "statistics"
    return "both"


def main(readme: str, findings: str) -> None:
    old = old_verdicts(Path(readme))
    new = pl.read_csv(findings)
    print("| claim | dataset | old | new | p per query | p seed-aware | old rule | changed | cause |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in new.iter_rows(named=True):
        before, pct = old.get((r["claim"], r["dataset"]), ("–", ""))
        after = f"{r['verdict']} ({r['effect_pct']:+.1f}%)"
        was = f"{before} ({pct}%)" if pct else before
        by_old = old_rule(r["effect"], r["p_per_query"], r["queries"], r["expect"])
        changed = "no old row" if before == "–" else "yes" if before != r["verdict"] else ""
        why = cause(before, r["verdict"], by_old) if before != "–" else ""
        print(f"| {r['claim']} | {r['dataset']} | {was} | {after} | {r['p_per_query']:.3g} | {r['p']:.3g} | "
              f"{by_old} | {changed} | {why} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])

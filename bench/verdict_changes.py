"""Old against new verdicts of the study: the README's verdict table (one row per claim, one column per dataset,
cells like ``inconclusive (−1.6%)``) against a new findings table (``results/report/study/findings.csv``).

    .venv/bin/python bench/verdict_changes.py README.md /work/study5/results/report/study/findings.csv

Prints a Markdown table, one row per (claim, dataset): the old verdict and effect, the new verdict and effect, the
per-query p and the seed-aware p of the new run, and whether the verdict changed. Claims are matched on their text.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import polars as pl

CELL = re.compile(r"^(?P<verdict>[a-z ]+?)\s*\((?P<pct>[−+\-]?[0-9.]+)%\)$")


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


def main(readme: str, findings: str) -> None:
    old = old_verdicts(Path(readme))
    new = pl.read_csv(findings)
    print("| claim | dataset | old | new | p per query | p seed-aware | changed |")
    print("|---|---|---|---|---|---|---|")
    for r in new.iter_rows(named=True):
        before, pct = old.get((r["claim"], r["dataset"]), ("–", ""))
        after = f"{r['verdict']} ({r['effect_pct']:+.1f}%)"
        was = f"{before} ({pct}%)" if pct else before
        print(f"| {r['claim']} | {r['dataset']} | {was} | {after} | {r['p_per_query']:.3g} | {r['p']:.3g} | "
              f"{'no old row' if before == '–' else 'yes' if before != r['verdict'] else ''} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])

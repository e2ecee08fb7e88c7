"""How many of the study's (claim, dataset) cells would seeds in rounds decide, and at what cost? (issue 45, goal)

    PYTHONPATH=. .venv/bin/python analyses/study_projection.py \\
        --dataset chitchat=tests/data/chitchat_ap_4seeds.parquet \\
        --dataset wikiqa=results/selection_noise/wikiqa --dataset semeval_cqa=results/selection_noise/semeval_cqa \\
        [--sd-seed chitchat=0.029] [--caps 20,40] [--draws 2000]

Each dataset's variance components (sd_seed, sd_query, sd_resid of the paired per-query differences, pooled over its
grid's comparisons with its baseline: :func:`curricula.report.power.pooled_components`), its number of test queries and
the mean of its baselines come from a finished results folder or a per-query metrics file (columns experiment, seed,
qid, measure, value). Each cell's true effect is taken to be the relative effect the 5-seed study measured
(:data:`STUDY_EFFECTS`, quoted from docs/findings.md, the findings page at ac56792) times that mean, which flatters the
projection (a measured effect is the true one plus noise, and |measured| is biased upward). For each cap the looks are 4
equal steps up to it (5, 10, 15, 20 for 20) and :func:`analyses.sequential_simulation.simulate_sequential`
gives the chance that the group-sequential rule decides the cell (reproduced or not, or equivalent at the 2% margin) and
the seeds it trains on average. Prints, per dataset and cap, the expected number of decided cells and the expected
trainings (2 arms per cell's seed; a shared baseline counted once per claim, so an upper bound). ``--sd-seed`` replaces
a dataset's seed SD by another estimate (e.g. the study's own, pooled over its claims).

``--effects FINDINGS`` takes the cells from a study's findings table instead (``results/report/study/
findings.parquet``; any dataset key of it, e.g. the cross-encoder copy ``wikiqa_ce``): each of the dataset's rows is a
cell whose true effect is the row's measured ``effect`` and whose margin is its ``margin`` (both in AP), the
active-learning rows (``active:`` arms, fixed seeds) left out. A dataset's source may then be the findings table itself:
its components are pooled over its rows (:func:`findings_components`).

``--family holm`` judges the cells as the study's rounds do (``study.multiplicity: holm``): the sequential claims'
cells of every dataset given form one family, simulated together by
:func:`analyses.sequential_simulation.simulate_family` at alpha 0.05 times 9 / 10 (the fixed-seed
active-learning claim, Wang's, keeps its tenth and is not projected), and the counts are of the 9 sequential cells per
dataset. ``--family none`` (the default) judges each cell alone at 0.05, before any adjustment. ``--thresholds normal``
swaps the exact-t thresholds for normal-theory ones (faster; tests).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from curricula.evaluation.comparisons import experiment_files, load_metrics
from curricula.report.power import pooled_components, power_table
from sequential_simulation import SimulatedCell, simulate_family, simulate_sequential
from curricula.study.grid import ACTIVE_PREFIX

#: the study's relative effects (%, arm against the claim's compared arm) per claim and dataset, in the order of
#: docs/findings.md's table: chitchat, wikiqa, semeval_cqa, dailydialog_pp
STUDY_EFFECTS = {
    "penha_root2": (-0.3, 4.9, 1.8, 1.5),
    "macavaney_kde": (-1.6, 3.8, 1.4, 1.1),
    "macavaney_anti": (-0.1, -2.5, -0.6, -1.0),
    "macavaney_minf": (4.5, 1.6, -0.8, 0.6),
    "su_hcl": (3.1, 0.8, 1.0, -1.2),
    "su_cc": (10.5, -1.3, 0.5, 1.0),
    "su_ic": (-3.8, -0.4, 0.1, -0.8),
    "su_ic_over_cc": (-12.9, 0.9, -0.3, -1.8),
    "wang_dasl": (-9.4, 1.7, 2.3, -0.1),
    "composed_teacher_kde": (-0.2, 4.3, 0.6, 2.5),
}
DATASETS = ("chitchat", "wikiqa", "semeval_cqa", "dailydialog_pp")
MARGIN = 0.02  # the study's equivalence margin, relative
ACTIVE = ("wang_dasl",)  # fixed-seed claims: not in the rounds' family


def dataset_components(source: str, measure: str = "AP") -> tuple[tuple[float, float, float], int, float]:
    """(pooled components as variances, test queries, mean of the baselines) of a results folder or a metrics file."""
    path = Path(source)
    metrics = pl.read_parquet(path) if path.is_file() else load_metrics(experiment_files(path))
    table = power_table(metrics, measure)
    components = pooled_components(table)
    if components is None:
        raise ValueError(f"{source}: no balanced comparison with the baseline to estimate components from")
    return components, int(table["queries"].max()), float(table["baseline_mean"].mean())


def findings_rows(path: str | Path, dataset: str, measure: str = "AP") -> pl.DataFrame:
    """The rows of ``dataset`` (and ``measure``) in a study findings table; ValueError naming the file when it has none
    or lacks the columns the projection reads."""
    table = pl.read_parquet(path)
    needed = {"dataset", "experiment", "measure", "effect", "margin", "queries", "against_mean", "seeds", "sd_seed"}
    if missing := sorted(needed - set(table.columns)):
        raise ValueError(f"{path}: not a study findings table (no column {', '.join(missing)})")
    rows = table.filter((pl.col("dataset") == dataset) & (pl.col("measure") == measure))
    if rows.is_empty():
        raise ValueError(f"{path}: no {measure} rows for dataset {dataset!r} "
                         f"(it has {', '.join(sorted(table['dataset'].unique()))})")
    return rows


def findings_cells(path: str | Path, dataset: str, measure: str = "AP") -> tuple[list[tuple[float, float]], int]:
    """(true effect, margin) in AP of each sequential cell of ``dataset`` in a findings table (its measured effect
    taken as the truth, its equivalence margin), and the number of fixed-seed active-learning cells left out."""
    rows = findings_rows(path, dataset, measure)
    active = pl.col("experiment").str.starts_with(ACTIVE_PREFIX)
    cells = [(float(e), float(m)) for e, m in rows.filter(~active).select("effect", "margin").iter_rows()]
    return cells, rows.filter(active).height


def findings_components(path: str | Path, dataset: str, measure: str = "AP"
                        ) -> tuple[tuple[float, float, float], int, float]:
    """As :func:`dataset_components`, from a findings table's rows of ``dataset``: the components pooled over its
    comparisons (:func:`curricula.report.power.pooled_components`), its test queries, and the mean of the compared arms'
    means (``against_mean``)."""
    rows = findings_rows(path, dataset, measure)
    components = pooled_components(rows)
    if components is None:
        raise ValueError(f"{path}: no comparison of {dataset!r} has variance components")
    return components, int(rows["queries"].max()), float(rows["against_mean"].mean())


def looks_up_to(cap: int) -> tuple[int, ...]:
    """Four equal looks up to ``cap`` seeds (5, 10, 15, 20 for 20); ValueError below 8 (the first look needs 2)."""
    if cap < 8:
        raise ValueError(f"cap {cap}: four looks need at least 8 seeds (the first at 2)")
    return tuple(int(round(cap * k / 4)) for k in range(1, 5))


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The command line's parser (for its errors) and arguments."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", action="append", required=True, help="<name>=<results folder or metrics file>")
    parser.add_argument("--sd-seed", action="append", default=[], help="<name>=<seed SD> replacing the measured one")
    parser.add_argument("--caps", default="20,40", help="comma-separated seed caps (default 20,40)")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--family", default="none", choices=("none", "holm"))
    parser.add_argument("--thresholds", default="student", choices=("student", "normal"))
    parser.add_argument("--effects", help="a study findings table: the cells and their true effects come from it")
    return parser, parser.parse_args(argv)


#: per dataset: (seed SD, query SD, residual SD, test queries, mean baseline AP)
Measured = dict[str, tuple[float, float, float, int, float]]


def measured_cells(parser: argparse.ArgumentParser, args: argparse.Namespace
                   ) -> tuple[Measured, dict[str, list[tuple[float, float]]], int]:
    """Each ``--dataset``'s measured components (the seed SD replaced where ``--sd-seed`` names it), its sequential
    cells as (true effect, margin) in AP, and the count of the family's active-learning cells (outside the rounds)."""
    sd_seed = {name: float(value) for name, _, value in (item.partition("=") for item in args.sd_seed)}
    measured: Measured = {}
    cells, active = {}, 0
    for item in args.dataset:
        name, _, source = item.partition("=")
        if args.effects is None and name not in DATASETS:
            parser.error(f"--dataset {name}: expected one of {DATASETS} (or a dataset of --effects' findings)")
        try:
            from_findings = Path(source).is_file() and "dataset" in pl.read_parquet_schema(source)
            (v_seed, v_query, v_resid), queries, base = (findings_components(source, name) if from_findings
                                                         else dataset_components(source))
            if args.effects is not None:
                cells[name], left_out = findings_cells(args.effects, name)
                active += left_out
            else:
                cells[name] = [(effects[DATASETS.index(name)] / 100 * base, MARGIN * base)
                               for claim, effects in STUDY_EFFECTS.items()
                               if args.family == "none" or claim not in ACTIVE]
                active += len(ACTIVE) if args.family == "holm" else 0
        except ValueError as error:
            parser.error(f"--dataset {item}: {error}")
        v_seed = sd_seed[name] ** 2 if name in sd_seed else v_seed
        measured[name] = (np.sqrt(v_seed), np.sqrt(v_query), np.sqrt(v_resid), queries, base)
    return measured, cells, active


def projected_rows(rng: np.random.Generator, args: argparse.Namespace, measured: Measured,
                   cells: dict[str, list[tuple[float, float]]], active: int) -> list[tuple[str, int, float, float, int]]:
    """(dataset, cap, expected decided cells, expected seeds over them, cells) per dataset and cap: the whole
    family judged together under Holm (``--family holm``, the rounds' share of alpha), else each cell alone."""
    caps = [int(c) for c in args.caps.split(",")]
    rows = []
    if args.family == "holm":
        sequential = sum(len(c) for c in cells.values())
        alpha = 0.05 * sequential / (sequential + active)  # the rounds' share (curricula.study.rounds.family_alpha)
        for cap in caps:
            family = [SimulatedCell(mu, sd, sq, sr, queries, margin)
                      for name, (sd, sq, sr, queries, base) in measured.items() for mu, margin in cells[name]]
            sim = simulate_family(rng, looks_up_to(cap), family, args.draws, alpha=alpha, rule="holm",
                                  thresholds=args.thresholds)
            start = 0
            for name in measured:
                part = slice(start, start + len(cells[name]))
                start += len(cells[name])
                rows.append((name, cap, sum(sim.decided_share[part]), sum(sim.seeds[part]), len(cells[name])))
    else:
        for name, (sd, sq, sr, queries, base) in measured.items():
            for cap in caps:
                decided = seeds = 0.0
                for mu, margin in cells[name]:
                    one = simulate_sequential(rng, looks_up_to(cap), queries, sd, sq, sr, mu, args.draws,
                                              margin=margin)
                    decided += one.decided
                    seeds += one.mean_seeds
                rows.append((name, cap, decided, seeds, len(cells[name])))
    rows.sort(key=lambda row: (list(measured).index(row[0]), row[1]))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser, args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    measured, cells, active = measured_cells(parser, args)
    rows = projected_rows(rng, args, measured, cells, active)
    table = [(name, f"{measured[name][0]:.4f}", measured[name][3], f"{measured[name][4]:.4f}", cap, f"{decided:.1f}",
              of, f"{seeds:.0f}", f"{2 * seeds:.0f}", args.family) for name, cap, decided, seeds, of in rows]
    print("| dataset | sd_seed | test queries | mean baseline AP | cap (seeds) | expected decided | of | "
          "seeds over those cells | trainings (upper bound) | adjustment |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in table:
        print("| " + " | ".join(str(x) for x in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Selection noise of one dataset's finished diagnostic grid (issue 45 item 1; docs/selection.md): per weight average
and model-selection rule, the SD over seeds of the paired differences of the kept test values between two arms,
their mean (the effect), each arm's mean test value and SD, the arms' correlation across seeds, and the SD as a
ratio of the reference rule's (:mod:`analyses.selection_noise_lib`).

    PYTHONPATH=. .venv/bin/python analyses/selection_noise.py --root results/selection_noise/wikiqa \\
        --arms baseline,macavaney_kde [--rules best_dev,patience:3/2,...] [--reference none:patience:3/2] \\
        [--per-seed]

The grid must have been trained with ``train.diagnostic_test: true`` (every dev evaluation also scored on the test
queries), best with ``patience: null`` so that every rule sees the whole budget (configs/selection_noise.yaml).
The default rules are ``best_dev`` (the run's evaluation interval), ``best_dev/2`` (an interval twice as long),
``patience:3`` and ``patience:3/2`` (early stopping; with the overlay's 50-step interval, ``patience:3/2`` is the
default protocol, patience 3 on evaluations every 100 steps), ``smoothed_best`` over 3 and 5 evaluations and
``fixed_budget`` at the last step every seed of both arms reached, each where every curve has enough
evaluations. The averages are ``none`` (the trained weights) and each shadow average the curves hold
(``train.diagnostic_averages``). Prints a Markdown table, one row per (average, rule); with ``--per-seed`` also each
seed's kept step, dev value and test value.

``--dev-subsets DRAWS:SIZE`` (e.g. ``200:100``) also replays every rule on ``DRAWS`` random subsets of ``SIZE`` dev
queries (the curves' per-query dev values; :func:`dev_subset_noise`) and prints, per
(average, rule), the SD of the paired differences with all dev queries beside its median and 5-95% range over the
subsets:
what selecting on fewer dev queries does to the noise, from the same runs. More dev queries than a split holds are
other runs: give their results folder as ``--root``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
import polars as pl

from curricula.report.tables import to_markdown
from curricula.statistics.paired import pitman_morgan
from selection_noise_lib import (
    AVERAGES,
    NOISE_COLUMNS,
    Rule,
    curve_columns,
    dev_query_count,
    dev_subset_noise,
    grid_min_steps,
    kept_values,
    last_common_step,
    load_curves,
    paired_values,
    parse_rule,
    selection_noise,
)

#: the rule the ratio column divides by: the default protocol replayed on a 50-step diagnostic grid
REFERENCE = "none:patience:3/2"


def default_rules(budget: int, evaluations: int) -> list[Rule]:
    """best_dev, best_dev/2, patience:3, patience:3/2, smoothed_best over 3 and 5 evaluations and fixed_budget at
    ``budget`` (steps), each windowed rule only when the shortest curve has at least that many evaluations
    (``evaluations``)."""
    rules = [Rule("best_dev"), Rule("best_dev", stride=2), Rule("patience", 3), Rule("patience", 3, 2)]
    rules += [Rule("smoothed_best", k) for k in (3, 5) if k <= evaluations]
    return [*rules, Rule("fixed_budget", budget)]


def present_averages(curves) -> list[str]:
    """The averages every curve holds the columns of: ``none`` and each shadow average (:data:`AVERAGES`)."""
    columns = [set(curve.columns) for of in curves.values() for curve in of.values()]
    return [a for a in AVERAGES if all(set(curve_columns(a)) <= c for c in columns)]


def ratio_columns(kept, arms: Sequence[str], reference: str) -> tuple[list, list, list, list]:
    """Per (average, rule) of ``kept`` (in its order; its ``average`` column added), the SD ratio of its paired
    differences to the ``reference`` (``<average>:<rule>``) ones, seed by seed, with the Pitman-Morgan 95% interval
    (as text) and p value (:func:`curricula.statistics.paired.pitman_morgan`; null for the reference itself, or where
    the two share fewer than 3 seeds or one is constant), and the correlation of the two rules' paired differences
    across seeds (what the test's power depends on besides the ratio:
    :func:`curricula.statistics.paired.pitman_morgan_power`)."""
    average, _, rule = reference.partition(":")
    ref = kept.filter(pl.col("average") == average)
    if ref.is_empty() or rule not in ref["rule"].to_list():
        keys = kept.select("average", "rule").unique(maintain_order=True).rows()
        return [None] * len(keys), [None] * len(keys), [None] * len(keys), [None] * len(keys)
    ref_seeds, x, y = paired_values(ref, arms[0], arms[1], rule)
    ref_diff = dict(zip(ref_seeds, y - x))
    ratios, cis, ps, rs = [], [], [], []
    for avg, name in kept.select("average", "rule").unique(maintain_order=True).rows():
        seeds, a, b = paired_values(kept.filter(pl.col("average") == avg), arms[0], arms[1], name)
        both = [i for i, s in enumerate(seeds) if s in ref_diff]
        diff = (b - a)[both]
        base = [ref_diff[seeds[i]] for i in both]
        try:
            res = None if (avg, name) == (average, rule) else pitman_morgan(base, diff)
        except ValueError:
            res = None
        ratios.append(float(np.std(diff, ddof=1) / max(np.std(base, ddof=1), 1e-300)) if len(both) > 1 else None)
        cis.append(f"{res.low:.2f}-{res.high:.2f}" if res else None)
        ps.append(res.p if res else None)
        rs.append(float(np.corrcoef(base, diff)[0, 1]) if res else None)
    return ratios, cis, ps, rs


def subset_summary(full: pl.DataFrame, subsets: pl.DataFrame) -> pl.DataFrame:
    """Per (average, rule) of ``full`` (the all-dev-queries table,
    :func:`analyses.selection_noise_lib.selection_noise` with an ``average`` column), its SD of the paired
    differences (``sd_all``) beside the median, 5% and 95% quantiles of the SD over the dev subsets' tables
    (``subsets``: the same columns plus ``draw``), the ratio of ``sd_all`` to that median, the share of draws whose SD
    is above ``sd_all``, and the median over the draws of the effect and of each arm's mean kept test value
    (``test_all``: the baseline's with all dev queries; selection on fewer dev queries may keep worse models, not only
    noisier ones)."""
    joined = subsets.join(full.select("average", "rule", sd_all=pl.col("sd_difference"),
                                      test_all=pl.col("test_baseline")),
                          on=["average", "rule"], how="left", maintain_order="left")
    return joined.group_by("average", "rule", maintain_order=True).agg(
        pl.col("sd_all").first(),
        sd_median=pl.col("sd_difference").median(),
        sd_q05=pl.col("sd_difference").quantile(0.05, "linear"),
        sd_q95=pl.col("sd_difference").quantile(0.95, "linear"),
        all_over_median=pl.col("sd_all").first() / pl.col("sd_difference").median(),
        share_above=(pl.col("sd_difference") > pl.col("sd_all")).mean(),
        effect_median=pl.col("mean_difference").median(),
        test_all=pl.col("test_all").first(),
        test_baseline_median=pl.col("test_baseline").median(),
        test_arm_median=pl.col("test_arm").median(),
        draws=pl.len())


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str], tuple[int, int] | None]:
    """The command line: its arguments, the two arms (baseline first) and the dev subsets (draws, size) or None."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="a dataset's results folder, e.g. results/chitchat")
    parser.add_argument("--arms", required=True, help="baseline,arm: the two experiments to pair by seed")
    parser.add_argument("--rules", help="comma-separated rules (default: see the module docstring)")
    parser.add_argument("--reference", default=REFERENCE,
                        help=f"<average>:<rule> whose SD the ratio column divides by (default {REFERENCE})")
    parser.add_argument("--per-seed", action="store_true", help="also print each seed's kept evaluation per rule")
    parser.add_argument("--dev-subsets", metavar="DRAWS:SIZE",
                        help="also replay every rule on DRAWS random subsets of SIZE dev queries (e.g. 200:100)")
    args = parser.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if len(arms) != 2:
        parser.error(f"--arms: expected two experiments, baseline first (got {arms})")
    subsets = None
    if args.dev_subsets:
        draws, _, size = args.dev_subsets.partition(":")
        if not (draws.isdigit() and size.isdigit() and int(draws) > 0 and int(size) > 0):
            parser.error(f"--dev-subsets {args.dev_subsets!r}: expected DRAWS:SIZE, two positive integers")
        subsets = int(draws), int(size)
    return args, arms, subsets


def printed_table(table: pl.DataFrame, kept: pl.DataFrame, arms: list[str], reference: str) -> pl.DataFrame:
    """The selection-noise ``table`` with the ratio to ``reference``'s SD (from every average's ``kept`` values),
    its columns in print order and named for the reader."""
    ratio, ci, p, r = ratio_columns(kept, arms, reference)
    table = table.with_columns(pl.Series("ratio", ratio, pl.Float64), pl.Series("ratio_ci", ci, pl.String),
                               pl.Series("ratio_p", p, pl.Float64), pl.Series("ratio_r", r, pl.Float64))
    table = table.select("average", "rule", "seeds", "sd_difference", "ratio", "ratio_ci", "ratio_p", "ratio_r",
                         "mean_difference", "test_baseline", "test_arm", "sd_baseline", "sd_arm", "rho")
    return table.rename({"test_baseline": f"test {arms[0]}", "test_arm": f"test {arms[1]}",
                         "sd_difference": "SD of paired differences", "ratio": f"SD / {reference}'s",
                         "ratio_ci": "95% CI", "ratio_p": "p (Pitman-Morgan)", "ratio_r": "r with reference",
                         "mean_difference": "mean effect", "sd_baseline": f"SD {arms[0]}",
                         "sd_arm": f"SD {arms[1]}"})


def main(argv: Sequence[str] | None = None) -> int:
    args, arms, subsets = parse_args(argv)
    curves = load_curves(args.root, arms)
    fewest = min(curve.height for of in curves.values() for curve in of.values())
    rules = ([parse_rule(r) for r in args.rules.split(",")] if args.rules
             else default_rules(last_common_step(curves), fewest))
    needs_min_steps = any(rule.kind == "patience" for rule in rules)
    min_steps = grid_min_steps(args.root, arms) if needs_min_steps else 0
    tables, kept_all = [], []
    for average in present_averages(curves):
        kept = kept_values(curves, rules, average, min_steps)
        kept_all.append(kept.with_columns(average=pl.lit(average)))
        tables.append(selection_noise(kept, *arms).with_columns(average=pl.lit(average)))
    table = printed_table(pl.concat(tables), pl.concat(kept_all), arms, args.reference)
    metric = next(iter(next(iter(curves.values())).values()))["metric"][0]
    print(f"## {args.root}: {arms[1]} - {arms[0]}, test {metric} of the evaluation each rule keeps "
          f"(min_steps {min_steps})\n")
    print(to_markdown(table, "average"), end="")
    if subsets is not None:
        draws, size = subsets
        full = pl.concat(tables).select("average", *NOISE_COLUMNS)
        replayed = pl.concat([dev_subset_noise(curves, rules, *arms, size=size, draws=draws, average=average,
                                               min_steps=min_steps).with_columns(average=pl.lit(average))
                              for average in present_averages(curves)])
        summary = subset_summary(full, replayed.select("average", *NOISE_COLUMNS, "draw"))
        print(f"\n## the same rules selecting on {size} random dev queries ({draws} draws; sd_all: all "
              f"{dev_query_count(curves)} dev queries)\n")
        print(to_markdown(summary, "average"), end="")
    if args.per_seed:
        print()
        kept = pl.concat(kept_all).sort("average", "rule", "arm", "seed", maintain_order=True)
        print(to_markdown(kept.select("average", *kept.columns[:-1]), "average"), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

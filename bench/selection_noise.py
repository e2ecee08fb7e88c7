"""Selection noise of one dataset's finished grid (issue 45 item 1): per model-selection rule, the SD over seeds of
the paired differences of the kept test values between two arms, their mean (the effect) and each arm's mean test
value (:mod:`curricula.selection`).

    PYTHONPATH=. .venv/bin/python bench/selection_noise.py --root results/chitchat \\
        --arms baseline,penha_bert_pred_root2 [--rules best_dev,fixed_budget:3000,smoothed_best:3,eval_every:2] \\
        [--per-seed]

The grid must have been trained with ``train.diagnostic_test: true`` (every dev evaluation also scored on the test
queries: the ``test_value`` column of each ``dev_curve.parquet``), best with ``patience: null`` so that every rule
sees the whole budget. The default rules are ``best_dev`` (today's), ``fixed_budget`` at the last step every seed
of both arms reached, ``smoothed_best`` over 3 and 5 evaluations and ``eval_every`` 2 and 4 (evaluation intervals 2
and 4 times the run's), the last four where every curve has that many evaluations. Prints a Markdown table, one
row per rule; with ``--per-seed`` also each seed's kept step, dev value and test value. Weight averaging and more
dev queries are other runs: give their results folder as ``--root`` for the same table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from curricula.report import to_markdown
from curricula.selection import Rule, kept_values, last_common_step, load_curves, parse_rule, selection_noise


def default_rules(budget: int, evaluations: int) -> list[Rule]:
    """best_dev, fixed_budget at ``budget`` (steps), smoothed_best over 3 and 5 evaluations and eval_every 2 and 4,
    each of the last four only when the shortest curve has at least ``k`` evaluations (``evaluations``)."""
    windows = [Rule("smoothed_best", k) for k in (3, 5)] + [Rule("eval_every", k) for k in (2, 4)]
    return [Rule("best_dev"), Rule("fixed_budget", budget), *[r for r in windows if r.k <= evaluations]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="a dataset's results folder, e.g. results/chitchat")
    parser.add_argument("--arms", required=True, help="baseline,arm: the two experiments to pair by seed")
    parser.add_argument("--rules", help="comma-separated rules (default: see the module docstring)")
    parser.add_argument("--per-seed", action="store_true", help="also print each seed's kept evaluation per rule")
    args = parser.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if len(arms) != 2:
        parser.error(f"--arms: expected two experiments, baseline first (got {arms})")
    curves = load_curves(args.root, arms)
    fewest = min(curve.height for of in curves.values() for curve in of.values())
    rules = ([parse_rule(r) for r in args.rules.split(",")] if args.rules
             else default_rules(last_common_step(curves), fewest))
    kept = kept_values(curves, rules)
    table = selection_noise(kept, *arms).rename({"test_baseline": f"test {arms[0]}", "test_arm": f"test {arms[1]}",
                                                 "sd_difference": "SD of paired differences",
                                                 "mean_difference": "mean effect"})
    metric = next(iter(next(iter(curves.values())).values()))["metric"][0]
    print(f"## {args.root}: {arms[1]} - {arms[0]}, test {metric} of the evaluation each rule keeps\n")
    print(to_markdown(table, "rule"), end="")
    if args.per_seed:
        print()
        print(to_markdown(kept.sort("rule", "arm", "seed", maintain_order=True), "arm"), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

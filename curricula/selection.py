"""Selection noise (issue 45 item 1): the test value each model-selection rule would have kept, per seed, and the
spread of the paired differences between two arms under each rule.

A run trained with ``train.diagnostic_test`` writes, beside each dev evaluation's ``value``, the same metric on the
test queries (``test_value``; :data:`curricula.tables.DEV_CURVE_TEST`). From such curves a rule that picks one
evaluation by the dev values alone can be replayed after the fact, and the test value it would have kept read off
(the test column never picks anything). The rules (:class:`Rule`):

* ``best_dev``: the evaluation with the highest dev value, the first on ties: what :func:`curricula.fitting.fit`
  keeps today;
* ``fixed_budget:<step>``: the evaluation at that step, whatever dev says (no selection);
* ``smoothed_best:<k>``: the best evaluation of the dev curve smoothed by a trailing moving average over ``k``
  evaluations (the mean of the evaluation and the ``k - 1`` before it; defined from the ``k``-th evaluation on, so a
  kept model is one a run could have saved when it made that evaluation);
* ``eval_every:<k>``: ``best_dev`` among every ``k``-th evaluation (the ``k``-th, ``2k``-th, ...) and the last (a
  run evaluates at the end of its budget), i.e. an evaluation interval ``k`` times as long as the run's.

For each rule and seed present in both arms the paired difference is (arm's kept test value) - (baseline's), in the
metric's units (e.g. AP, higher = better, so a positive mean is an arm better than the baseline); the table gives
their SD over seeds (``ddof = 1``), their mean (the effect) and each arm's mean kept test value
(:func:`selection_noise`). The rule with the smaller SD is the one that makes a paired comparison of these two arms
less noisy. A run with ``patience`` records its curve only up to its stop, so every rule sees that part only: run
the diagnostic with the whole budget (``patience: null``) for rules that may pick later evaluations.

Two more sources of selection noise in issue 45 are not replays of one curve: more dev queries (``dev_queries``)
and weight averaging (``averaging``) need runs of their own, whose roots give this table again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

#: rule kinds, with whether each takes a number (``kind:<k>``)
RULE_KINDS = {"best_dev": False, "fixed_budget": True, "smoothed_best": True, "eval_every": True}
#: the per-seed frame of :func:`kept_values`
KEPT_COLUMNS = ("arm", "seed", "rule", "step", "dev_value", "test_value")
#: the table of :func:`selection_noise`: per rule, the seeds paired, the SD and mean of the paired differences
#: (arm - baseline) and each arm's mean kept test value
NOISE_COLUMNS = ("rule", "seeds", "sd_difference", "mean_difference", "test_baseline", "test_arm")


@dataclass(frozen=True)
class Rule:
    """A model-selection rule replayed on a dev curve: ``kind`` (:data:`RULE_KINDS`) and its number ``k`` (the step
    of ``fixed_budget``, in steps; the window of ``smoothed_best`` and the stride of ``eval_every``, in
    evaluations; 0 for ``best_dev``)."""

    kind: str
    k: int = 0

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ValueError(f"selection rule {self.kind!r}: expected one of {list(RULE_KINDS)}")
        if RULE_KINDS[self.kind] and self.k < 1:
            raise ValueError(f"selection rule {self.kind}: k={self.k}, expected a positive integer ({self.kind}:<k>)")
        if not RULE_KINDS[self.kind] and self.k:
            raise ValueError(f"selection rule {self.kind} takes no number (got {self.k})")

    @property
    def name(self) -> str:
        """``kind`` or ``kind:k``, as :func:`parse_rule` reads it."""
        return f"{self.kind}:{self.k}" if RULE_KINDS[self.kind] else self.kind


def parse_rule(text: str) -> Rule:
    """A :class:`Rule` from its name: ``best_dev``, ``fixed_budget:3000``, ``smoothed_best:3``, ``eval_every:2``."""
    m = re.fullmatch(r"([a-z_]+)(?::(\d+))?", text.strip())
    if m is None:
        raise ValueError(f"selection rule {text!r}: expected <kind> or <kind>:<k>, kinds {list(RULE_KINDS)}")
    return Rule(m[1], int(m[2]) if m[2] else 0)


def kept_index(steps: Sequence[int], dev: Sequence[float], rule: Rule) -> int:
    """The position in a dev curve (``steps`` increasing, ``dev`` the dev values at them, higher = better) of the
    evaluation ``rule`` keeps; the first on ties. ValueError for an empty curve, a ``fixed_budget`` step the curve
    lacks, or a ``smoothed_best`` window longer than the curve."""
    values = np.asarray(dev, dtype=np.float64)
    if values.size == 0 or values.size != len(steps):
        raise ValueError(f"a dev curve of {len(steps)} steps and {values.size} values: expected as many, at least 1")
    if rule.kind == "best_dev":
        return int(np.argmax(values))
    if rule.kind == "fixed_budget":
        hits = [i for i, step in enumerate(steps) if int(step) == rule.k]
        if not hits:
            raise ValueError(f"{rule.name}: no evaluation at step {rule.k} (the curve has steps {int(steps[0])}.."
                             f"{int(steps[-1])}; an early stop or another eval_every?)")
        return hits[0]
    if rule.kind == "smoothed_best":
        if values.size < rule.k:
            raise ValueError(f"{rule.name}: the curve has {values.size} evaluation(s), fewer than the window")
        smoothed = np.convolve(values, np.full(rule.k, 1.0 / rule.k), mode="valid")  # [i] = mean of i..i+k-1
        return int(np.argmax(smoothed)) + rule.k - 1
    picked = sorted({*range(rule.k - 1, values.size, rule.k), values.size - 1})  # eval_every
    return picked[int(np.argmax(values[picked]))]


def kept_values(curves: Mapping[str, Mapping[str, pl.DataFrame]], rules: Sequence[Rule]) -> pl.DataFrame:
    """Per arm, seed and rule the evaluation the rule keeps (:data:`KEPT_COLUMNS`: its step, dev value and test
    value). ``curves``: arm -> seed -> a dev curve with ``step``, ``value`` and the diagnostic ``test_value``
    (:data:`curricula.tables.DEV_CURVE_TEST`); ValueError naming the arm and seed for a curve without it."""
    rows = []
    for arm, of in curves.items():
        for seed, curve in of.items():
            if "test_value" not in curve.columns:
                raise ValueError(f"{arm} seed {seed}: the dev curve has no test_value column (train it with "
                                 f"train.diagnostic_test: true)")
            curve = curve.sort("step")
            steps, dev, test = curve["step"].to_list(), curve["value"].to_list(), curve["test_value"].to_list()
            for rule in rules:
                try:
                    i = kept_index(steps, dev, rule)
                except ValueError as err:
                    raise ValueError(f"{arm} seed {seed}: {err}") from None
                rows.append((arm, str(seed), rule.name, int(steps[i]), float(dev[i]), float(test[i])))
    return pl.DataFrame(rows, schema={"arm": pl.String, "seed": pl.String, "rule": pl.String, "step": pl.Int64,
                                      "dev_value": pl.Float64, "test_value": pl.Float64}, orient="row")


def selection_noise(kept: pl.DataFrame, baseline: str, arm: str) -> pl.DataFrame:
    """Per rule (in ``kept``'s order) the paired differences ``arm - baseline`` of the kept test values over the
    seeds both arms have (:data:`NOISE_COLUMNS`): how many seeds, their SD (``ddof = 1``, null with one seed), their
    mean (the effect), and each arm's mean kept test value, all in the metric's units. ``kept``:
    :func:`kept_values`. ValueError when the arms share no seed."""
    out = []
    for rule in kept["rule"].unique(maintain_order=True).to_list():
        of = kept.filter(pl.col("rule") == rule)
        a = dict(of.filter(pl.col("arm") == baseline).select("seed", "test_value").iter_rows())
        b = dict(of.filter(pl.col("arm") == arm).select("seed", "test_value").iter_rows())
        seeds = sorted(set(a) & set(b))
        if not seeds:
            raise ValueError(f"{baseline} and {arm} share no seed: nothing to pair")
        diff = np.array([b[s] - a[s] for s in seeds])
        sd = float(np.std(diff, ddof=1)) if len(seeds) > 1 else None
        out.append((rule, len(seeds), sd, float(diff.mean()), float(np.mean([a[s] for s in seeds])),
                    float(np.mean([b[s] for s in seeds]))))
    return pl.DataFrame(out, schema={"rule": pl.String, "seeds": pl.Int64, "sd_difference": pl.Float64,
                                     "mean_difference": pl.Float64, "test_baseline": pl.Float64,
                                     "test_arm": pl.Float64}, orient="row")


def last_common_step(curves: Mapping[str, Mapping[str, pl.DataFrame]]) -> int:
    """The last step every curve reached (the smallest last step): the default ``fixed_budget`` of a grid whose
    runs all trained their whole budget."""
    return min(int(curve["step"].max()) for of in curves.values() for curve in of.values())


def load_curves(root: str | Path, arms: Sequence[str]) -> dict[str, dict[str, pl.DataFrame]]:
    """arm -> seed -> its ``dev_curve.parquet`` under a dataset's results folder (``<root>/experiments/<arm>/
    seed=<s>/``), each checked against its contract (:func:`curricula.tables.read_dev_curve`)."""
    from curricula.comparisons import experiment_files
    from curricula.tables import read_dev_curve

    return {arm: {seed: read_dev_curve(path) for (_, seed), path in
                  experiment_files(root, "dev_curve.parquet", arm).items()} for arm in arms}

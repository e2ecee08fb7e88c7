"""Selection noise (issue 45 item 1): the test value each model-selection rule would have kept, per seed, and the
spread of the paired differences between two arms under each rule.

Analysis code, not a pipeline stage: ``analyses/selection_noise.py`` imports it from beside itself (as
``selection_noise_lib``), and no module of ``curricula`` does; ``tests/test_selection_noise.py`` tests it.

A run trained with ``train.diagnostic_test`` writes, beside each dev evaluation's ``value``, the same metric on the
test queries (``test_value``; :data:`curricula.plumbing.contracts.DEV_CURVE_TEST`). From such curves a rule that picks
one
evaluation by the dev values alone can be replayed after the fact, and the test value it would have kept read off
(the test column never picks anything). The rules (:class:`Rule`):

* ``best_dev``: the evaluation with the highest dev value, the first on ties: what :func:`curricula.training.core.fit`
  keeps today;
* ``fixed_budget:<step>``: the evaluation at that step, whatever dev says (no selection);
* ``smoothed_best:<k>``: the best evaluation of the dev curve smoothed by a trailing moving average over ``k``
  evaluations (the mean of the evaluation and the ``k - 1`` before it; defined from the ``k``-th evaluation on, so a
  kept model is one a run could have saved when it made that evaluation);
* ``eval_every:<k>``: ``best_dev`` among every ``k``-th evaluation (the ``k``-th, ``2k``-th, ...) and the last (a
  run evaluates at the end of its budget), i.e. an evaluation interval ``k`` times as long as the run's;
* ``patience:<k>``: early stopping as :func:`curricula.training.core.fit` does it: evaluations are read in order and the
  run stops once ``k`` evaluations after both the best so far and the grid's ``min_steps`` brought no improvement;
  the best evaluation up to the stop is kept (MacAvaney et al. 2020 §4: roll back to the best validation model).

Any rule may end in ``/<s>``: it then sees every ``s``-th evaluation and the last only (an evaluation interval ``s``
times the run's), so a run evaluated every 50 steps replays the default protocol, patience 3 on evaluations every
100 steps, as ``patience:3/2``, and ``eval_every:<k>`` is ``best_dev/<k>``.

A run with ``train.diagnostic_averages`` also holds the curves of shadow weight averages (``ema_value``,
``ema_test_value``, ...; :func:`curricula.training.averaging.shadow_columns`): ``average="ema"`` replays the rules on
those, i.e. on the run ``averaging: ema`` would have made.

For each rule and seed present in both arms the paired difference is (arm's kept test value) - (baseline's), in the
metric's units (e.g. AP, higher = better, so a positive mean is an arm better than the baseline); the table gives
their SD over seeds (``ddof = 1``), their mean (the effect) and each arm's mean kept test value
(:func:`selection_noise`). The rule with the smaller SD is the one that makes a paired comparison of these two arms
less noisy. A run with ``patience`` records its curve only up to its stop, so every rule sees that part only: run
the diagnostic with the whole budget (``patience: null``) for rules that may pick later evaluations.

Fewer dev queries are replayed too: a diagnostic curve also holds each dev query's value at every evaluation
(``dev_query_values``, in qid order), so the dev curve a run selecting on a subset of them would have recorded is
the mean over that subset (:func:`subset_dev`; exact, since the dev queries never steer training), and
:func:`dev_subset_noise` gives the table for many random subsets of one size. More dev queries than the split holds
need runs on a split with a larger dev set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from curricula.evaluation.comparisons import _seed_key
from curricula.plumbing.contracts import SHADOW_KINDS

#: rule kinds, with whether each takes a number (``kind:<k>``)
RULE_KINDS = {"best_dev": False, "fixed_budget": True, "smoothed_best": True, "eval_every": True, "patience": True}
#: the curves of :func:`kept_values`: the trained weights' (``none``) and the diagnostic shadow averages'
AVERAGES = ("none", *SHADOW_KINDS)
#: the per-seed frame of :func:`kept_values`
KEPT_COLUMNS = ("arm", "seed", "rule", "step", "dev_value", "test_value")
#: the table of :func:`selection_noise`: per rule, the seeds paired, the SD and mean of the paired differences
#: (arm - baseline), each arm's mean kept test value and SD over seeds, and the arms' correlation across seeds
NOISE_COLUMNS = ("rule", "seeds", "sd_difference", "mean_difference", "test_baseline", "test_arm", "sd_baseline",
                 "sd_arm", "rho")


@dataclass(frozen=True)
class Rule:
    """A model-selection rule replayed on a dev curve: ``kind`` (:data:`RULE_KINDS`), its number ``k`` (the step
    of ``fixed_budget``, in steps; the window of ``smoothed_best``, the stride of ``eval_every`` and the patience of
    ``patience``, in evaluations; 0 for ``best_dev``) and ``stride`` (the rule sees every ``stride``-th evaluation
    and the last; 1 = all)."""

    kind: str
    k: int = 0
    stride: int = 1

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ValueError(f"selection rule {self.kind!r}: expected one of {list(RULE_KINDS)}")
        if RULE_KINDS[self.kind] and self.k < 1:
            raise ValueError(f"selection rule {self.kind}: k={self.k}, expected a positive integer ({self.kind}:<k>)")
        if not RULE_KINDS[self.kind] and self.k:
            raise ValueError(f"selection rule {self.kind} takes no number (got {self.k})")
        if self.stride < 1:
            raise ValueError(f"selection rule {self.kind}: stride {self.stride}, expected a positive integer")

    @property
    def name(self) -> str:
        """``kind``, ``kind:k``, each with ``/stride`` when above 1, as :func:`parse_rule` reads it."""
        base = f"{self.kind}:{self.k}" if RULE_KINDS[self.kind] else self.kind
        return base if self.stride == 1 else f"{base}/{self.stride}"


def parse_rule(text: str) -> Rule:
    """A :class:`Rule` from its name: ``best_dev``, ``fixed_budget:3000``, ``smoothed_best:3``, ``eval_every:2``,
    ``patience:3``, any of them with ``/<stride>`` (``patience:3/2``)."""
    m = re.fullmatch(r"([a-z_]+)(?::(\d+))?(?:/(\d+))?", text.strip())
    if m is None:
        raise ValueError(f"selection rule {text!r}: expected <kind>[:<k>][/<stride>], kinds {list(RULE_KINDS)}")
    return Rule(m[1], int(m[2]) if m[2] else 0, int(m[3]) if m[3] else 1)


def every_kth(size: int, k: int) -> list[int]:
    """Positions ``k - 1, 2k - 1, ...`` of a curve of ``size`` evaluations and its last (``size - 1``): the
    evaluations a run whose interval is ``k`` times as long would make (it also evaluates at the end)."""
    return sorted({*range(k - 1, size, k), size - 1})


def stopped_best(steps: Sequence[int], values: np.ndarray, patience: int, min_steps: int = 0) -> int:
    """The position :func:`curricula.training.core.fit` keeps with early stopping: evaluations in order, the best (the
    first on ties) kept, stopping once ``patience`` evaluations after both the best's step and ``min_steps`` brought
    no improvement (:meth:`curricula.training.core.FitResult.evaluations_since_best`)."""
    best, best_value = -1, -np.inf
    for i, value in enumerate(values):
        if value > best_value:
            best, best_value = i, float(value)
        since = sum(1 for j in range(i + 1) if int(steps[j]) > max(int(steps[best]), min_steps))
        if since >= patience:
            break
    return best


def kept_index(steps: Sequence[int], dev: Sequence[float], rule: Rule, min_steps: int = 0) -> int:
    """The position in a dev curve (``steps`` increasing, ``dev`` the dev values at them, higher = better) of the
    evaluation ``rule`` keeps; the first on ties. ``min_steps`` (steps) is where ``patience`` starts counting (the
    grid's longest curriculum). ValueError for an empty curve, a ``fixed_budget`` step the curve (or its stride)
    lacks, or a ``smoothed_best`` window longer than the curve."""
    values = np.asarray(dev, dtype=np.float64)
    if values.size == 0 or values.size != len(steps):
        raise ValueError(f"a dev curve of {len(steps)} steps and {values.size} values: expected as many, at least 1")
    if rule.stride > 1:
        picked = every_kth(values.size, rule.stride)
        inner = kept_index([steps[i] for i in picked], values[picked], Rule(rule.kind, rule.k), min_steps)
        return picked[inner]
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
    if rule.kind == "patience":
        return stopped_best(steps, values, rule.k, min_steps)
    picked = every_kth(values.size, rule.k)  # eval_every
    return picked[int(np.argmax(values[picked]))]


def curve_columns(average: str = "none") -> tuple[str, str]:
    """The dev and test columns of a diagnostic dev curve for the trained weights (``none``: ``value``,
    ``test_value``) or a shadow average (``ema``: ``ema_value``, ``ema_test_value``; :data:`AVERAGES`)."""
    if average not in AVERAGES:
        raise ValueError(f"average {average!r}: expected one of {list(AVERAGES)}")
    return ("value", "test_value") if average == "none" else (f"{average}_value", f"{average}_test_value")


def per_query_column(average: str = "none") -> str:
    """The per-query dev values column of ``average``'s curve (:func:`curve_columns`): ``dev_query_values`` or
    ``<kind>_dev_query_values``."""
    curve_columns(average)  # checks the name
    return "dev_query_values" if average == "none" else f"{average}_dev_query_values"


def dev_query_count(curves: Mapping[str, Mapping[str, pl.DataFrame]], average: str = "none") -> int:
    """How many dev queries every evaluation of every curve holds a value of (``average``'s per-query column);
    ValueError naming the arm and seed of a curve without that column, or when the counts differ (the runs did not
    select on the same dev queries)."""
    column = per_query_column(average)
    counts = {}
    for arm, of in curves.items():
        for seed, curve in of.items():
            if column not in curve.columns:
                raise ValueError(f"{arm} seed {seed}: the dev curve has no {column} column (a diagnostic run of a "
                                 f"version that records each dev query's value, train.diagnostic_test: true)")
            counts[(arm, seed)] = set(curve[column].list.len().to_list())
    sizes = set().union(*counts.values()) if counts else set()
    if len(sizes) != 1:
        raise ValueError(f"the dev curves hold {sorted(sizes)} dev query values per evaluation: expected one count "
                         f"(the same dev queries in every run)")
    return sizes.pop()


def subset_dev(curve: pl.DataFrame, positions: Sequence[int], average: str = "none") -> pl.DataFrame:
    """``curve`` with ``average``'s dev column (:func:`curve_columns`) replaced by the mean of its per-query dev
    values (:func:`per_query_column`) at ``positions`` (0-based, into the qid-ordered list): the dev curve the run
    would have recorded selecting on those dev queries alone. Exact: the dev queries are only ever scored, never
    trained on, so the run's weights at each evaluation are the same whatever dev set it reads."""
    dev_column, _ = curve_columns(average)
    column = per_query_column(average)
    picked = np.asarray(positions, dtype=np.int64)
    values = np.array(curve[column].to_list(), dtype=np.float64)  # (evaluations, dev queries)
    return curve.with_columns(pl.Series(dev_column, values[:, picked].mean(axis=1), pl.Float64))


def dev_subset_noise(curves: Mapping[str, Mapping[str, pl.DataFrame]], rules: Sequence[Rule], baseline: str,
                     arm: str, *, size: int, draws: int, seed: int = 0, average: str = "none",
                     min_steps: int = 0) -> pl.DataFrame:
    """:func:`selection_noise` of ``arm - baseline`` for ``draws`` random subsets of ``size`` dev queries
    (:func:`subset_dev`; drawn without replacement by ``numpy.random.default_rng(seed)``, each subset the same for
    every run, as a grid with ``train.dev_queries: size`` would select on one seeded subset), with a ``draw``
    column (0-based). A grid with fewer dev queries is thus replayed on the runs of one with more."""
    total = dev_query_count(curves, average)
    if not 1 <= size <= total:
        raise ValueError(f"a dev subset of {size} queries: expected 1 to {total} (the queries the curves hold)")
    rng = np.random.default_rng(seed)
    tables = []
    for draw in range(draws):
        positions = np.sort(rng.choice(total, size, replace=False))
        sub = {a: {s: subset_dev(c, positions, average) for s, c in of.items()} for a, of in curves.items()}
        table = selection_noise(kept_values(sub, rules, average, min_steps), baseline, arm)
        tables.append(table.with_columns(draw=pl.lit(draw, pl.Int64)))
    return pl.concat(tables)


def kept_values(curves: Mapping[str, Mapping[str, pl.DataFrame]], rules: Sequence[Rule], average: str = "none",
                min_steps: int = 0) -> pl.DataFrame:
    """Per arm, seed and rule the evaluation the rule keeps (:data:`KEPT_COLUMNS`: its step, dev value and test
    value) on the curves of ``average`` (:func:`curve_columns`). ``curves``: arm -> seed -> a dev curve with
    ``step`` and the columns of ``average``, with the diagnostic test column
    (:data:`curricula.plumbing.contracts.DEV_CURVE_TEST`); ValueError naming the arm and seed for a curve without
    them. ``min_steps``: where ``patience`` rules start counting (:func:`grid_min_steps`)."""
    dev_column, test_column = curve_columns(average)
    rows = []
    for arm, of in curves.items():
        for seed, curve in of.items():
            missing = [c for c in (dev_column, test_column) if c not in curve.columns]
            if missing:
                how = ("train.diagnostic_test: true" if "test_value" in missing
                       else f"train.diagnostic_averages: [{average}]")
                raise ValueError(f"{arm} seed {seed}: the dev curve has no {', '.join(missing)} column (train it "
                                 f"with {how})")
            curve = curve.sort("step")
            steps, dev, test = curve["step"].to_list(), curve[dev_column].to_list(), curve[test_column].to_list()
            for rule in rules:
                try:
                    i = kept_index(steps, dev, rule, min_steps)
                except ValueError as err:
                    raise ValueError(f"{arm} seed {seed}: {err}") from None
                rows.append((arm, str(seed), rule.name, int(steps[i]), float(dev[i]), float(test[i])))
    return pl.DataFrame(rows, schema={"arm": pl.String, "seed": pl.String, "rule": pl.String, "step": pl.Int64,
                                      "dev_value": pl.Float64, "test_value": pl.Float64}, orient="row")


def selection_noise(kept: pl.DataFrame, baseline: str, arm: str) -> pl.DataFrame:
    """Per rule (in ``kept``'s order) the paired differences ``arm - baseline`` of the kept test values over the
    seeds both arms have (:data:`NOISE_COLUMNS`): how many seeds, their SD (``ddof = 1``, null with one seed), their
    mean (the effect), each arm's mean kept test value, each arm's SD over seeds and the correlation ``rho`` of the
    two arms' values across seeds (Pearson; null with fewer than 3 seeds or a constant arm), all in the metric's
    units. Pairing buys ``Var(diff) = Var(a) + Var(b) - 2 rho SD(a) SD(b)``, i.e. ``2 sigma^2 (1 - rho)`` for arms of
    equal spread: it helps only while the arms stay correlated. ``kept``: :func:`kept_values`. ValueError when the
    arms share no seed."""
    out = []
    for rule in kept["rule"].unique(maintain_order=True).to_list():
        seeds, x, y = paired_values(kept, baseline, arm, rule)
        diff = y - x
        many = len(seeds) > 1
        sd, sd_a, sd_b = ((float(np.std(v, ddof=1)) if many else None) for v in (diff, x, y))
        rho = (float(np.corrcoef(x, y)[0, 1]) if len(seeds) > 2 and sd_a and sd_b else None)
        out.append((rule, len(seeds), sd, float(diff.mean()), float(x.mean()), float(y.mean()), sd_a, sd_b, rho))
    return pl.DataFrame(out, schema={"rule": pl.String, "seeds": pl.Int64, "sd_difference": pl.Float64,
                                     "mean_difference": pl.Float64, "test_baseline": pl.Float64,
                                     "test_arm": pl.Float64, "sd_baseline": pl.Float64, "sd_arm": pl.Float64,
                                     "rho": pl.Float64}, orient="row")


def paired_values(kept: pl.DataFrame, baseline: str, arm: str, rule: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(seeds, baseline's kept test values, arm's) under one rule (its name) over the seeds both arms have, in seed
    order. ``kept``: :func:`kept_values`. ValueError when the arms share no seed."""
    of = kept.filter(pl.col("rule") == rule)
    a = dict(of.filter(pl.col("arm") == baseline).select("seed", "test_value").iter_rows())
    b = dict(of.filter(pl.col("arm") == arm).select("seed", "test_value").iter_rows())
    seeds = sorted(set(a) & set(b), key=_seed_key)
    if not seeds:
        raise ValueError(f"{baseline} and {arm} share no seed: nothing to pair")
    return seeds, np.array([a[s] for s in seeds]), np.array([b[s] for s in seeds])


def last_common_step(curves: Mapping[str, Mapping[str, pl.DataFrame]]) -> int:
    """The last step every curve reached (the smallest last step): the default ``fixed_budget`` of a grid whose
    runs all trained their whole budget."""
    return min(int(curve["step"].max()) for of in curves.values() for curve in of.values())


def load_curves(root: str | Path, arms: Sequence[str]) -> dict[str, dict[str, pl.DataFrame]]:
    """arm -> seed -> its ``dev_curve.parquet`` under a dataset's results folder (``<root>/experiments/<arm>/
    seed=<s>/``), each checked against its contract (:func:`curricula.plumbing.contracts.read_dev_curve`)."""
    from curricula.evaluation.comparisons import experiment_files
    from curricula.plumbing.contracts import read_dev_curve

    return {arm: {seed: read_dev_curve(path) for (_, seed), path in
                  experiment_files(root, "dev_curve.parquet", arm).items()} for arm in arms}


def grid_min_steps(root: str | Path, arms: Sequence[str]) -> int:
    """The ``min_steps`` (steps; the grid's longest curriculum, where patience starts counting) of the arms' runs
    under a dataset's results folder, read from each run's ``config.json``; ValueError when the runs disagree (they
    are not one grid) or none records it."""
    import json

    from curricula.evaluation.comparisons import experiment_files

    found = {}
    for arm in arms:
        for (_, seed), path in experiment_files(root, "config.json", arm).items():
            found[(arm, seed)] = json.loads(Path(path).read_text())["spec"].get("min_steps")
    values = set(found.values())
    if len(values) != 1 or None in values:
        raise ValueError(f"{root}: the runs of {list(arms)} record min_steps {sorted(map(str, values))}: expected "
                         f"one value (one grid)")
    return int(values.pop())

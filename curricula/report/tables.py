"""The papers' tables from per-query test metrics, with their marks and the power table (rule ``report_tables``).

The statistics are :mod:`curricula.statistics`'s; the pairing of two arms' values is
:mod:`curricula.evaluation.comparisons`'s.

Protocol (Penha & Hauff 2020 §4-5, Table 5): for each experiment and seed, a paired two-sided test of its per-query
values against the baseline run *of the same seed*. The test is the config's ``report.test``: ``ttest`` (Student's
paired t-test, the papers' choice and the default), ``randomization`` (Fisher's paired randomization test by random sign
flips, Smucker et al. 2007) or ``wilcoxon`` (signed-rank test); see :func:`curricula.statistics.paired.paired_pvalue`.
Marks for a significant improvement over the baseline: ``†`` p < 0.05, ``‡`` p < 0.01 (Table 5's symbols); for a
significant reduction: ``↓`` p < 0.05, ``↓↓`` p < 0.01 (MacAvaney Table 6's arrow), so a mark never hides the direction.
With ``holm: true`` the p values of one row (all experiments of the table row against their baselines, as one family)
are Holm-Bonferroni adjusted before marking.

Seed-aware inference (``report.inference: seed_aware``, the default): the marks of every seed-averaged comparison (the
AVG row, the metrics table, the power table's MDE) come from :func:`curricula.statistics.seed_aware.seed_aware_test`,
which treats both the seeds and the test queries as samples (crossed random effects; its SE is the plug-in of the
clipped variance components and its df hold the type-I error at 5% from 2 seeds up). The per-query test on seed-averaged
values (``per_query``, the papers' and the former default) is kept beside it: ``<col>_mark_per_query`` columns and the
power table's ``p_ttest``.

Tables:
* ``seeds``: like Penha Table 5: rows = each seed, AVG, SD (over seeds of the per-seed means); columns =
  experiments; one measure (the config's ``report.measure``, default MAP).
* ``metrics``: like MacAvaney Table 3: rows = experiments (and the reference rankers), columns = measures; the mean
  over seeds of the per-seed means, marked against the baseline. Its caption states the minimum detectable effect
  (median over experiments).
* ``power``: per experiment (not the baselines), on ``report.measure``, the mean difference to its baseline, its
  variance components, p values and minimum detectable effect (:func:`curricula.report.power.power_table`). Its
  caption carries the planner (:func:`plan_sentence`).
Written as Markdown, CSV and Parquet.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import polars as pl

from curricula.evaluation.comparisons import (
    BASELINE,
    _in_order,
    _paired,
    baseline_of,
    check_inference,
    experiment_order,
    load_metrics,
    paired_cells,
)
from curricula.plumbing.atomic import write_file_atomically, write_text_atomically
from curricula.plumbing.keys import BM25_SUFFIX
from curricula.report.power import RELATIVE_EFFECT, mde_sentence, pooled_components, power_table
from curricula.statistics.multiplicity import holm
from curricula.statistics.paired import TESTS, paired_pvalue
from curricula.statistics.power import (
    SEEDS_PLANNED,
    cheapest,
    design_mdes,
    design_seeds,
    plan,
    seed_sd_interval,
    with_seed_sd,
)
from curricula.statistics.seed_aware import seed_aware_test

TEST_NAMES = {"ttest": "paired two-sided t-test", "wilcoxon": "two-sided Wilcoxon signed-rank test",
              "randomization": "two-sided paired randomization test"}
SEED_AWARE_NAME = ("seed-aware test (crossed seed and query random effects, seeds paired by id; clipped components, "
                   "Satterthwaite df at the seed mean square's upper 80% limit, at least S - 1)")


def plan_sentence(components: tuple[float, float, float], effect: float, pairs: int, measure: str,
                  alpha: float = 0.05, power: float = 0.8, max_queries: int | None = None, *, seeds: int = 0,
                  queries: int = 0) -> str:
    """One sentence on the :func:`curricula.statistics.power.plan` of ``effect`` (the pooled components of ``pairs``
    compared pairs, estimated from ``seeds`` x ``queries``), with the seeds the grid's own test split needs
    (:func:`seeds_range`)."""
    if not (effect > 0 and math.isfinite(effect)):
        return ""
    needed = plan(components, effect, alpha=alpha, power=power, max_queries=max_queries)
    cells = ", ".join(f"{s}: {q:,}" if q is not None else f"{s}: –" for s, q in needed.items())
    best = cheapest(needed)
    cap = f" (at most {max_queries:,} test queries)" if max_queries else ""
    best_txt = (f"cheapest{cap}: {best[0]} seeds x {best[1]:,} test queries" if best else
                f"no design of {min(needed)}-{max(needed)} seeds reaches it{cap}")
    sd = ", ".join(f"sd_{n} {math.sqrt(v):.4f}" for n, v in zip(("seed", "query", "resid"), components))
    own = ""
    if seeds > 1 and queries > 1:
        low, high, (n, n_low, n_high) = seeds_range(components, effect, seeds, queries, alpha, power)
        own = (f" At this grid's {queries:,} test queries it needs {_seeds(n)} seeds ({_seeds(n_low)} to "
               f"{_seeds(n_high)} over the 90% interval of sd_seed, {low:.4f} to {high:.4f}, which rests on "
               f"{seeds - 1} df).")
    return (f"Planner: with the variance components of the differences pooled over the {pairs} compared pair"
            f"{'s' if pairs != 1 else ''} (mean squares averaged, then clipped; {sd}), detecting a "
            f"{RELATIVE_EFFECT:.0%} effect ({effect:.4f} {measure}) at alpha {alpha:g} with power {power:g} (t "
            f"approximation, the seed-aware test's df) needs, per number of seeds, these test queries: {cells}; "
            f"{best_txt}.{own}")


def _seeds(n: int | None) -> str:
    return "over 1,000" if n is None else f"{n:,}"


def seeds_range(components: tuple[float, float, float], effect: float, seeds: int, queries: int,
                alpha: float = 0.05, power: float = 0.8
                ) -> tuple[float, float, tuple[int | None, int | None, int | None]]:
    """(sd_seed low, high, (seeds needed, at low, at high)): the 90% interval of the seed SD estimated from ``seeds`` x
    ``queries`` (:func:`curricula.statistics.power.seed_sd_interval`) and the seeds ``queries`` test queries need to
    detect ``effect`` (:func:`curricula.statistics.power.design_seeds`) at the estimate and at both ends."""
    low, high = seed_sd_interval(components, seeds, queries)
    n, n_low, n_high = (design_seeds(c, effect, queries, alpha, power) for c in
                        (components, with_seed_sd(components, low), with_seed_sd(components, high)))
    return low, high, (n, n_low, n_high)


def converged_length(curves: Mapping[str, pl.DataFrame]) -> tuple[int, dict[str, int]]:
    """The training length a grid's curricula can be measured against (issue: under early stopping it is not known
    in advance): the median over seeds of the step whose dev evaluation was kept (``best``) in each seed's
    ``dev_curve.parquet`` of one experiment, normally ``baseline``. Returns (median rounded half up, {seed: best
    step}). Set ``train.steps`` to it and every fraction of the papers (Penha's T = 0.9, Su's T0 = 0.1 and T = 0.5
    of training) resolves against the length a model without a curriculum converges in. ValueError without
    curves or when a curve has no ``best`` row."""
    if not curves:
        raise ValueError("no dev curves to measure a converged length from")
    best = {}
    for seed, curve in curves.items():
        kept = curve.filter(pl.col("best"))["step"]
        if kept.is_empty():
            raise ValueError(f"seed {seed}: the dev curve marks no kept (best) evaluation")
        best[seed] = int(kept[0])
    return int(math.floor(float(np.median(list(best.values()))) + 0.5)), best


def planner_markdown(metrics: pl.DataFrame, measure: str, alpha: float = 0.05, power: float = 0.8,
                     max_queries: int | None = None) -> list[str]:
    """The power planner of one finished grid as Markdown lines: the variance components of every experiment's
    differences from its baseline (:func:`curricula.report.power.power_table`, seed-aware) pooled by
    :func:`curricula.report.power.pooled_components`, then per number of seeds S
    (:data:`curricula.statistics.power.SEEDS_PLANNED`) the test queries a 2% effect
    (:data:`curricula.report.power.RELATIVE_EFFECT`) needs (:func:`curricula.statistics.power.plan`) and the MDE at the
    grid's own number of test queries (:func:`curricula.statistics.power.design_mdes`), absolute and as % of the mean of
    the baselines, each also at both ends of the seed SD's 90% interval; then the seeds the grid's own test split needs
    (:func:`seeds_range`). Raises ValueError when the grid has no balanced comparison to estimate components from."""
    table = power_table(metrics, measure, alpha=alpha, power=power)
    components = pooled_components(table)
    if components is None:
        raise ValueError(f"no balanced experiment-baseline comparison on {measure}: no variance components")
    # with components the table has rows, and seeds on some (polars types these aggregates as any literal or None)
    base = float(cast(float, table["baseline_mean"].mean()))
    queries, seeds = int(cast(int, table["queries"].max())), int(cast(int, table["seeds"].max()))
    effect = RELATIVE_EFFECT * base
    low, high, (n, n_low, n_high) = seeds_range(components, effect, seeds, queries, alpha, power)
    ends = [with_seed_sd(components, x) for x in (low, high)]
    needed = [plan(c, effect, alpha=alpha, power=power, max_queries=max_queries) for c in (components, *ends)]
    mdes = [design_mdes(c, queries, alpha=alpha, power=power) for c in (components, *ends)]
    sd = ", ".join(f"sd_{n} {math.sqrt(v):.4f}" for n, v in zip(("seed", "query", "resid"), components))
    head = (f"{table.height} comparisons, {seeds} seeds x {queries:,} test queries; pooled components of the "
            f"differences (mean squares averaged, then clipped): {sd}; the 90% interval of sd_seed, which rests on "
            f"{seeds - 1} df: {low:.4f} to {high:.4f}; mean of the baselines {base:.4f} {measure}, so a "
            f"{RELATIVE_EFFECT:.0%} effect is {effect:.4f} (alpha {alpha:g}, power {power:g}). At {queries:,} test "
            f"queries it needs {_seeds(n)} seeds ({_seeds(n_low)} to {_seeds(n_high)} over that interval).")
    lines = [head, "",
             f"| seeds | test queries for a {RELATIVE_EFFECT:.0%} effect (sd_seed low – high) | MDE at {queries:,} "
             "test queries (low – high) | MDE % |", "|---|---|---|---|"]

    def count(q: int | None) -> str:
        return f"{q:,}" if q is not None else "out of reach"

    for s in SEEDS_PLANNED:
        lines.append(f"| {s} | {count(needed[0][s])} ({count(needed[1][s])} – {count(needed[2][s])}) | "
                     f"{mdes[0][s]:.4f} ({mdes[1][s]:.4f} – {mdes[2][s]:.4f}) | {100 * mdes[0][s] / base:.1f}% |")
    return lines


def mark(p: float, difference: float = 1.0) -> str:
    """``‡``/``†`` for a significant improvement (p < 0.01 / 0.05), ``↓↓``/``↓`` for a significant reduction.

    ``difference`` is mean(experiment - baseline); only its sign is used.
    """
    if p >= 0.05 or difference == 0:
        return ""
    if difference > 0:
        return "‡" if p < 0.01 else "†"
    return "↓↓" if p < 0.01 else "↓"


def _pvalue(metrics: pl.DataFrame, experiment: str, measure: str, seed: str | None, test: str = "ttest",
            permutations: int = 10_000, rng_seed: int = 0,
            inference: str = "per_query") -> tuple[float, float]:
    """(p value, mean difference experiment - its baseline) on one measure: of the configured per-query paired
    test for one seed or, with ``inference="per_query"``, on seed-averaged values; of :func:`seed_aware_test` over
    every seed otherwise."""
    if seed is None and inference == "seed_aware":
        a, b = paired_cells(metrics, experiment, measure)
        result = seed_aware_test(a - b)
        return result.p, result.effect
    a, b = _paired(metrics, experiment, measure, seed)
    diff = float((a - b).mean()) if a.size else 0.0
    return paired_pvalue(a, b, test, permutations=permutations, seed=rng_seed), diff


def _marks(metrics: pl.DataFrame, experiments: Sequence[str], measure: str, seed: str | None,
           use_holm: bool, test: str = "ttest", permutations: int = 10_000, rng_seed: int = 0,
           inference: str = "per_query") -> dict[str, str]:
    """A mark per experiment against its baseline (``""`` for the baselines); with ``use_holm`` every comparison of
    the row (both baseline groups) is one Holm family. ``inference`` as in :func:`_pvalue`."""
    others = [e for e in experiments if e != baseline_of(e)]
    tests = [_pvalue(metrics, e, measure, seed, test, permutations, rng_seed, inference) for e in others]
    p = [t[0] for t in tests]
    if use_holm and p:
        p = holm(p)
    return {e: "" for e in experiments} | {e: mark(x, t[1]) for e, x, t in zip(others, p, tests)}


def seeds_table(metrics: pl.DataFrame, measure: str, use_holm: bool = False, *, test: str = "ttest",
                permutations: int = 10_000, seed: int = 0, inference: str = "seed_aware") -> pl.DataFrame:
    """Penha Table 5: rows seed.../AVG/SD, a value and a mark column per experiment (:func:`experiment_order`).

    ``test``, ``permutations`` and ``seed`` (the randomization test's RNG seed) go to :func:`paired_pvalue`, the
    test of each seed's row. The AVG row's marks are :func:`seed_aware_test`'s over every seed (``inference``
    ``seed_aware``, the default; then ``<experiment>_mark_per_query`` columns keep the per-query test's marks on
    seed-averaged values) or that per-query test's (``per_query``).
    """
    check_inference(inference)
    metrics = _in_order(metrics)
    experiments = experiment_order(set(metrics["experiment"]))
    seeds = sorted(set(metrics["seed"]), key=lambda s: int(s) if s.lstrip("-").isdigit() else s)
    means = metrics.filter(pl.col("measure") == measure).group_by("experiment", "seed").agg(pl.col("value").mean())
    mean_of = {(e, s): v for e, s, v in means.iter_rows()}
    rows = []
    for s in seeds:
        marks = _marks(metrics, experiments, measure, s, use_holm, test, permutations, seed)
        rows.append({"row": f"seed {s}", **{e: mean_of.get((e, s)) for e in experiments},
                     **{f"{e}_mark": marks[e] for e in experiments}})
    marks = _marks(metrics, experiments, measure, None, use_holm, test, permutations, seed, inference)
    per_seed = {e: [mean_of[(e, s)] for s in seeds if (e, s) in mean_of] for e in experiments}
    rows.append({"row": "AVG", **{e: float(np.mean(v)) for e, v in per_seed.items()},
                 **{f"{e}_mark": marks[e] for e in experiments}})
    rows.append({"row": "SD", **{e: float(np.std(v, ddof=1)) if len(v) > 1 else math.nan for e, v in per_seed.items()},
                 **{f"{e}_mark": "" for e in experiments}})
    schema = {"row": pl.String, **{e: pl.Float64 for e in experiments}, **{f"{e}_mark": pl.String for e in experiments}}
    table = pl.DataFrame(rows, schema=schema)
    if inference == "seed_aware":  # the per-query marks beside: the seed rows' own, the AVG row's on averages
        second = _marks(metrics, experiments, measure, None, use_holm, test, permutations, seed)
        table = table.with_columns(pl.when(pl.col("row") == "AVG").then(pl.lit(second[e])).otherwise(
            pl.col(f"{e}_mark")).alias(f"{e}_mark_per_query") for e in experiments)
    return table


def metrics_table(metrics: pl.DataFrame, measures: Sequence[str], references: pl.DataFrame | None = None,
                  use_holm: bool = False, *, test: str = "ttest", permutations: int = 10_000,
                  seed: int = 0, inference: str = "seed_aware") -> pl.DataFrame:
    """MacAvaney Table 3: a row per experiment (then each reference ranker), value and mark per measure. Marks by
    ``inference`` (see :func:`seeds_table`); with ``seed_aware``, ``<measure>_mark_per_query`` columns keep the
    per-query test's marks on seed-averaged values."""
    check_inference(inference)
    metrics = _in_order(metrics)
    experiments = experiment_order(set(metrics["experiment"]))
    per_seed = _in_order(metrics.group_by("experiment", "seed", "measure").agg(pl.col("value").mean()))
    avg = {(e, m): v for e, m, v in per_seed.group_by("experiment", "measure").agg(pl.col("value").mean()).iter_rows()}
    marks = {m: _marks(metrics, experiments, m, None, use_holm, test, permutations, seed, inference)
             for m in measures}
    second = {m: _marks(metrics, experiments, m, None, use_holm, test, permutations, seed)
              for m in measures} if inference == "seed_aware" else {}
    rows = [{"ranker": e, **{m: avg.get((e, m)) for m in measures}, **{f"{m}_mark": marks[m][e] for m in measures},
             **{f"{m}_mark_per_query": second[m][e] for m in second}} for e in experiments]
    if references is not None and references.height:
        ref = _in_order(references).group_by("experiment", "measure").agg(pl.col("value").mean())
        ref_avg = {(e, m): v for e, m, v in ref.iter_rows()}
        for e in sorted(set(references["experiment"])):
            rows.append({"ranker": e, **{m: ref_avg.get((e, m)) for m in measures},
                         **{f"{m}_mark": "" for m in measures}, **{f"{m}_mark_per_query": "" for m in second}})
    schema = {"ranker": pl.String, **{m: pl.Float64 for m in measures}, **{f"{m}_mark": pl.String for m in measures},
              **{f"{m}_mark_per_query": pl.String for m in second}}
    return pl.DataFrame(rows, schema=schema)


def to_markdown(table: pl.DataFrame, key: str, digits: int = 4) -> str:
    """A Markdown table: each value column printed with its ``<col>_mark`` appended (e.g. ``0.6006†``) and, where a
    ``<col>_mark_per_query`` column gives another mark, that one in parentheses (``0.6006 (‡)``; ``(–)``: none)."""
    values = [c for c in table.columns if c != key and not c.endswith(("_mark", "_mark_per_query"))]
    lines = ["| " + " | ".join([key, *values]) + " |", "|" + "---|" * (len(values) + 1)]
    for row in table.iter_rows(named=True):
        cells = []
        for c in values:
            v = row[c]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append("–")
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                first, second = row.get(f"{c}_mark") or "", row.get(f"{c}_mark_per_query")
                aside = f" ({second or '–'})" if second is not None and second != first else ""
                cells.append(f"{v:.{digits}f}{first}{aside}" if isinstance(v, float) else str(v))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join([str(row[key]), *cells]) + " |")
    return "\n".join(lines) + "\n"


def write_table_files(table: pl.DataFrame, key: str, stem: str | Path, caption: str) -> dict[str, Path]:
    """``<stem>.md`` (caption + table), ``<stem>.csv`` and ``<stem>.parquet``, each written atomically."""
    stem = Path(stem)
    return {"md": write_text_atomically(stem.with_suffix(".md"), f"{caption}\n\n{to_markdown(table, key)}"),
            "csv": write_file_atomically(stem.with_suffix(".csv"), table.write_csv),
            "parquet": write_file_atomically(stem.with_suffix(".parquet"), table.write_parquet)}


def describe_test(test: str, permutations: int, seed: int) -> str:
    """How a caption names the configured paired test."""
    if test not in TESTS:
        raise ValueError(f"unknown paired test {test!r}; expected one of {', '.join(TESTS)}")
    if test == "randomization":
        return f"{TEST_NAMES[test]} ({permutations:,} random sign flips, seed {seed})"
    if test == "wilcoxon":
        return f"{TEST_NAMES[test]} (zero differences dropped)"
    return TEST_NAMES[test]


def has_bm25_rows(experiments: Iterable[str]) -> bool:
    """Whether a grid has +bm25 experiments besides baseline+bm25 (compared with baseline+bm25, not the baseline)."""
    return any(e.endswith(BM25_SUFFIX) and e != BASELINE + BM25_SUFFIX for e in experiments)


def averaged_marks_note(inference: str, described: str) -> str:
    """How the captions name the test behind the seed-averaged marks: the seed-aware test with the per-query test's
    mark beside it (``seed_aware``) or the per-query test ``described`` on seed-averaged values (``per_query``)."""
    if inference == "seed_aware":
        return (f"{SEED_AWARE_NAME} over every seed and test query; in parentheses where it differs, the mark of the "
                f"{described} on seed-averaged per-query values (–: none)")
    return f"{described} on the seed-averaged per-query values"


def power_caption(power: pl.DataFrame, measure: str, dataset: str, described: str, *, test: str, inference: str,
                  bm25: bool, sentence: str, plan_max_queries: int | None = None) -> str:
    """The power table's caption: what each column is, which p value judges the marks, the MDE ``sentence``
    (:func:`curricula.report.power.mde_sentence`) and the planner (:func:`plan_sentence` on the pooled components,
    at most ``plan_max_queries`` test queries)."""
    second = "" if test == "ttest" else f"; p_{test}: the {described}"
    pooled = pooled_components(power)
    # a float column's mean and an int column's max (None when it is all null), which polars types as any literal
    base_mean = float(cast(float, power["baseline_mean"].mean())) if power.height else math.nan
    planner = plan_sentence(pooled, RELATIVE_EFFECT * base_mean, power.height, measure,
                            max_queries=plan_max_queries, seeds=int(cast("int | None", power["seeds"].max()) or 0),
                            queries=int(cast("int | None", power["queries"].max()) or 0)) if pooled is not None else ""
    judge = "p_seed_aware" if inference == "seed_aware" else "the per-query test"
    if inference == "seed_aware":
        judged = ("mde: the minimum detectable mean difference of the seed-aware test (alpha 0.05, power 0.8), "
                  "(t_0.975,df + t_0.8,df) * se; queries_2pct: test queries that test needs, with this many "
                  "seeds and these variance components, to detect a 2% change of the baseline mean")
    else:
        judged = ("mde: the minimum detectable mean difference of the paired t-test (alpha 0.05, power 0.8), "
                  "(t_0.975,n-1 + t_0.8,n-1) * sd / sqrt(n) (Cohen 1988; Sakai 2016); queries_2pct: test queries "
                  "needed to detect a 2% change of the baseline mean with the same sd")
    return (f"Power of the comparisons on test {measure} ({dataset}) against the baseline"
            f"{' (baseline+bm25 for the +bm25 rows)' if bm25 else ''}. difference: "
            "mean of experiment - baseline; sd: the standard deviation of the seed-averaged per-query "
            "differences (ddof 1); sd_seed, sd_query, sd_resid: the seed, query and residual variance "
            "components of the per-seed per-query differences (crossed random effects, method of moments), "
            f"se and df: the standard error of the mean difference and its Satterthwaite df; p_seed_aware: "
            f"the {SEED_AWARE_NAME}; p_ttest: the per-query paired two-sided t-test on seed-averaged "
            f"values{second}. The marks are judged by {judge}. "
            f"{judged}; mde_pct: mde as % of the baseline mean."
            + (f" {sentence}" if sentence else "") + (f" {planner}" if planner else ""))


def table_captions(metrics: pl.DataFrame, power: pl.DataFrame, measure: str, dataset: str, described: str, *,
                   use_holm: bool, test: str, inference: str, plan_max_queries: int | None = None) -> dict[str, str]:
    """The captions of rule ``report_tables``'s ``seeds``, ``metrics`` and ``power`` tables (:func:`power_caption`):
    the data, the marks and the test behind them (``described``, :func:`describe_test`)."""
    n_q = metrics["qid"].n_unique()
    holm_note = " (Holm-Bonferroni adjusted)" if use_holm else ""
    bm25 = has_bm25_rows(set(metrics["experiment"]))
    bm25_note = " The +bm25 rows are compared with baseline+bm25." if bm25 else ""
    marks = f"Better than the baseline: † p < 0.05, ‡ p < 0.01; worse: ↓ p < 0.05, ↓↓ p < 0.01{holm_note}"
    averaged = averaged_marks_note(inference, described)
    sentence = mde_sentence(power, measure, inference=inference)
    return {"seeds": f"Test {measure} on {dataset} ({n_q} queries) per seed, their average and standard deviation. "
                     f"{marks}; per seed: {described} against the baseline of the same seed; AVG: {averaged}."
                     f"{bm25_note}",
            "metrics": f"Test effectiveness on {dataset} ({n_q} queries), mean over seeds. {marks}; {averaged}; "
                       f"against the baseline.{bm25_note} Reference rankers (BM25 with default "
                       "k1/b and tuned on dev, the teacher, teacher+bm25) are not tested."
                       + (f" {sentence}" if sentence else ""),
            "power": power_caption(power, measure, dataset, described, test=test, inference=inference, bm25=bm25,
                                   sentence=sentence, plan_max_queries=plan_max_queries)}


#: the row key column of each of rule ``report_tables``' tables (:func:`build_tables`, :func:`write_table_files`)
TABLE_KEYS = {"seeds": "row", "metrics": "ranker", "power": "experiment"}


def build_tables(metrics: pl.DataFrame, refs: pl.DataFrame | None, *, measure: str, measures: Sequence[str],
                 use_holm: bool, dataset: str, test: str = "ttest", permutations: int = 10_000, seed: int = 0,
                 inference: str = "seed_aware",
                 plan_max_queries: int | None = None) -> tuple[dict[str, pl.DataFrame], dict[str, str]]:
    """Rule ``report_tables``: the seeds table (one measure), the metrics table and the power table (one measure) of
    the runs' long ``metrics`` (:func:`curricula.evaluation.comparisons.load_metrics`; ``refs`` the reference
    rankers', :func:`reference_metrics`), and each one's caption (:func:`table_captions`), keyed seeds, metrics,
    power (:data:`TABLE_KEYS`).

    ``test`` is the per-query paired test (``report.test``); ``permutations`` and ``seed`` drive the
    randomization test. ``inference`` (``report.inference``) judges the seed-averaged marks: ``seed_aware`` (the
    default) or ``per_query``. The power table's caption carries the planner (:func:`plan_sentence`, its largest
    number of test queries ``plan_max_queries``, ``report.plan_max_queries``).
    """
    check_inference(inference)
    described = describe_test(test, permutations, seed)
    if measure not in set(metrics["measure"]):
        raise ValueError(f"report.measure {measure!r} is not among the evaluated measures "
                         f"{sorted(set(metrics['measure']))}")
    knobs: dict[str, Any] = {"test": test, "permutations": permutations, "seed": seed, "inference": inference}
    tables = {"seeds": seeds_table(metrics, measure, use_holm, **knobs),
              "metrics": metrics_table(metrics, measures, refs, use_holm, **knobs),
              "power": power_table(metrics, measure, **knobs)}
    captions = table_captions(metrics, tables["power"], measure, dataset, described, use_holm=use_holm, test=test,
                              inference=inference, plan_max_queries=plan_max_queries)
    return tables, captions


def reference_metrics(reference_paths: Mapping[str, str | Path]) -> pl.DataFrame | None:
    """The reference rankers' per-query metrics ({name: its metrics file}) as one long frame, each ranker one
    "seed" (``0``); None without any."""
    return load_metrics({(name, "0"): p for name, p in reference_paths.items()}) if reference_paths else None

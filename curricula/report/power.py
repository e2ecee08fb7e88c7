"""The power table of one grid (rule ``report_tables``'s ``power`` table) and the pooling of its variance components.

Per experiment (not the baselines), on ``report.measure``: the mean difference to its baseline, the variance
components of the differences and their mean squares, the SE and df, the seed-aware and per-query p values, the
minimum detectable effect (:func:`curricula.statistics.power.seed_aware_mde`; :func:`curricula.statistics.power.mde`
under ``per_query``) and the test queries a 2% relative effect would need
(:func:`curricula.statistics.power.design_queries`; :func:`curricula.statistics.power.queries_needed`), so "no
difference" and "could not have seen one" are told apart. The components pooled over the comparisons
(:func:`pooled_components`) feed the planner (:func:`curricula.report.tables.plan_sentence`) and a study's planner
per dataset (:func:`curricula.study.findings.dataset_plans`).
"""

from __future__ import annotations

import math
from typing import cast

import polars as pl

from curricula.evaluation.comparisons import (
    _in_order,
    _paired,
    baseline_of,
    check_inference,
    experiment_order,
    seed_aware_result,
)
from curricula.statistics.paired import paired_pvalue, paired_ttest
from curricula.statistics.power import design_queries, mde, pool_components, queries_needed, seed_aware_mde
from curricula.statistics.seed_aware import SeedQueryComponents

RELATIVE_EFFECT = 0.02  # the power table's "queries needed" column: a 2% change of the baseline's mean


def power_table(metrics: pl.DataFrame, measure: str, *, test: str = "ttest", permutations: int = 10_000,
                seed: int = 0, alpha: float = 0.05, power: float = 0.8, inference: str = "seed_aware") -> pl.DataFrame:
    """A row per experiment other than the baselines, on ``measure``, against :func:`baseline_of` it: ``seeds``,
    ``queries``, ``baseline_mean``, ``experiment_mean``, ``difference`` (mean of experiment - baseline), ``sd`` (of the
    seed-averaged per-query differences, ddof=1), ``sd_seed``, ``sd_query``, ``sd_resid`` (square roots of the clipped
    variance components of the differences, :func:`curricula.statistics.seed_aware.seed_query_components`), ``ms_seed``,
    ``ms_query``, ``ms_resid`` (their mean squares, null where they have no df), ``se`` and ``df`` (of the mean
    difference, :func:`curricula.statistics.seed_aware.seed_aware_test`), ``p_seed_aware``, ``p_ttest`` (per-query
    paired t-test on seed-averaged values), ``p_<test>`` (only when ``test`` is not ``ttest``), ``mde``, ``mde_pct``
    (100 * mde / baseline mean) and ``queries_2pct`` (test queries an effect of 2% of the baseline mean needs; null when
    not positive or out of reach). ``mde`` and ``queries_2pct`` follow ``inference``: with ``seed_aware`` (the default)
    :func:`seed_aware_mde` and :func:`design_queries` at this table's number of seeds; with ``per_query`` :func:`mde`
    and :func:`queries_needed` of the seed-averaged differences. The seed-aware columns are null when the design is
    unbalanced and ``inference`` is ``per_query`` (``seed_aware`` refuses it). Rows in :func:`experiment_order`."""
    check_inference(inference)
    metrics = _in_order(metrics.filter(pl.col("measure") == measure))
    second = [] if test == "ttest" else [f"p_{test}"]
    rows = []
    for e in experiment_order(set(metrics["experiment"])):
        if e == baseline_of(e):
            continue
        a, b = _paired(metrics, e, measure, None)
        d = a - b
        base_mean = float(b.mean()) if b.size else math.nan
        sd = float(d.std(ddof=1)) if d.size > 1 else math.nan
        effect = RELATIVE_EFFECT * base_mean
        result = seed_aware_result(metrics, e, measure, alpha=alpha, inference=inference)
        c = result.components if result is not None else None
        try:
            if inference == "seed_aware":
                assert result is not None and c is not None  # seed_aware_result raises, never gives None, here
                mde_abs = seed_aware_mde(result, alpha, power)
                needed = design_queries((c.var_seed, c.var_query, c.var_resid), effect, c.seeds, alpha, power)
            else:
                mde_abs = mde(d, alpha, power)
                needed = queries_needed(sd, effect, alpha, power)
        except (ValueError, OverflowError):
            needed = None
        rows.append({"experiment": e, "baseline": baseline_of(e), "seeds": c.seeds if c else None,
                     "queries": int(d.size), "baseline_mean": base_mean,
                     "experiment_mean": float(a.mean()) if a.size else math.nan,
                     "difference": float(d.mean()) if d.size else math.nan, "sd": sd,
                     **{f"sd_{k}": math.sqrt(getattr(c, f"var_{k}")) if c else None
                        for k in ("seed", "query", "resid")},
                     **{f"ms_{k}": _finite(getattr(c, f"ms_{k}")) if c else None for k in ("seed", "query", "resid")},
                     "se": result.se if result else None, "df": result.df if result else None,
                     "p_seed_aware": result.p if result else None, "p_ttest": paired_ttest(a, b),
                     **{k: paired_pvalue(a, b, test, permutations=permutations, seed=seed) for k in second},
                     "mde": mde_abs, "mde_pct": 100 * mde_abs / base_mean if base_mean > 0 else math.nan,
                     "queries_2pct": needed})
    schema = {"experiment": pl.String, "baseline": pl.String, "seeds": pl.Int64, "queries": pl.Int64,
              **{k: pl.Float64 for k in ("baseline_mean", "experiment_mean", "difference", "sd", "sd_seed", "sd_query",
                                         "sd_resid", "ms_seed", "ms_query", "ms_resid", "se", "df", "p_seed_aware",
                                         "p_ttest", *second, "mde",
                                         "mde_pct")}, "queries_2pct": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def unclipped_components(rows: pl.DataFrame) -> list[tuple[float, float, float]]:
    """Each row's unclipped method-of-moments components from its ``seeds``, ``queries`` and mean squares
    (``ms_seed``, ``ms_query``, ``ms_resid``): ((MS_seed - MS_resid) / Q, (MS_query - MS_resid) / S, MS_resid); a
    row without a residual mean square (one seed or one query) gives its clipped ``sd_*`` squared. Rows without
    components (null ``sd_seed``) are left out. Works on a :func:`power_table` and on a findings table."""
    terms = ("seed", "query", "resid")
    return [SeedQueryComponents(r["seeds"], r["queries"], math.nan,
                                *(math.nan if r[f"ms_{k}"] is None else r[f"ms_{k}"] for k in terms),
                                *(r[f"sd_{k}"] ** 2 for k in terms)).unclipped()
            for r in rows.iter_rows(named=True) if r["sd_seed"] is not None]


def pooled_components(table: pl.DataFrame) -> tuple[float, float, float] | None:
    """(s2_seed, s2_query, s2_resid) pooled over the comparisons of a :func:`power_table` or a findings table: the
    unclipped components of each (:func:`unclipped_components`) averaged, then clipped
    (:func:`curricula.statistics.power.pool_components`); None without rows that have them."""
    parts = unclipped_components(table)
    return pool_components(parts) if parts else None


def mde_sentence(power: pl.DataFrame, measure: str, alpha: float = 0.05, power_level: float = 0.8,
                 inference: str = "seed_aware") -> str:
    """One plain sentence on the power of the comparisons in ``power`` (a :func:`power_table` made with
    ``inference``): the median over experiments of the MDE, its share of the baseline mean and the queries a 2%
    effect needs; "" when there are no experiments (or fewer than 2 queries)."""
    mdes = power["mde"].drop_nans().drop_nulls()
    if mdes.is_empty():
        return ""
    # each median below is of a non-empty numeric column, so a float (polars types median() as any literal or None)
    n = math.ceil(float(cast(float, power["queries"].median())))
    pct = power["mde_pct"].drop_nans().drop_nulls()
    bases = {(b, m) for b, m in power.select("baseline", "baseline_mean").iter_rows()}
    whose = f"the baseline's {next(iter(bases))[1]:.4f}" if len(bases) == 1 else "the baseline's mean"
    share = (f" ({float(cast(float, pct.median())):.1f}% of {whose}; median over experiments)"
             if not pct.is_empty() else " (median over experiments)")
    needed = power["queries_2pct"].drop_nulls()
    need = (f"; a {RELATIVE_EFFECT:.0%} effect would need {math.ceil(float(cast(float, needed.median()))):,} queries"
            if not needed.is_empty() else "")
    if inference == "seed_aware":
        seeds = power["seeds"].drop_nulls()
        what = f"and {int(cast(float, seeds.median()))} seeds the seed-aware comparison" if not seeds.is_empty() else \
            "the seed-aware comparison"
        need += " with as many seeds" if need else ""
    else:
        what = "the seed-averaged paired comparison"
    return (f"With {n:,} test queries {what} detects (alpha {alpha:g}, power "
            f"{power_level:g}) differences of {measure} ≥ {float(cast(float, mdes.median())):.3f}{share}{need}.")

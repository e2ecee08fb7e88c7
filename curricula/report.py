"""Significance tests, statistical power and the papers' tables from per-query test metrics (rule ``report_tables``).

Protocol (Penha & Hauff 2020 §4-5, Table 5): for each experiment and seed, a paired two-sided test of its per-query
values against the baseline run *of the same seed*; for the AVG row, the same test on the per-query values averaged
over seeds. The test is the config's ``report.test``: ``ttest`` (Student's paired t-test, the papers' choice and the
default), ``randomization`` (Fisher's paired randomization test by random sign flips, Smucker et al. 2007) or
``wilcoxon`` (signed-rank test); see :func:`paired_pvalue`. Marks for a significant improvement over the baseline:
``†`` p < 0.05, ``‡`` p < 0.01 (Table 5's symbols); for a significant reduction: ``↓`` p < 0.05, ``↓↓`` p < 0.01
(MacAvaney Table 6's arrow), so a mark never hides the direction. With ``holm: true`` the p values of one row (all
experiments of the table row against their baselines, as one family) are Holm-Bonferroni adjusted before marking.

Which baseline an experiment is compared with is :func:`baseline_of`: ``<name>+bm25`` rows (score additivity with
BM25) against ``baseline+bm25``, every other row against ``baseline``. Tables list the ``baseline`` group first
(``baseline``, then the others sorted), then the ``baseline+bm25`` group the same way (:func:`experiment_order`).

Tables:
* ``seeds``: like Penha Table 5: rows = each seed, AVG, SD (over seeds of the per-seed means); columns =
  experiments; one measure (the config's ``report.measure``, default MAP).
* ``metrics``: like MacAvaney Table 3: rows = experiments (and the reference rankers), columns = measures; the mean
  over seeds of the per-seed means, marked by the configured test on seed-averaged per-query values against the
  baseline. Its caption states the minimum detectable effect (median over experiments).
* ``power``: per experiment (not the baselines), on ``report.measure`` and seed-averaged per-query values: the mean
  difference to its baseline, its SD, the t-test's p value (and the configured test's when that is not the t-test),
  the minimum detectable effect (:func:`mde`) and the test queries a 2% relative effect would need
  (:func:`queries_needed`), so "no difference" and "could not have seen one" are told apart.
Written as Markdown, CSV and Parquet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import norm, t as student_t, ttest_rel, wilcoxon

from curricula.tables import write_file_atomically, write_text_atomically

BASELINE = "baseline"
BM25_SUFFIX = "+bm25"
TESTS = ("ttest", "wilcoxon", "randomization")
TEST_NAMES = {"ttest": "paired two-sided t-test", "wilcoxon": "two-sided Wilcoxon signed-rank test",
              "randomization": "two-sided paired randomization test"}
RELATIVE_EFFECT = 0.02  # the power table's "queries needed" column: a 2% change of the baseline's mean
_CHUNK = 1 << 21  # sign-flip matrix elements per chunk of the randomization test (16 MiB as float64)


def baseline_of(experiment: str) -> str:
    """The run an experiment is compared with: ``baseline+bm25`` for ``<name>+bm25`` (score additivity with BM25),
    ``baseline`` for every other name. The baselines compare with themselves."""
    return BASELINE + BM25_SUFFIX if experiment.endswith(BM25_SUFFIX) else BASELINE


def experiment_order(experiments: Sequence[str] | set[str]) -> list[str]:
    """The table order: the ``baseline`` group (``baseline`` first, then the others sorted), then the
    ``baseline+bm25`` group the same way, each group listed only when one of its names is present. A baseline is
    always listed with its group (if it has no metrics the comparison fails with a clear error)."""
    out: list[str] = []
    for base in (BASELINE, BASELINE + BM25_SUFFIX):
        group = {e for e in experiments if baseline_of(e) == base} - {base}
        if group or base in experiments:
            out += [base, *sorted(group)]
    return out


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p value of a vs b (scipy ``ttest_rel``); 1.0 when the differences are all equal."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired test needs equal lengths, got {a.shape} and {b.shape}")
    if a.size < 2 or np.allclose(a - b, (a - b)[0]):
        return 1.0
    return float(ttest_rel(a, b).pvalue)


def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired test needs two vectors of equal length, got {a.shape} and {b.shape}")
    return a - b


def paired_randomization(a: Sequence[float], b: Sequence[float], *, permutations: int = 10_000,
                         seed: int = 0) -> float:
    """Two-sided p value of Fisher's paired randomization test of a vs b (Smucker et al. 2007, CIKM).

    Under H0 each per-query pair is exchangeable, i.e. each difference ``d_i = a_i - b_i`` keeps or flips its sign
    with probability 1/2. ``permutations`` random sign vectors ``s`` (drawn by ``numpy.random.default_rng(seed)``, so
    every call with the same seed and n uses the same flips) give ``T_s = |sum_i s_i d_i|``; the estimator is

        p = (1 + #{s : T_s >= T_obs}) / (1 + permutations),     T_obs = |sum_i d_i|

    (the observed assignment counted as one of the permutations, so p is never 0; Phipson & Smyth 2010). Sums
    instead of means (same test, n is fixed); ``>=`` is taken up to ``1e-9 * sum|d_i|`` so that floating-point
    rounding of equal sums (ties are common with P@1 or RR) counts as equal. The flips are processed in chunks as
    a ``(chunk, n)`` 0/1 flip matrix times ``d`` (``s = 1 - 2 * flip``). 1.0 when all differences are zero (or n == 0).
    """
    d = _differences(a, b)
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations}")
    observed = abs(float(d.sum()))
    if d.size == 0 or not np.any(d):
        return 1.0
    threshold = observed - 1e-9 * float(np.abs(d).sum())
    total = float(d.sum())
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // d.size)
    hits, done = 0, 0
    while done < permutations:
        k = min(rows, permutations - done)
        # flip bits f (1 = flip), one random byte per 8 queries: sum_i s_i d_i = sum_i d_i - 2 * (f @ d)
        flips = np.unpackbits(rng.integers(0, 256, size=(k, (d.size + 7) // 8), dtype=np.uint8), axis=1,
                              count=d.size).astype(np.float64)
        hits += int(np.count_nonzero(np.abs(total - 2.0 * (flips @ d)) >= threshold))
        done += k
    return (1 + hits) / (1 + permutations)


def paired_wilcoxon(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Wilcoxon signed-rank p value of a vs b (scipy ``wilcoxon``, ``zero_method="wilcox"``: zero
    differences are dropped before ranking, Wilcoxon's original treatment; scipy's default exact/normal choice).
    1.0 when all differences are zero."""
    d = _differences(a, b)
    if not np.any(d):
        return 1.0
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def paired_pvalue(a: Sequence[float], b: Sequence[float], test: str, *, permutations: int = 10_000,
                  seed: int = 0) -> float:
    """Two-sided paired p value of a vs b by ``test``: ``ttest`` (:func:`paired_ttest`), ``wilcoxon``
    (:func:`paired_wilcoxon`) or ``randomization`` (:func:`paired_randomization` with ``permutations`` and ``seed``).
    """
    if test == "ttest":
        return paired_ttest(a, b)
    if test == "wilcoxon":
        return paired_wilcoxon(a, b)
    if test == "randomization":
        return paired_randomization(a, b, permutations=permutations, seed=seed)
    raise ValueError(f"unknown paired test {test!r}; expected one of {', '.join(TESTS)}")


def _power_factor(n: int, alpha: float, power: float) -> float:
    """``t_{1-alpha/2, n-1} + t_{power, n-1}``."""
    return float(student_t.ppf(1 - alpha / 2, n - 1) + student_t.ppf(power, n - 1))


def _check_levels(alpha: float, power: float) -> None:
    if not 0 < alpha < 1 or not 0.5 <= power < 1:
        raise ValueError(f"need 0 < alpha < 1 and 0.5 <= power < 1, got alpha={alpha}, power={power}")


def mde(differences: Sequence[float], alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable (absolute) mean difference of a two-sided paired t-test at level ``alpha`` with ``power``.

    From the observed per-query differences d (n = len(d), s = their sample SD, ddof=1):

        MDE = (t_{1-alpha/2, n-1} + t_{power, n-1}) * s / sqrt(n)

    the standard power formula of the one-sample / paired t-test (Cohen 1988, *Statistical Power Analysis for the
    Behavioral Sciences*, ch. 2, the normal approximation with t quantiles in place of z), as used for IR test
    collections by Sakai 2016 ("Statistical significance, power, and sample sizes: a systematic review of SIGIR and
    TOIS, 2006-2015", SIGIR). It is the true mean difference a test on n queries of this variability detects with
    probability ``power``. nan when n < 2.
    """
    _check_levels(alpha, power)
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return math.nan
    return _power_factor(d.size, alpha, power) * float(d.std(ddof=1)) / math.sqrt(d.size)


def queries_needed(sd: float, effect: float, alpha: float = 0.05, power: float = 0.8,
                   max_queries: int = 10**12) -> int:
    """Smallest n >= 2 with ``(t_{1-alpha/2,n-1} + t_{power,n-1}) * sd / sqrt(n) <= effect``: the test queries a
    paired t-test needs to detect a true mean difference ``effect`` (> 0) with ``power`` at level ``alpha`` when the
    per-query differences have SD ``sd`` (the inverse of :func:`mde`).

    Starts from the normal-quantile answer ``ceil(((z_{1-alpha/2} + z_power) * sd / effect)^2)`` (a lower bound for
    power >= 0.5, as t quantiles exceed z quantiles), then doubles and bisects (the left side decreases in n).
    Raises ValueError for a non-positive effect or non-finite sd and OverflowError beyond ``max_queries``.
    """
    _check_levels(alpha, power)
    if not (effect > 0 and math.isfinite(effect)) or not (sd >= 0 and math.isfinite(sd)):
        raise ValueError(f"need effect > 0 and a finite sd >= 0, got effect={effect}, sd={sd}")

    def detects(n: int) -> bool:
        return _power_factor(n, alpha, power) * sd / math.sqrt(n) <= effect

    start = ((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * sd / effect) ** 2
    if start > max_queries:
        raise OverflowError(f"more than {max_queries} queries needed (sd={sd}, effect={effect})")
    # below the z answer nothing detects; n = 1 (no t-test) counts as not detecting
    lo, hi = max(1, math.ceil(start) - 1), max(2, math.ceil(start))
    while not detects(hi):
        lo, hi = hi, hi * 2
        if hi > 2 * max_queries:
            raise OverflowError(f"more than {max_queries} queries needed (sd={sd}, effect={effect})")
    while hi - lo > 1:  # invariant: detects(hi) and not detects(lo)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if detects(mid) else (mid, hi)
    if hi > max_queries:
        raise OverflowError(f"more than {max_queries} queries needed (sd={sd}, effect={effect})")
    return hi


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p values (step-down, monotone, capped at 1), in the input order."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    m = len(p)
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def mark(p: float, difference: float = 1.0) -> str:
    """``‡``/``†`` for a significant improvement (p < 0.01 / 0.05), ``↓↓``/``↓`` for a significant reduction.

    ``difference`` is mean(experiment - baseline); only its sign is used.
    """
    if p >= 0.05 or difference == 0:
        return ""
    if difference > 0:
        return "‡" if p < 0.01 else "†"
    return "↓↓" if p < 0.01 else "↓"


def load_metrics(paths: Mapping[tuple[str, str], str | Path]) -> pl.DataFrame:
    """One long frame (experiment, seed, qid, measure, value) from metrics.parquet files keyed by (name, seed)."""
    frames = [pl.read_parquet(p).with_columns(experiment=pl.lit(name), seed=pl.lit(str(seed)))
              for (name, seed), p in paths.items()]
    return pl.concat(frames).select("experiment", "seed", "qid", "measure", "value")


def _vector(metrics: pl.DataFrame, experiment: str, measure: str, seed: str | None) -> pl.DataFrame:
    rows = metrics.filter((pl.col("experiment") == experiment) & (pl.col("measure") == measure))
    if seed is not None:
        return rows.filter(pl.col("seed") == seed).select("qid", "value").sort("qid")
    return rows.group_by("qid").agg(pl.col("value").mean()).sort("qid")


def _paired(metrics: pl.DataFrame, experiment: str, measure: str, seed: str | None,
            against: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The per-query values of ``experiment`` and of ``against`` (default: :func:`baseline_of` it) on one measure,
    aligned by qid (one seed's, or seed-averaged when ``seed`` is None)."""
    base = baseline_of(experiment) if against is None else against
    a, b = _vector(metrics, experiment, measure, seed), _vector(metrics, base, measure, seed)
    joined = a.join(b, on="qid", suffix="_base")
    if joined.height != a.height or joined.height != b.height:
        raise ValueError(f"{experiment} and {base} were evaluated on different queries ({measure})")
    return joined["value"].to_numpy(), joined["value_base"].to_numpy()


def _pvalue(metrics: pl.DataFrame, experiment: str, measure: str, seed: str | None, test: str = "ttest",
            permutations: int = 10_000, rng_seed: int = 0) -> tuple[float, float]:
    """(p value, mean difference experiment - its baseline) of the configured paired test on one measure."""
    a, b = _paired(metrics, experiment, measure, seed)
    diff = float((a - b).mean()) if a.size else 0.0
    return paired_pvalue(a, b, test, permutations=permutations, seed=rng_seed), diff


def _marks(metrics: pl.DataFrame, experiments: Sequence[str], measure: str, seed: str | None,
           use_holm: bool, test: str = "ttest", permutations: int = 10_000, rng_seed: int = 0) -> dict[str, str]:
    """A mark per experiment against its baseline (``""`` for the baselines); with ``use_holm`` every comparison of
    the row (both baseline groups) is one Holm family."""
    others = [e for e in experiments if e != baseline_of(e)]
    tests = [_pvalue(metrics, e, measure, seed, test, permutations, rng_seed) for e in others]
    p = [t[0] for t in tests]
    if use_holm and p:
        p = holm(p)
    return {e: "" for e in experiments} | {e: mark(x, t[1]) for e, x, t in zip(others, p, tests)}


def _in_order(metrics: pl.DataFrame) -> pl.DataFrame:
    """The rows in one fixed order, so every mean sums in the same order and the tables are bit-for-bit a function
    of the rows, not of their order (polars' group_by returns groups in varying order)."""
    return metrics.sort([c for c in ("experiment", "seed", "measure", "qid") if c in metrics.columns])


def seeds_table(metrics: pl.DataFrame, measure: str, use_holm: bool = False, *, test: str = "ttest",
                permutations: int = 10_000, seed: int = 0) -> pl.DataFrame:
    """Penha Table 5: rows seed.../AVG/SD, a value and a mark column per experiment (:func:`experiment_order`).

    ``test``, ``permutations`` and ``seed`` (the randomization test's RNG seed) go to :func:`paired_pvalue`.
    """
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
    marks = _marks(metrics, experiments, measure, None, use_holm, test, permutations, seed)
    per_seed = {e: [mean_of[(e, s)] for s in seeds if (e, s) in mean_of] for e in experiments}
    rows.append({"row": "AVG", **{e: float(np.mean(v)) for e, v in per_seed.items()},
                 **{f"{e}_mark": marks[e] for e in experiments}})
    rows.append({"row": "SD", **{e: float(np.std(v, ddof=1)) if len(v) > 1 else math.nan for e, v in per_seed.items()},
                 **{f"{e}_mark": "" for e in experiments}})
    schema = {"row": pl.String, **{e: pl.Float64 for e in experiments}, **{f"{e}_mark": pl.String for e in experiments}}
    return pl.DataFrame(rows, schema=schema)


def metrics_table(metrics: pl.DataFrame, measures: Sequence[str], references: pl.DataFrame | None = None,
                  use_holm: bool = False, *, test: str = "ttest", permutations: int = 10_000,
                  seed: int = 0) -> pl.DataFrame:
    """MacAvaney Table 3: a row per experiment (then each reference ranker), value and mark per measure."""
    metrics = _in_order(metrics)
    experiments = experiment_order(set(metrics["experiment"]))
    per_seed = _in_order(metrics.group_by("experiment", "seed", "measure").agg(pl.col("value").mean()))
    avg = {(e, m): v for e, m, v in per_seed.group_by("experiment", "measure").agg(pl.col("value").mean()).iter_rows()}
    marks = {m: _marks(metrics, experiments, m, None, use_holm, test, permutations, seed) for m in measures}
    rows = [{"ranker": e, **{m: avg.get((e, m)) for m in measures}, **{f"{m}_mark": marks[m][e] for m in measures}}
            for e in experiments]
    if references is not None and references.height:
        ref = _in_order(references).group_by("experiment", "measure").agg(pl.col("value").mean())
        ref_avg = {(e, m): v for e, m, v in ref.iter_rows()}
        for e in sorted(set(references["experiment"])):
            rows.append({"ranker": e, **{m: ref_avg.get((e, m)) for m in measures},
                         **{f"{m}_mark": "" for m in measures}})
    schema = {"ranker": pl.String, **{m: pl.Float64 for m in measures}, **{f"{m}_mark": pl.String for m in measures}}
    return pl.DataFrame(rows, schema=schema)


def power_table(metrics: pl.DataFrame, measure: str, *, test: str = "ttest", permutations: int = 10_000,
                seed: int = 0, alpha: float = 0.05, power: float = 0.8) -> pl.DataFrame:
    """A row per experiment other than the baselines, on ``measure`` and seed-averaged per-query values, against
    :func:`baseline_of` it: ``queries``, ``baseline_mean``, ``experiment_mean``, ``difference`` (mean of
    experiment - baseline), ``sd`` (of the differences, ddof=1), ``p_ttest``, ``p_<test>`` (only when ``test`` is
    not ``ttest``: both tests are shown then), ``mde`` (:func:`mde`), ``mde_pct`` (100 * mde / baseline mean) and
    ``queries_2pct`` (:func:`queries_needed` for an effect of 2% of the baseline mean; null when that is not
    positive). Rows in :func:`experiment_order`."""
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
        mde_abs = mde(d, alpha, power)
        effect = RELATIVE_EFFECT * base_mean
        try:
            needed = queries_needed(sd, effect, alpha, power)
        except (ValueError, OverflowError):
            needed = None
        rows.append({"experiment": e, "baseline": baseline_of(e), "queries": int(d.size), "baseline_mean": base_mean,
                     "experiment_mean": float(a.mean()) if a.size else math.nan,
                     "difference": float(d.mean()) if d.size else math.nan, "sd": sd, "p_ttest": paired_ttest(a, b),
                     **{c: paired_pvalue(a, b, test, permutations=permutations, seed=seed) for c in second},
                     "mde": mde_abs, "mde_pct": 100 * mde_abs / base_mean if base_mean > 0 else math.nan,
                     "queries_2pct": needed})
    schema = {"experiment": pl.String, "baseline": pl.String, "queries": pl.Int64,
              **{c: pl.Float64 for c in ("baseline_mean", "experiment_mean", "difference", "sd", "p_ttest", *second,
                                         "mde", "mde_pct")}, "queries_2pct": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def mde_sentence(power: pl.DataFrame, measure: str, alpha: float = 0.05, power_level: float = 0.8) -> str:
    """One plain sentence on the power of the comparisons in ``power`` (a :func:`power_table`): the median over
    experiments of the MDE, its share of the baseline mean and the queries a 2% effect needs; "" when there are no
    experiments (or fewer than 2 queries)."""
    mdes = power["mde"].drop_nans().drop_nulls()
    if mdes.is_empty():
        return ""
    n = math.ceil(float(power["queries"].median()))
    pct = power["mde_pct"].drop_nans().drop_nulls()
    bases = {(b, m) for b, m in power.select("baseline", "baseline_mean").iter_rows()}
    whose = f"the baseline's {next(iter(bases))[1]:.4f}" if len(bases) == 1 else "the baseline's mean"
    share = f" ({float(pct.median()):.1f}% of {whose}; median over experiments)" if not pct.is_empty() else \
        " (median over experiments)"
    needed = power["queries_2pct"].drop_nulls()
    need = (f"; a {RELATIVE_EFFECT:.0%} effect would need {math.ceil(float(needed.median())):,} queries"
            if not needed.is_empty() else "")
    return (f"With {n:,} test queries the seed-averaged paired comparison detects (alpha {alpha:g}, power "
            f"{power_level:g}) differences of {measure} ≥ {float(mdes.median()):.3f}{share}{need}.")


def to_markdown(table: pl.DataFrame, key: str, digits: int = 4) -> str:
    """A Markdown table: each value column printed with its ``<col>_mark`` appended (e.g. ``0.6006†``)."""
    values = [c for c in table.columns if c != key and not c.endswith("_mark")]
    lines = ["| " + " | ".join([key, *values]) + " |", "|" + "---|" * (len(values) + 1)]
    for row in table.iter_rows(named=True):
        cells = []
        for c in values:
            v = row[c]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                cells.append("–")
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                cells.append(f"{v:.{digits}f}{row.get(f'{c}_mark') or ''}" if isinstance(v, float) else str(v))
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


def tables_stage(metric_paths: Mapping[tuple[str, str], str | Path], reference_paths: Mapping[str, str | Path],
                 outputs: Mapping[str, str | Path], *, measure: str, measures: Sequence[str], use_holm: bool,
                 dataset: str, test: str = "ttest", permutations: int = 10_000,
                 seed: int = 0) -> dict[str, pl.DataFrame]:
    """Rule ``report_tables``: the seeds table (one measure), the metrics table and the power table (one measure),
    as .md/.csv/.parquet.

    ``outputs`` maps ``seeds``, ``metrics`` and ``power`` to a path stem (the extension is added per format).
    ``test`` is the paired test of the marks (``report.test``); ``permutations`` and ``seed`` drive the
    randomization test.
    """
    described = describe_test(test, permutations, seed)
    metrics = load_metrics(metric_paths)
    refs = load_metrics({(name, "0"): p for name, p in reference_paths.items()}) if reference_paths else None
    if measure not in set(metrics["measure"]):
        raise ValueError(f"report.measure {measure!r} is not among the evaluated measures "
                         f"{sorted(set(metrics['measure']))}")
    knobs = {"test": test, "permutations": permutations, "seed": seed}
    seeds = seeds_table(metrics, measure, use_holm, **knobs)
    table = metrics_table(metrics, measures, refs, use_holm, **knobs)
    power = power_table(metrics, measure, **knobs)
    n_q = metrics["qid"].n_unique()
    holm_note = " (Holm-Bonferroni adjusted)" if use_holm else ""
    bm25 = any(e.endswith(BM25_SUFFIX) and e != BASELINE + BM25_SUFFIX for e in set(metrics["experiment"]))
    bm25_note = " The +bm25 rows are compared with baseline+bm25." if bm25 else ""
    marks = f"Better than the baseline: † p < 0.05, ‡ p < 0.01; worse: ↓ p < 0.05, ↓↓ p < 0.01{holm_note}; {described}"
    write_table_files(seeds, "row", Path(outputs["seeds"]).with_suffix(""),
                      f"Test {measure} on {dataset} ({n_q} queries) per seed, their average and standard deviation. "
                      f"{marks} against the baseline of the same seed (AVG: on the seed-averaged per-query values)."
                      f"{bm25_note}")
    sentence = mde_sentence(power, measure)
    write_table_files(table, "ranker", Path(outputs["metrics"]).with_suffix(""),
                      f"Test effectiveness on {dataset} ({n_q} queries), mean over seeds. {marks} of seed-averaged "
                      f"per-query values against the baseline.{bm25_note} Reference rankers (BM25 with default "
                      "k1/b and tuned on dev, the teacher, teacher+bm25) are not tested."
                      + (f" {sentence}" if sentence else ""))
    second = "" if test == "ttest" else f"; p_{test}: the {described}"
    write_table_files(power, "experiment", Path(outputs["power"]).with_suffix(""),
                      f"Power of the comparisons on test {measure} ({dataset}), on seed-averaged per-query values "
                      f"against the baseline{' (baseline+bm25 for the +bm25 rows)' if bm25 else ''}. difference: "
                      "mean of experiment - baseline; sd: its standard deviation "
                      f"(ddof 1); p_ttest: paired two-sided t-test{second}. mde: the minimum detectable mean "
                      "difference of the paired t-test (alpha 0.05, power 0.8), (t_0.975,n-1 + t_0.8,n-1) * sd / "
                      "sqrt(n) (Cohen 1988; Sakai 2016); mde_pct: as % of the baseline mean; queries_2pct: test "
                      "queries needed to detect a 2% change of the baseline mean with the same sd."
                      + (f" {sentence}" if sentence else ""))
    return {"seeds": seeds, "metrics": table, "power": power}


def split_inputs(inputs: Mapping[str, str], kind: str) -> dict[tuple[str, ...], str]:
    """Named rule inputs ``<kind>|a|b`` as {(a, b): path} (how the report rules key runs by experiment and seed)."""
    out = {}
    for name in inputs.keys():
        parts = name.split("|")
        if parts[0] == kind:
            out[tuple(parts[1:])] = inputs[name]
    return out

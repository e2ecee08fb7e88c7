"""Significance tests and the papers' tables from per-query test metrics (rule ``report_tables``).

Protocol (Penha & Hauff 2020 §4-5, Table 5): for each experiment and seed, a paired two-sided Student's t-test of
its per-query values against the baseline run *of the same seed*; for the AVG row, the same test on the per-query
values averaged over seeds. Marks for a significant improvement over the baseline: ``†`` p < 0.05, ``‡`` p < 0.01
(Table 5's symbols); for a significant reduction: ``↓`` p < 0.05, ``↓↓`` p < 0.01 (MacAvaney Table 6's arrow), so a
mark never hides the direction. With ``holm: true`` the p
values of one row (all experiments against the baseline) are Holm-Bonferroni adjusted before marking.

Tables:
* ``seeds``: like Penha Table 5: rows = each seed, AVG, SD (over seeds of the per-seed means); columns =
  experiments; one measure (the config's ``report.measure``, default MAP).
* ``metrics``: like MacAvaney Table 3: rows = experiments (and the reference rankers), columns = measures; the mean
  over seeds of the per-seed means, marked by the t-test on seed-averaged per-query values against the baseline.
Written as Markdown, CSV and Parquet.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import ttest_rel

BASELINE = "baseline"


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p value of a vs b (scipy ``ttest_rel``); 1.0 when the differences are all equal."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired test needs equal lengths, got {a.shape} and {b.shape}")
    if a.size < 2 or np.allclose(a - b, (a - b)[0]):
        return 1.0
    return float(ttest_rel(a, b).pvalue)


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


def _pvalue(metrics: pl.DataFrame, experiment: str, measure: str, seed: str | None) -> tuple[float, float]:
    """(p value, mean difference experiment - baseline) of the paired test on one measure."""
    a, b = _vector(metrics, experiment, measure, seed), _vector(metrics, BASELINE, measure, seed)
    joined = a.join(b, on="qid", suffix="_base")
    if joined.height != a.height or joined.height != b.height:
        raise ValueError(f"{experiment} and {BASELINE} were evaluated on different queries ({measure})")
    diff = float((joined["value"] - joined["value_base"]).mean()) if joined.height else 0.0
    return paired_ttest(joined["value"], joined["value_base"]), diff


def _marks(metrics: pl.DataFrame, experiments: Sequence[str], measure: str, seed: str | None,
           use_holm: bool) -> dict[str, str]:
    others = [e for e in experiments if e != BASELINE]
    tests = [_pvalue(metrics, e, measure, seed) for e in others]
    p = [t[0] for t in tests]
    if use_holm and p:
        p = holm(p)
    return {e: mark(x, t[1]) for e, x, t in zip(others, p, tests)} | {BASELINE: ""}


def _in_order(metrics: pl.DataFrame) -> pl.DataFrame:
    """The rows in one fixed order, so every mean sums in the same order and the tables are bit-for-bit a function
    of the rows, not of their order (polars' group_by returns groups in varying order)."""
    return metrics.sort([c for c in ("experiment", "seed", "measure", "qid") if c in metrics.columns])


def seeds_table(metrics: pl.DataFrame, measure: str, use_holm: bool = False) -> pl.DataFrame:
    """Penha Table 5: rows seed.../AVG/SD, a value and a mark column per experiment (baseline first)."""
    metrics = _in_order(metrics)
    experiments = [BASELINE] + sorted(set(metrics["experiment"]) - {BASELINE})
    seeds = sorted(set(metrics["seed"]), key=lambda s: int(s) if s.lstrip("-").isdigit() else s)
    means = metrics.filter(pl.col("measure") == measure).group_by("experiment", "seed").agg(pl.col("value").mean())
    mean_of = {(e, s): v for e, s, v in means.iter_rows()}
    rows = []
    for s in seeds:
        marks = _marks(metrics, experiments, measure, s, use_holm)
        rows.append({"row": f"seed {s}", **{e: mean_of.get((e, s)) for e in experiments},
                     **{f"{e}_mark": marks[e] for e in experiments}})
    marks = _marks(metrics, experiments, measure, None, use_holm)
    per_seed = {e: [mean_of[(e, s)] for s in seeds if (e, s) in mean_of] for e in experiments}
    rows.append({"row": "AVG", **{e: float(np.mean(v)) for e, v in per_seed.items()},
                 **{f"{e}_mark": marks[e] for e in experiments}})
    rows.append({"row": "SD", **{e: float(np.std(v, ddof=1)) if len(v) > 1 else math.nan for e, v in per_seed.items()},
                 **{f"{e}_mark": "" for e in experiments}})
    schema = {"row": pl.String, **{e: pl.Float64 for e in experiments}, **{f"{e}_mark": pl.String for e in experiments}}
    return pl.DataFrame(rows, schema=schema)


def metrics_table(metrics: pl.DataFrame, measures: Sequence[str], references: pl.DataFrame | None = None,
                  use_holm: bool = False) -> pl.DataFrame:
    """MacAvaney Table 3: a row per experiment (then each reference ranker), value and mark per measure."""
    metrics = _in_order(metrics)
    experiments = [BASELINE] + sorted(set(metrics["experiment"]) - {BASELINE})
    per_seed = _in_order(metrics.group_by("experiment", "seed", "measure").agg(pl.col("value").mean()))
    avg = {(e, m): v for e, m, v in per_seed.group_by("experiment", "measure").agg(pl.col("value").mean()).iter_rows()}
    marks = {m: _marks(metrics, experiments, m, None, use_holm) for m in measures}
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
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = {}
    for ext, write in (("md", lambda p: p.write_text(f"{caption}\n\n{to_markdown(table, key)}", encoding="utf-8")),
                       ("csv", lambda p: table.write_csv(p)), ("parquet", lambda p: table.write_parquet(p))):
        path = stem.with_suffix(f".{ext}")
        tmp = path.with_name(f".{path.name}.tmp")
        write(tmp)
        os.replace(tmp, path)
        out[ext] = path
    return out


def tables_stage(metric_paths: Mapping[tuple[str, str], str | Path], reference_paths: Mapping[str, str | Path],
                 outputs: Mapping[str, str | Path], *, measure: str, measures: Sequence[str], use_holm: bool,
                 dataset: str) -> dict[str, pl.DataFrame]:
    """Rule ``report_tables``: the seeds table (one measure) and the metrics table, as .md/.csv/.parquet.

    ``outputs`` maps ``seeds`` and ``metrics`` to a path stem (the extension is added per format).
    """
    metrics = load_metrics(metric_paths)
    refs = load_metrics({(name, "0"): p for name, p in reference_paths.items()}) if reference_paths else None
    if measure not in set(metrics["measure"]):
        raise ValueError(f"report.measure {measure!r} is not among the evaluated measures {sorted(set(metrics['measure']))}")
    seeds = seeds_table(metrics, measure, use_holm)
    table = metrics_table(metrics, measures, refs, use_holm)
    n_q = metrics["qid"].n_unique()
    holm_note = " (Holm-Bonferroni adjusted)" if use_holm else ""
    marks = (f"Better than the baseline: † p < 0.05, ‡ p < 0.01; worse: ↓ p < 0.05, ↓↓ p < 0.01{holm_note}; "
             "paired two-sided t-test")
    write_table_files(seeds, "row", Path(outputs["seeds"]).with_suffix(""),
                      f"Test {measure} on {dataset} ({n_q} queries) per seed, their average and standard deviation. "
                      f"{marks} against the baseline of the same seed (AVG: on the seed-averaged per-query values).")
    write_table_files(table, "ranker", Path(outputs["metrics"]).with_suffix(""),
                      f"Test effectiveness on {dataset} ({n_q} queries), mean over seeds. {marks} of seed-averaged "
                      "per-query values against the baseline. Reference rankers (BM25, teacher) are not tested.")
    return {"seeds": seeds, "metrics": table}


def split_inputs(inputs: Mapping[str, str], kind: str) -> dict[tuple[str, ...], str]:
    """Named rule inputs ``<kind>|a|b`` as {(a, b): path} (how the report rules key runs by experiment and seed)."""
    out = {}
    for name in inputs.keys():
        parts = name.split("|")
        if parts[0] == kind:
            out[tuple(parts[1:])] = inputs[name]
    return out

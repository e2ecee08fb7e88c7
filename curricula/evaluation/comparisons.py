"""Per-query test metrics as paired comparisons: which run an experiment is compared with, the tables' order, the
metrics files of a results folder, and the two arms' values aligned by qid (seed-averaged) or as seeds x queries
arrays paired by seed id for :func:`curricula.statistics.seed_aware.seed_aware_test`.

A long metrics frame has the columns (experiment, seed, qid, measure, value), one row per per-query value
(:func:`load_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from curricula.plumbing.keys import BM25_SUFFIX
from curricula.plumbing.layout import Layout
from curricula.statistics.seed_aware import SeedAwareResult, seed_aware_test

BASELINE = "baseline"
INFERENCES = ("seed_aware", "per_query")


def baseline_of(experiment: str) -> str:
    """The run an experiment is compared with: ``baseline+bm25`` for ``<name>+bm25`` (score additivity with BM25),
    ``baseline`` for every other name. The baselines compare with themselves."""
    return BASELINE + BM25_SUFFIX if experiment.endswith(BM25_SUFFIX) else BASELINE


def with_seeds(metrics: pl.DataFrame, seeds: Sequence[int | str]) -> pl.DataFrame:
    """The rows of a long metrics frame (experiment, seed, qid, measure, value) whose seed is one of ``seeds``."""
    return metrics.filter(pl.col("seed").is_in([str(s) for s in seeds]))


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


def experiment_files(root: str | Path, filename: str = "metrics.parquet",
                     experiment: str = "*") -> dict[tuple[str, str], Path]:
    """{(experiment, seed): file} of a dataset's results folder (``<root>/experiments/<name>/seed=<s>/<filename>``):
    by default every trained ranker's per-query test metrics, or e.g. one experiment's ``dev_curve.parquet``;
    raises FileNotFoundError naming the folder and the pattern when none exists."""
    layout = Layout.at(root)
    found = layout.experiment_files(filename, experiment)
    if not found:
        name = "<name>" if experiment == "*" else experiment
        pattern = f"{layout.experiment(name, '<s>')}/{filename}".removeprefix(f"{layout.root}/")
        raise FileNotFoundError(f"{root}: no {pattern} under it (not a finished dataset's results folder?)")
    return found


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


def _seed_key(seed: str) -> tuple[int, int | str]:
    return (0, int(seed)) if seed.lstrip("-").isdigit() else (1, seed)


def paired_cells(metrics: pl.DataFrame, experiment: str, measure: str,
                 against: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The per-query values of ``experiment`` and of ``against`` (default: :func:`baseline_of` it) on one measure
    as two (seeds x queries) arrays, seeds paired by seed id (numeric order) and queries by qid (sorted), for
    :func:`seed_aware_test` on their difference. The design must be balanced: both arms run with the same seeds,
    evaluated on the same queries, every seed on every query once; otherwise a ValueError names the experiment and
    the seed."""
    base = baseline_of(experiment) if against is None else against
    arms = [metrics.filter((pl.col("experiment") == name) & (pl.col("measure") == measure)).select(
        "seed", "qid", "value") for name in (experiment, base)]
    if set(arms[0]["qid"]) != set(arms[1]["qid"]):
        raise ValueError(f"{experiment} and {base} were evaluated on different queries ({measure})")
    seeds = [set(arm["seed"]) for arm in arms]
    if seeds[0] != seeds[1]:
        raise ValueError(f"{experiment} and {base} ran with different seeds ({measure}): {experiment} has "
                         f"{sorted(seeds[0], key=_seed_key)}, {base} {sorted(seeds[1], key=_seed_key)}; seed-aware "
                         "inference pairs the arms by seed (report.inference / study.inference: per_query does not)")
    order = sorted(seeds[0], key=_seed_key)
    n_q = arms[0]["qid"].n_unique()
    out = []
    for name, arm in zip((experiment, base), arms):
        counts = arm.group_by("seed").agg(n=pl.len(), unique=pl.col("qid").n_unique())
        for seed, n, unique in counts.sort("seed").iter_rows():
            if n != n_q or unique != n_q:
                raise ValueError(f"unbalanced design: {name}, seed {seed} has {n} {measure} values on {unique} of the "
                                 f"{n_q} test queries; seed-aware inference needs every seed on every query once")
        rank = {s: i for i, s in enumerate(order)}
        arm = arm.with_columns(pl.col("seed").replace_strict(rank, return_dtype=pl.Int64).alias("_rank"))
        out.append(arm.sort("_rank", "qid")["value"].to_numpy().reshape(len(order), n_q))
    return out[0], out[1]


def seed_aware_result(metrics: pl.DataFrame, experiment: str, measure: str, against: str | None = None,
                      alpha: float = 0.05, *, inference: str = "seed_aware") -> SeedAwareResult | None:
    """:func:`seed_aware_test` of ``experiment`` - ``against`` (:func:`paired_cells`). An unbalanced design raises
    under ``inference="seed_aware"``; under ``per_query``, which does not need it, it gives None."""
    try:
        a, b = paired_cells(metrics, experiment, measure, against)
    except ValueError:
        if inference == "seed_aware":
            raise
        return None
    return seed_aware_test(a - b, alpha)


def check_inference(inference: str) -> None:
    """Refuse an ``inference`` other than :data:`INFERENCES`."""
    if inference not in INFERENCES:
        raise ValueError(f"unknown inference {inference!r}; expected one of {', '.join(INFERENCES)}")


def _in_order(metrics: pl.DataFrame) -> pl.DataFrame:
    """The rows in one fixed order, so every mean sums in the same order and the tables are bit-for-bit a function
    of the rows, not of their order (polars' group_by returns groups in varying order)."""
    return metrics.sort([c for c in ("experiment", "seed", "measure", "qid") if c in metrics.columns])

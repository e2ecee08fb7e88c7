"""Learning curves and the Wang et al. 2020 Table 1-style table of the active-learning runs (rule report_active).

Table 1 reports, per method, the percentage of annotated training data needed to reach the performance of
training with all data. Here: the smallest labeled fraction at which the seed-averaged test metric reaches the
seed-averaged metric of the ``all`` method; methods that never reach it within the rounds show their best.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

import matplotlib
import matplotlib.pyplot as plt
import polars as pl

from curricula.plumbing.contracts import TableSpec

ACTIVE_TABLE = TableSpec(
    "active_table",
    {"method": pl.String, "measure": pl.String, "all_data": pl.Float64, "fraction_needed": pl.Float64,
     "best": pl.Float64, "best_fraction": pl.Float64, "seeds": pl.Int64},
    key=("method", "measure"),
    nullable=frozenset({"fraction_needed"}),  # never reached within the rounds
)

ACTIVE_CURVES = TableSpec(
    "active_curves",
    {"method": pl.String, "round": pl.Int64, "labeled_fraction": pl.Float64, "pseudo_labeled": pl.Float64,
     "mean": pl.Float64, "sd": pl.Float64, "seeds": pl.Int64},
    key=("method", "round"),
    nullable=frozenset({"sd"}),  # one seed: no SD
)


def gather_curves(curves: Mapping[tuple[str, int], pl.DataFrame]) -> pl.DataFrame:
    """One frame of every (method, seed) curve with method and seed columns."""
    parts = [c.with_columns(method=pl.lit(m), seed=pl.lit(s, dtype=pl.Int64)) for (m, s), c in curves.items()]
    return pl.concat(parts) if parts else pl.DataFrame()


def mean_curves(curves: pl.DataFrame, measure: str) -> pl.DataFrame:
    """Seed mean and SD of ``measure`` (e.g. ``test_RR``) per method and round, with the labeled fraction and the
    pseudo-labeled count averaged over seeds too: the rows of ACTIVE_CURVES."""
    return (curves.group_by("method", "round").agg(pl.col("labeled_fraction").mean(),
                                                   pl.col("pseudo_labeled").cast(pl.Float64).mean(),
                                                   mean=pl.col(measure).mean(), sd=pl.col(measure).std(),
                                                   seeds=pl.len().cast(pl.Int64))
            .sort("method", "round"))


def learning_curve_table(curves: pl.DataFrame, measure: str = "test_RR") -> pl.DataFrame:
    """ACTIVE_CURVES rows: the learning curve of every method, seed-averaged per round (``mean_curves``)."""
    return mean_curves(curves, measure).select(list(ACTIVE_CURVES.columns))


def label_fraction_table(curves: pl.DataFrame, measure: str = "test_RR") -> pl.DataFrame:
    """ACTIVE_TABLE rows: per method, the labeled fraction needed to reach the all-data model's mean ``measure``."""
    means = mean_curves(curves, measure)
    ref = means.filter(pl.col("method") == "all")
    target = float(ref["mean"][0]) if ref.height else float("nan")
    rows = []
    for method in sorted(set(means["method"].to_list()) - {"all"}):
        m = means.filter(pl.col("method") == method).sort("round")
        reached = m.filter(pl.col("mean") >= target)
        best = m.sort("mean", descending=True).row(0, named=True)
        # m has rows, each with its count of seeds: the max is an int (polars types it as any literal or None)
        rows.append({"method": method, "measure": measure, "all_data": target,
                     "fraction_needed": float(reached["labeled_fraction"][0]) if reached.height else None,
                     "best": best["mean"], "best_fraction": best["labeled_fraction"],
                     "seeds": int(cast(int, m["seeds"].max()))})
    return pl.DataFrame(rows, schema=ACTIVE_TABLE.columns, orient="row")


def plot_learning_curves(curves: pl.DataFrame, measure: str, path: str | Path, title: str = "") -> Path:
    """Test metric against the labeled fraction per method (mean over seeds, band = +-1 SD); all data dashed."""
    matplotlib.use("Agg")  # no display needed; pyplot resolves its backend only when first used
    means = mean_curves(curves, measure)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for method in sorted(set(means["method"].to_list()) - {"all"}):
        m = means.filter(pl.col("method") == method).sort("round")
        x, y, sd = m["labeled_fraction"].to_numpy(), m["mean"].to_numpy(), m["sd"].fill_null(0.0).to_numpy()
        ax.plot(100 * x, y, marker="o", label=method)
        ax.fill_between(100 * x, y - sd, y + sd, alpha=0.15)
    ref = means.filter(pl.col("method") == "all")
    if ref.height:
        ax.axhline(float(ref["mean"][0]), color="black", linestyle="--", label="all data")
    ax.set_xlabel("labeled training queries (%)")
    ax.set_ylabel(measure.replace("test_RR", "test MRR").replace("test_AP", "test MAP"))
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path


def active_captions(table: pl.DataFrame, measure: str, dataset: str) -> dict[str, str]:
    """The captions of rule ``report_active``'s label-fraction ``table`` (:func:`label_fraction_table`, key
    ``table``) and of its learning curves (:func:`learning_curve_table`, key ``curves``)."""
    all_data = f"{table['all_data'][0]:.4f}" if table.height else "n/a"
    return {"table": f"Fraction of labeled train queries each method needs before its seed-averaged {measure} reaches "
                     f"the all-data model's ({all_data}) on {dataset}; empty = not reached within the rounds "
                     "(Wang et al. 2020 Table 1).",
            "curves": f"Learning curves on {dataset}: seed mean and SD of {measure} after each round, with the labeled "
                      "fraction of train queries and the pseudo-labeled count (DASL) averaged over seeds."}

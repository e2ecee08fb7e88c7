"""The papers' figures as PNG (matplotlib, Agg backend): pacing, dev curves, test metric by turns / bucket / domain.

* :func:`plot_pacing`: every experiment's pacing function over its steps (Penha & Hauff 2020 Fig. 2).
* :func:`plot_dev_curves`: every seed's dev curve per experiment, the kept evaluation and early stops marked
  (Fig. 3).
* :func:`plot_by_group`: a test metric (seed-averaged per query, then averaged per group) by number of turns
  (Fig. 4), by difficulty bucket of a scoring function (Fig. 5 right) or by domain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from curricula.experiments.spec import Arm
from curricula.plumbing.atomic import write_dir_atomically, write_file_atomically


def _use_agg() -> None:
    """Draw with the Agg backend (no display needed; pyplot resolves its backend only when first used) and the
    figures' style."""
    matplotlib.use("Agg")
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 110, "font.size": 9, "svg.hashsalt": "curricula"})


def _save(fig, path: str | Path) -> Path:
    """Save ``fig`` atomically (:func:`curricula.plumbing.atomic.write_file_atomically`) in the format of ``path``'s
    suffix,
    without a version stamp: same inputs, same bytes."""
    path = Path(path)
    return write_file_atomically(path, lambda tmp: fig.savefig(tmp, format=path.suffix.lstrip("."),
                                                              metadata={"Software": None}))


def plot_pacing(arms: Mapping[str, Arm], path: str | Path) -> Path:
    """f_pace(s) of each experiment's curriculum (fraction of the easiest data, or HCL's difficulty threshold) over
    its length in steps."""
    _use_agg()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for name, arm in arms.items():
        steps, pacing = np.arange(0, arm.length + 1), arm.pacing
        ax.plot(steps, pacing.value(steps), label=f"{name} ({pacing.name}, {pacing.mode})")
    ax.set_xlabel("training step")
    ax.set_ylabel("f_pace(s)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = _save(fig, path)
    plt.close(fig)
    return out


def plot_dev_curves(curves: pl.DataFrame, path: str | Path) -> Path:
    """Every seed's dev curve, one colour per experiment; the kept (best) evaluation of each seed marked with a
    triangle, a stop by early stopping with a cross (seeds stop at different steps, so curves are not averaged).

    ``curves``: experiment, seed, step, metric, value and, from the train stage's dev curves, best and stopped.
    """
    _use_agg()
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, ((name,), g) in enumerate(curves.sort("experiment", "seed", "step").group_by("experiment",
                                                                                        maintain_order=True)):
        colour = colours[i % len(colours)]
        for j, ((_,), run) in enumerate(g.group_by("seed", maintain_order=True)):
            x, y = run["step"].to_numpy(), run["value"].to_numpy()
            ax.plot(x, y, lw=0.9, alpha=0.8, color=colour, label=name if j == 0 else None)
            best = int(np.flatnonzero(run["best"].to_numpy())[0]) if "best" in run.columns else int(np.argmax(y))
            ax.plot(x[best], y[best], marker="^", markersize=7, color=colour)
            if "stopped" in run.columns and run["stopped"][-1] == "patience":
                ax.plot(x[-1], y[-1], marker="x", markersize=6, color=colour)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"dev {curves['metric'][0]} (each seed)")
    ax.set_title("^ kept evaluation, x early stop", fontsize=8)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = _save(fig, path)
    plt.close(fig)
    return out


def group_means(metrics: pl.DataFrame, groups: pl.DataFrame, measure: str) -> pl.DataFrame:
    """Per (experiment, group): the measure averaged over seeds per query, then over the group's queries.

    ``metrics``: experiment, seed, qid, measure, value; ``groups``: qid, group (str). Also returns ``queries``.
    """
    per_query = (metrics.filter(pl.col("measure") == measure).group_by("experiment", "qid")
                 .agg(pl.col("value").mean()))
    return (per_query.join(groups, on="qid").group_by("experiment", "group")
            .agg(pl.col("value").mean(), pl.len().alias("queries")).sort("experiment", "group"))


def plot_by_group(metrics: pl.DataFrame, groups: pl.DataFrame, measure: str, xlabel: str, path: str | Path,
                  order: Sequence[str] | None = None) -> Path:
    """Grouped bars: the measure per group (x) and experiment (bars); group sizes under the axis labels."""
    _use_agg()
    table = group_means(metrics, groups, measure)
    present = set(table["group"])
    labels = [g for g in order if g in present] if order else sorted(present)
    experiments = sorted(set(table["experiment"]))
    width = 0.8 / max(1, len(experiments))
    fig, ax = plt.subplots(figsize=(max(5.5, 0.9 * len(labels) + 2), 3.4))
    for i, name in enumerate(experiments):
        rows = dict(table.filter(pl.col("experiment") == name).select("group", "value").iter_rows())
        ax.bar(np.arange(len(labels)) + i * width, [rows.get(g, np.nan) for g in labels], width, label=name)
    sizes = dict(table.group_by("group").agg(pl.col("queries").max()).iter_rows())
    ax.set_xticks(np.arange(len(labels)) + (len(experiments) - 1) * width / 2,
                  [f"{g}\n(n={sizes.get(g, 0)})" for g in labels], fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"test {measure}")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    out = _save(fig, path)
    plt.close(fig)
    return out


def turn_groups(queries: pl.DataFrame, edges: Sequence[int] = (2, 4, 6, 8)) -> tuple[pl.DataFrame, list[str]]:
    """(qid, group) by number of context turns, bucketed at ``edges`` (e.g. '1-2', '3-4', ..., '9+')."""
    bounds = [0, *edges]
    labels = [f"{lo + 1}-{hi}" if hi > lo + 1 else f"{hi}" for lo, hi in zip(bounds[:-1], bounds[1:])]
    labels.append(f"{edges[-1] + 1}+")
    n = queries["turns"].list.len().to_numpy()
    idx = np.searchsorted(np.asarray(edges), n, side="left")
    return pl.DataFrame({"qid": queries["qid"], "group": [labels[i] for i in idx]}), labels


def difficulty_groups(values: pl.DataFrame, column: str, buckets: int = 4) -> tuple[pl.DataFrame, list[str]]:
    """(qid, group) by quantile bucket of a per-query difficulty (1 = easiest quarter ... 4 = hardest)."""
    per_query = values.group_by("qid").agg(pl.col(column).mean()).sort("qid")
    ranks = per_query[column].rank("ordinal").to_numpy() - 1
    bucket = (ranks * buckets // max(1, per_query.height)).astype(int)
    labels = [f"Q{i + 1}" for i in range(buckets)]
    return pl.DataFrame({"qid": per_query["qid"], "group": [labels[i] for i in bucket]}), labels


def write_figures(arms: Mapping[str, Arm], curves: pl.DataFrame, metrics: pl.DataFrame,
                  queries: pl.DataFrame, difficulty: Mapping[str, pl.DataFrame], out_dir: str | Path, *, measure: str,
                  turn_edges: Sequence[int] = (2, 4, 6, 8)) -> list[Path]:
    """Rule ``report_figures``: every figure into ``out_dir`` (written whole, atomically); returns their paths.

    ``arms`` are the experiments' curricula (pacing), ``curves`` every run's dev curve with its experiment and seed,
    ``metrics`` the runs' long test metrics (:func:`curricula.evaluation.comparisons.load_metrics`), ``queries`` the
    ingest queries (turns, domain), ``difficulty`` each scoring function's table of the test pairs.
    """
    queries = queries.filter(pl.col("qid").is_in(metrics["qid"].unique().implode()))
    written: list[str] = []

    def fill(tmp: Path) -> None:
        written.append(plot_pacing(arms, tmp / "pacing.png").name)
        written.append(plot_dev_curves(curves, tmp / "dev_curves.png").name)
        groups, order = turn_groups(queries, turn_edges)
        written.append(plot_by_group(metrics, groups, measure, "context turns", tmp / "by_turns.png", order).name)
        for function, values in sorted(difficulty.items()):
            groups, order = difficulty_groups(values, function)
            written.append(plot_by_group(metrics, groups, measure, f"{function} difficulty quartile (Q4 = hardest)",
                                         tmp / f"by_difficulty_{function}.png", order).name)
        domains = queries.filter(pl.col("domain").is_not_null()).select("qid", pl.col("domain").alias("group"))
        if domains["group"].n_unique() > 1:
            written.append(plot_by_group(metrics, domains, measure, "domain", tmp / "by_domain.png").name)

    write_dir_atomically(out_dir, fill)
    return [Path(out_dir) / name for name in written]

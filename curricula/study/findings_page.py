"""The findings page of a study (``findings.md``, rule ``report_study``), one function per section: what its numbers
are and where the method is explained (docs/studies.md, :data:`METHOD`), the verdict matrix, the family and its
multiplicity adjustment, the verdicts against the last study, the cost per dataset, a table per claim and the planner.
The table it shows is :func:`curricula.study.findings.findings_table`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import polars as pl

from curricula.report.power import RELATIVE_EFFECT
from curricula.statistics.power import SEEDS_PLANNED
from curricula.statistics.verdicts import BELOW_MARGIN, INCONCLUSIVE, VERDICTS
from curricula.study.verdicts import NOT_SURVIVING, signed, verdict_cell, verdict_changes_markdown

MULTIPLICITY_NAMES = {"holm": "Holm's step-down adjustment (family-wise error)",
                      "bh": "the Benjamini-Hochberg adjustment (false discovery rate)", "none": "no adjustment"}
#: Where the findings page's method (the test, the verdicts, the multiplicity adjustment, the rounds) is explained.
METHOD = "docs/studies.md#how-the-findings-page-is-computed"
#: How the page names each ``study.inference``'s test.
INFERENCE_NAMES = {"seed_aware": "the seed-aware test, seeds and test queries as crossed random effects",
                   "per_query": "the paired two-sided t-test on seed-averaged per-query values"}


def _p(value: float) -> str:
    return "–" if not math.isfinite(value) else ("< 0.001" if value < 0.001 else f"{value:.3f}")


def sequential_cell(row: Mapping[str, Any]) -> str:
    """A row's sequential verdict, the seeds of its look and that look's threshold of the difference test, e.g.
    ``reproduced (10 seeds, p < 0.0054)``; ``–`` for a fixed-seed row."""
    if row.get("sequential_verdict") is None:
        return "–"
    return f"{row['sequential_verdict']} ({row['look_seeds']} seeds, p < {row['p_boundary']:.2g})"


def rounds_note(alpha: float, multiplicity: str = "none") -> list[str]:
    """The findings page's note on a study judged in rounds (``study.sequential``), with ``multiplicity`` the
    adjustment the rounds used (``holm``: the sequential Holm procedure; ``none``); the method is :data:`METHOD`'s."""
    family = ("adjusted for the number of cells by the sequential Holm procedure" if multiplicity == "holm"
              else "not adjusted for the number of cells (study.multiplicity none)")
    return [f"Seeds in rounds (study.sequential): the verdict matrix shows each cell's group-sequential verdict with "
            f"the seeds of the look it rests on, its p boundary {family}; every other column is the fixed test on "
            f"those seeds (its verdict and multiplicity adjustment at alpha {alpha:g}, for comparison). "
            "Active-learning claims keep their fixed seeds.", ""]


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def plan_markdown(plans: pl.DataFrame, measure: str, alpha: float = 0.05, power: float = 0.8,
                  max_queries: int | None = None) -> list[str]:
    """The findings page's planner section (a :func:`curricula.study.findings.dataset_plans` table) as Markdown
    lines."""
    if plans.is_empty():
        return []
    cap = f" within {max_queries:,} test queries (study.plan_max_queries)" if max_queries else ""
    lines = ["## Seeds and test queries for a 2% effect", "",
             f"Per dataset, the seed, query and residual variance components of the per-seed per-query differences "
             f"(crossed random effects, method of moments), pooled over the dataset's claims (mean squares "
             f"averaged, then clipped), with the 90% interval of sd_seed (it rests on S - 1 df); then the test "
             f"queries the seed-aware test needs, for each number of seeds, to detect an effect of "
             f"{RELATIVE_EFFECT:.0%} of the mean of the compared results ({measure}) at alpha {alpha:g} with power "
             f"{power:g}, by the t approximation (the test's own df at the expected mean squares): Var(mean) = "
             f"s2_seed / S + s2_query / Q + s2_resid / (S Q). –: out of reach (the seed variance alone is too large "
             f"for that many seeds). Cheapest: the fewest seeds (each a training run of every arm){cap}. Seeds at "
             f"its queries: the seeds the dataset's own test split needs, and in parentheses at the two ends of "
             f"sd_seed's interval.", "",
             "| dataset | run (seeds x queries) | sd_seed (90% interval) | sd_query | sd_resid | 2% effect | "
             + " | ".join(f"{s} seeds" for s in SEEDS_PLANNED) + " | cheapest | seeds at its queries |",
             "|---|---|---|---|---|---|" + "---|" * (len(SEEDS_PLANNED) + 2)]
    for r in plans.iter_rows(named=True):
        best = (f"{r['cheapest_seeds']} x {r['cheapest_queries']:,}" if r["cheapest_seeds"] is not None else "–")
        own = (f"{_count(r['seeds_needed'])} ({_count(r['seeds_needed_low'])}–{_count(r['seeds_needed_high'])})"
               if math.isfinite(r["sd_seed_low"]) else "–")
        lines.append(f"| {r['dataset']} | {r['seeds']} x {r['queries']:,} | {r['sd_seed']:.4f} "
                     f"({r['sd_seed_low']:.4f}–{r['sd_seed_high']:.4f}) | {r['sd_query']:.4f} | "
                     f"{r['sd_resid']:.4f} | {r['effect']:.4f} | "
                     + " | ".join(_count(r[f"seeds_{s}"]) for s in SEEDS_PLANNED) + f" | {best} | {own} |")
    return [*lines, ""]


def differing_keys_sentence(rows: pl.DataFrame) -> str:
    """`` The arms' training specs differ in ...``: a claim's ``differing_keys`` per dataset of its findings rows,
    once when every dataset has the same (empty when the column is null)."""
    by_dataset = {r["dataset"]: r["differing_keys"] for r in rows.iter_rows(named=True)
                  if r["differing_keys"] is not None}
    if not by_dataset:
        return ""

    def keys(text: str) -> str:
        return ", ".join(f"`{k}`" for k in text.split(", ")) if text else "nothing"

    if len(set(by_dataset.values())) == 1:
        where = "on every dataset" if len(by_dataset) == rows.height else f"on {', '.join(by_dataset)}"
        return f" The arms' training specs differ {where} in {keys(next(iter(by_dataset.values())))}."
    return " The arms' training specs differ in " + "; ".join(
        f"{keys(text)} on {dataset}" for dataset, text in by_dataset.items()) + "."


def page_head(table: pl.DataFrame, title: str, alpha: float, power: float, inference: str,
              margin: float) -> list[str]:
    """The findings page's title, what each claim's numbers are and the settings they rest on, and where the method
    is explained (:data:`METHOD`)."""
    beside = "; p per query: the paired t-test on seed-averaged values" if inference == "seed_aware" else ""
    return [f"# {title or 'Findings of the study'}", "",
            f"Datasets: {', '.join(dict.fromkeys(table['dataset']))}. Each claim compares two experiments of the "
            f"same grid on each dataset: effect = mean over seeds and test queries of (experiment - against) on "
            f"per-query test {table['measure'][0]} (positive = the experiment is better), with its "
            f"{100 * (1 - alpha):g}% confidence interval and p value by {INFERENCE_NAMES[inference]} (study.inference: "
            f"{inference}){beside}; MDE at alpha {alpha:g} and power {power:g}; equivalence margin ±{margin:.0%} of "
            f"the compared result's mean. Under each claim, the keys in which its two arms' training specs differ.", "",
            f"Method (the test, the verdicts, the multiplicity adjustment, seeds in rounds): {METHOD}", ""]


def verdict_matrix(table: pl.DataFrame, alpha: float, multiplicity: str) -> list[str]:
    """The findings page's verdict matrix (claim x dataset, :func:`~curricula.study.verdicts.verdict_cell`), the
    legend of :data:`~curricula.study.verdicts.NOT_SURVIVING` and the count of each verdict."""
    datasets = list(dict.fromkeys(table["dataset"]))
    cell = {(r["paper"], r["claim"], r["dataset"]): r for r in table.iter_rows(named=True)}
    lines = ["## Verdicts", "", "| paper | claim | " + " | ".join(datasets) + " |",
             "|---|---|" + "---|" * len(datasets)]
    for paper, claim in dict.fromkeys(zip(table["paper"], table["claim"])):
        cells = [verdict_cell(cell[(paper, claim, d)]) if (paper, claim, d) in cell else "–" for d in datasets]
        lines.append(f"| {paper} | {claim} | " + " | ".join(cells) + " |")
    lines += ["", f"{NOT_SURVIVING}: decided at alpha {alpha:g}, but does not survive "
              f"{MULTIPLICITY_NAMES[multiplicity]} over the family (below)."] if multiplicity != "none" else []
    tally = {v: n for v, n in table.group_by("verdict").len().iter_rows()}
    listed = [v for v in VERDICTS if tally.get(v) or not v.endswith(BELOW_MARGIN)]
    return [*lines, "", f"Over {table.height} (claim, dataset) tests: " + ", ".join(
        f"{tally.get(v, 0)} {v}" for v in listed) + ".", ""]


def family_paragraph(table: pl.DataFrame, alpha: float, multiplicity: str) -> list[str]:
    """The findings page's multiplicity paragraph: the family's rows and tests, its adjustment and how many decided
    verdicts of each kind survive it (:func:`curricula.study.findings.findings_table`'s ``survives``)."""
    claims, datasets = table.select("paper", "claim").unique().height, table["dataset"].n_unique()
    tally = {v: n for v, n in table.group_by("verdict").len().iter_rows()}
    kept = {v: n for v, n in table.filter(pl.col("survives")).group_by("verdict").len().iter_rows()}
    decided = [v for v in VERDICTS if v != INCONCLUSIVE and tally.get(v)]
    rows = (f"{claims} claims x {datasets} datasets = " if claims * datasets == table.height else
            f"each claim on the datasets it is tested on ({claims} claims, {datasets} datasets): ")
    count = " counting rows, not tests (Shaffer 1986)" if multiplicity == "holm" else ""
    survivors = ", ".join(f"{kept.get(v, 0)} of {tally[v]} {v}" for v in decided) or "no verdict decided"
    return [f"Multiplicity: the family is every claim x dataset, {rows}{table.height} rows; each gives both its p "
            f"values (the difference test's and the equivalence test's), so the family holds {2 * table.height} "
            f"tests, adjusted by {MULTIPLICITY_NAMES[multiplicity]}{count} (study.multiplicity: {multiplicity}). "
            f"Surviving it (every p the verdict rests on below {alpha:g} after adjustment): {survivors} (column "
            "\"survives\").", ""]


def claim_section(rows: pl.DataFrame, alpha: float, rounds: bool) -> list[str]:
    """The findings page's section of one claim (its rows of a :func:`curricula.study.findings.findings_table`):
    the two arms, the keys in which their specs differ, and a row per dataset (:func:`claim_table_row`); with a
    sequential column when the study was judged in ``rounds``."""
    first = rows.row(0, named=True)
    sequential = ["sequential (seeds, p boundary)"] if rounds else []
    return [f"## {first['paper']}: {first['claim']}", "",
            f"`{first['experiment']}` against `{first['against']}`, expected {first['expect']}."
            + differing_keys_sentence(rows), "",
            f"| dataset | test queries | seeds | {first['experiment']} | {first['against']} | effect | "
            f"{100 * (1 - alpha):g}% CI | p | p per query | MDE | p_equiv (±margin) | verdict | adjusted p, p_equiv | "
            "survives |" + "".join(f" {c} |" for c in sequential),
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(sequential),
            *(claim_table_row(r, bool(sequential)) for r in rows.iter_rows(named=True)), ""]


def claim_table_row(r: Mapping[str, Any], sequential: bool) -> str:
    """One dataset's row of a claim's table: means, effect (and % of the compared mean), CI, p values, MDE, the
    equivalence test against its margin, verdict, adjusted p values, survival, and the sequential cell."""
    pct = f" ({signed(r['effect_pct'], 1)}%)" if math.isfinite(r["effect_pct"]) else ""
    mde_pct = 100 * r["mde"] / r["against_mean"] if r["against_mean"] > 0 else math.nan
    mde_txt = f"{r['mde']:.4f}" + (f" ({mde_pct:.1f}%)" if math.isfinite(mde_pct) else "")
    equiv = (f"{_p(r['p_equivalence'])} (±{r['margin']:.4f})" if r["equivalence_reachable"] else
             f"out of reach (±{r['margin']:.4f})") if math.isfinite(r["margin"]) else "–"
    survives = "–" if r["verdict"] == INCONCLUSIVE else ("yes" if r["survives"] else "no")
    return (f"| {r['dataset']} | {r['queries']:,} | {r['seeds']} | {r['experiment_mean']:.4f} | "
            f"{r['against_mean']:.4f} | {signed(r['effect'])}{pct} | "
            f"[{signed(r['ci_low'])}, {signed(r['ci_high'])}] | {_p(r['p'])} | "
            f"{_p(r['p_per_query'])} | {mde_txt} | {equiv} | {r['verdict']} | {_p(r['p_adjusted'])}, "
            f"{_p(r['p_equivalence_adjusted'])} | {survives} |" + (f" {sequential_cell(r)} |" if sequential else ""))


def findings_markdown(table: pl.DataFrame, *, alpha: float = 0.05, power: float = 0.8, title: str = "",
                      inference: str = "seed_aware", margin: float = 0.02, multiplicity: str = "holm",
                      plans: pl.DataFrame | None = None, max_queries: int | None = None,
                      costs: pl.DataFrame | None = None, changes: pl.DataFrame | None = None,
                      previous: str = "") -> str:
    """The findings page: what its numbers are and where the method is explained (:func:`page_head`), a note on
    seeds in rounds (:func:`rounds_note`), the verdict matrix (:func:`verdict_matrix`), the family and its
    multiplicity adjustment (:func:`family_paragraph`), the verdicts that changed since the last study
    (``changes``, :func:`~curricula.study.verdicts.verdict_changes` against the file ``previous``), the cost per
    dataset (``costs``, :func:`curricula.study.ledger_runs.ledger_costs`), then one table per claim
    (:func:`claim_section`) and the planner (``plans``, :func:`curricula.study.findings.dataset_plans`)."""
    if table.is_empty():
        return f"# {title or 'Findings'}\n\nThe study lists no claims (study.claims).\n"
    rounds = table["sequential_verdict"].is_not_null().any()
    lines = [*page_head(table, title, alpha, power, inference, margin),
             *(rounds_note(alpha, multiplicity) if rounds else []),
             *verdict_matrix(table, alpha, multiplicity), *family_paragraph(table, alpha, multiplicity)]
    if changes is not None:
        lines += verdict_changes_markdown(changes, previous)
    if costs is not None:
        lines += costs_markdown(costs)
    for paper, claim in dict.fromkeys(zip(table["paper"], table["claim"])):
        lines += claim_section(table.filter((pl.col("paper") == paper) & (pl.col("claim") == claim)), alpha, rounds)
    if plans is not None:
        lines += plan_markdown(plans, table["measure"][0], alpha, power, max_queries)
    return "\n".join(lines)


def costs_markdown(costs: pl.DataFrame) -> list[str]:
    """The findings page's cost section: per dataset, the runs the page rests on, their CPU time, peak memory and
    where they came from (a :func:`curricula.study.ledger_runs.ledger_costs` table, from the ledger)."""
    lines = ["## Cost", "",
             "The runs this page rests on, from the study's ledger (curricula/study/ledger_runs.py): their CPU time in "
             "core-hours (3,600 CPU seconds: each run's training, selection and evaluation, or its active-learning "
             "loop, from Snakemake's benchmark files on the machine that ran it), the largest peak memory of one "
             "job, and how many machines, compute classes (CPU class or GPU, precision, torch), upstream-table "
             "variants (1: every run read the same bytes of each table it shares with another) and commits they came "
             "from. The stages before training (BM25, embeddings, teacher, difficulty) are not in the ledger; their "
             "cost on a machine is in its benchmarks/ folder.", "",
             "| dataset | runs | core-hours | peak memory, MB | machines | compute classes | upstream variants | "
             "commits |", "|---|---|---|---|---|---|---|---|"]
    for r in costs.iter_rows(named=True):
        lines.append(f"| {r['dataset']} | {r['runs']} | {r['core_hours']:.2f} | {r['peak_rss_mb']:,.0f} | "
                     f"{r['machines']} | {r['compute_classes']} | {r['upstream_variants']} | {r['commits']} |")
    total = costs["core_hours"].sum() if costs.height else 0.0
    return lines + ["", f"All datasets: {total:.2f} core-hours of runs.", ""]

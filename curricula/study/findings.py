"""The findings of a study (rule ``report_study``): each paper's claim tested on each dataset, the multiplicity
adjustment over the family, the planner per dataset, and the page, table and forest plot.

Each claim compares two results of the grid on one dataset (:func:`claim_row`): the mean over seeds and test queries
of the per-query difference, its confidence interval and p value by the seed-aware test
(:func:`curricula.statistics.stats.seed_aware_test`; with ``inference="per_query"`` the paired t-test on seed-averaged values),
the per-query t-test's p beside it, the minimum detectable effect (:func:`curricula.statistics.stats.seed_aware_mde`), the two
one-sided tests against the equivalence margin and whether the design can reach equivalence at all, and the verdict
(:func:`curricula.statistics.stats.verdict`). The family (:func:`findings_table`) holds both p values of every row, so a true
null judged equivalent cannot leave the family and lower the bar for the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from curricula.evaluation.comparisons import _paired, check_inference, seed_aware_result, with_seeds
from curricula.plumbing.errors import InputFormatError
from curricula.report.tables import RELATIVE_EFFECT, _finite, pooled_components, seeds_range
from curricula.statistics.sequential import SequentialDecision
from curricula.statistics.stats import (
    BELOW_MARGIN,
    EQUIVALENT,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    SEEDS_PLANNED,
    VERDICTS,
    adjust,
    cheapest,
    equivalence_pvalue,
    equivalence_reachable,
    paired_ttest,
    plan,
    seed_aware_mde,
    seed_aware_test,
    verdict,
    verdict_pvalues,
)
from curricula.study.grid import ACTIVE_PREFIX, claim_datasets

MULTIPLICITY_NAMES = {"holm": "Holm's step-down adjustment (family-wise error)",
                      "bh": "the Benjamini-Hochberg adjustment (false discovery rate)", "none": "no adjustment"}
NOT_SURVIVING = "°"  # after a decided verdict that does not survive the multiplicity adjustment


def claim_row(metrics: pl.DataFrame, experiment: str, against: str, measure: str, expect: str,
              alpha: float = 0.05, power: float = 0.8, *, inference: str = "seed_aware",
              margin: float = 0.02) -> dict[str, Any]:
    """One claim on one dataset from a long metrics frame (experiment, seed, qid, measure, value).

    With ``inference="seed_aware"`` (the default) the per-seed per-query differences (seeds paired by id, queries by
    qid; a balanced design) go to :func:`curricula.statistics.stats.seed_aware_test`; with ``per_query`` the seed-averaged
    per-query differences go to the paired t-test (the same function with one row). The row holds the means, the
    effect, its relative size, the ``1 - alpha`` CI, ``p`` (that test's), ``p_per_query`` (the paired t-test on
    seed-averaged values, always), ``se`` and ``df``, the variance components' SDs (``sd_seed``, ``sd_query``,
    ``sd_resid``; null when the design is unbalanced under ``per_query``) and their mean squares (``ms_*``), the MDE,
    the equivalence margin (``margin`` relative to the ``against`` mean, as an absolute ``margin``), ``p_equivalence``
    (two one-sided tests, :func:`curricula.statistics.stats.equivalence_pvalue`), ``equivalence_reachable`` (whether the design
    can show equivalence at all, :func:`curricula.statistics.stats.equivalence_reachable`) and the
    :func:`curricula.statistics.stats.verdict`."""
    check_inference(inference)
    for name in (experiment, against):
        if metrics.filter((pl.col("experiment") == name) & (pl.col("measure") == measure)).is_empty():
            raise ValueError(f"no {measure} values for {name!r} (is it in the study's experiments?)")
    x, y = _paired(metrics, experiment, measure, None, against)
    d = x - y
    balanced = seed_aware_result(metrics, experiment, measure, against, alpha, inference=inference)
    components = balanced.components if balanced is not None else None
    result = balanced if inference == "seed_aware" else seed_aware_test(d[None, :], alpha)
    against_mean = float(y.mean())
    margin_abs = margin * against_mean if against_mean > 0 else math.nan
    p_equivalence = equivalence_pvalue(result, margin_abs) if margin_abs > 0 else math.nan
    seeds = metrics.filter(pl.col("experiment") == experiment)["seed"].n_unique()
    effect = float(d.mean())
    return {"experiment": experiment, "against": against, "queries": int(d.size), "seeds": int(seeds),
            "experiment_mean": float(x.mean()), "against_mean": against_mean, "effect": effect,
            "effect_pct": 100 * effect / against_mean if against_mean > 0 else math.nan,
            "ci_low": result.ci_low, "ci_high": result.ci_high, "p": result.p, "p_per_query": paired_ttest(x, y),
            "se": result.se, "df": result.df,
            **{f"sd_{k}": math.sqrt(getattr(components, f"var_{k}")) if components else None
               for k in ("seed", "query", "resid")},
            **{f"ms_{k}": _finite(getattr(components, f"ms_{k}")) if components else None
               for k in ("seed", "query", "resid")},
            "mde": seed_aware_mde(result, alpha, power), "margin": margin_abs, "p_equivalence": p_equivalence,
            "equivalence_reachable": margin_abs > 0 and equivalence_reachable(result, margin_abs, alpha),
            "verdict": verdict(effect, result.p, expect, p_equivalence, alpha)}


FINDINGS_SCHEMA = {"paper": pl.String, "claim": pl.String, "dataset": pl.String, "experiment": pl.String,
                   "against": pl.String, "expect": pl.String, "measure": pl.String, "queries": pl.Int64,
                   "seeds": pl.Int64, "experiment_mean": pl.Float64, "against_mean": pl.Float64,
                   "effect": pl.Float64, "effect_pct": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                   "p": pl.Float64, "p_per_query": pl.Float64, "se": pl.Float64, "df": pl.Float64,
                   "sd_seed": pl.Float64, "sd_query": pl.Float64, "sd_resid": pl.Float64, "ms_seed": pl.Float64,
                   "ms_query": pl.Float64, "ms_resid": pl.Float64, "mde": pl.Float64, "margin": pl.Float64,
                   "p_equivalence": pl.Float64, "equivalence_reachable": pl.Boolean, "verdict": pl.String,
                   "p_adjusted": pl.Float64, "p_equivalence_adjusted": pl.Float64, "survives": pl.Boolean,
                   "differing_keys": pl.String, "sequential_verdict": pl.String, "look_seeds": pl.Int64,
                   "p_boundary": pl.Float64, "equivalence_boundary": pl.Float64}
#: a cell's sequential decision and the ids of the seeds it rests on (``study.sequential``; curricula/study/rounds.py)
SequentialCell = tuple[SequentialDecision, Sequence[int]]


def findings_table(metrics: Mapping[str, pl.DataFrame], claims: Sequence[Mapping[str, str]], measure: str,
                   alpha: float = 0.05, power: float = 0.8, *, inference: str = "seed_aware", margin: float = 0.02,
                   multiplicity: str = "holm", differing_keys: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
                   sequential: Mapping[tuple[str, str], SequentialCell] | None = None) -> pl.DataFrame:
    """A row per (claim, dataset) in claim then dataset order, over the datasets each claim is tested on
    (:func:`curricula.study.grid.claim_datasets`): :func:`claim_row` on that dataset's metrics, then the
    multiplicity adjustment (:func:`curricula.statistics.stats.adjust` by ``multiplicity``: ``holm``, ``bh`` or ``none``) over
    one family holding *both* p values of every row, the difference test's ``p`` and the equivalence test's
    ``p_equivalence``, as ``p_adjusted`` and ``p_equivalence_adjusted``; Holm counts rows, of which at most one null
    each is true (Shaffer's count, :func:`curricula.statistics.stats.holm`'s groups). ``survives`` is true for a decided verdict
    every p value of which (:func:`curricula.statistics.stats.verdict_pvalues`) stays below ``alpha`` after adjustment.

    Taking only the p behind each verdict (the TOST p for an equivalent row) would let a true null judged equivalent
    leave the difference family and lower the bar for every other row: with 12 null rows the chance that a false
    reproduced / not reproduced survives was 0.357 instead of 0.05 (``tests/test_findings.py``).

    ``metrics`` maps a dataset to its long metrics frame (experiment, seed, qid, measure, value);
    ``differing_keys`` ({claim id: {dataset: keys}}, :func:`claim_differences`) fills the column of the keys in
    which the two arms' specs differ, comma-separated (null where not given).

    ``sequential`` ({(claim id, dataset): (its sequential decision, the seed ids of the look it rests on)}, from a
    study's rounds) restricts that cell's rows to those seeds, so every column describes the look the cell was
    judged at, and fills ``sequential_verdict``, ``look_seeds`` and the look's thresholds ``p_boundary`` and
    ``equivalence_boundary`` (null for a cell without rounds, e.g. an active-learning claim).
    """
    rows = []
    for claim in claims:
        for dataset in claim_datasets(claim, list(metrics)):
            frame = metrics[dataset]
            if measure not in set(frame["measure"]):
                raise ValueError(f"study.measure {measure!r} was not evaluated on {dataset} "
                                 f"(evaluated: {sorted(set(frame['measure']))})")
            decision, seeds = (sequential or {}).get((claim.get("id"), dataset), (None, None))
            cell = frame if seeds is None else with_seeds(frame, seeds)
            try:
                row = claim_row(cell, claim["experiment"], claim["against"], measure, claim["expect"], alpha, power,
                                inference=inference, margin=margin)
            except ValueError as err:
                raise ValueError(f"study claim {claim['claim']!r} on {dataset}: {err}") from None
            keys = (differing_keys or {}).get(claim.get("id"), {}).get(dataset)
            rows.append({"paper": claim["paper"], "claim": claim["claim"], "dataset": dataset,
                         "expect": claim["expect"], "measure": measure, **row,
                         "differing_keys": None if keys is None else ", ".join(keys),
                         **sequential_columns(decision)})
    # a cell's difference null (effect 0) and equivalence null (effect beyond the margin) cannot both be true: Holm
    # counts cells, not p values (stats.holm's groups; the rounds count them alike, sequential.holm_design)
    adjusted = adjust([r[k] for r in rows for k in ("p", "p_equivalence")], multiplicity,
                      groups=[i for i in range(len(rows)) for _ in range(2)])
    for i, r in enumerate(rows):
        r["p_adjusted"], r["p_equivalence_adjusted"] = adjusted[2 * i], adjusted[2 * i + 1]
        behind = verdict_pvalues(r["verdict"], r["p_adjusted"], r["p_equivalence_adjusted"])
        r["survives"] = bool(behind) and all(math.isfinite(q) and q < alpha for q in behind)
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA).select(list(FINDINGS_SCHEMA))


def sequential_columns(decision: SequentialDecision | None) -> dict[str, Any]:
    """A findings row's sequential columns: the verdict, the seeds of the look it rests on and that look's p
    thresholds (the difference test's two-sided one, each one-sided equivalence test's); null without rounds."""
    if decision is None:
        return {"sequential_verdict": None, "look_seeds": None, "p_boundary": None, "equivalence_boundary": None}
    return {"sequential_verdict": decision.verdict, "look_seeds": decision.seeds, "p_boundary": decision.p_boundary,
            "equivalence_boundary": decision.equivalence_boundary}


def dataset_plans(table: pl.DataFrame, alpha: float = 0.05, power: float = 0.8,
                  max_queries: int | None = None) -> pl.DataFrame:
    """The planner per dataset of a :func:`findings_table`: the variance components of the differences pooled over
    that dataset's claims (:func:`curricula.report.tables.pooled_components`: mean squares averaged, then clipped), the 2%
    effect (of the mean of the claims' ``against`` means), the test queries 2 to 10 seeds need to detect it
    (:func:`curricula.statistics.stats.plan`; columns ``seeds_<S>``, null when out of reach), the cheapest design (fewest
    seeds, :func:`curricula.statistics.stats.cheapest`), and the seeds the dataset's own test queries need
    (``seeds_needed``, :func:`curricula.report.tables.seeds_range`) with the 90% interval of sd_seed (``sd_seed_low``,
    ``sd_seed_high``) and the seeds at its two ends (``seeds_needed_low``, ``seeds_needed_high``). A dataset without
    components (unbalanced, per_query) is left out."""
    rows = []
    for dataset in dict.fromkeys(table["dataset"]):
        part = table.filter(pl.col("dataset") == dataset)
        components = pooled_components(part)
        if components is None:
            continue
        effect = RELATIVE_EFFECT * float(part["against_mean"].mean())
        seeds, queries = int(part["seeds"].max()), int(part["queries"].max())
        needed = plan(components, effect, alpha=alpha, power=power, max_queries=max_queries) if effect > 0 else {}
        best = cheapest(needed)
        low, high, own = (seeds_range(components, effect, seeds, queries, alpha, power)
                          if effect > 0 and seeds > 1 else (math.nan, math.nan, (None, None, None)))
        rows.append({"dataset": dataset, "claims": part.height, "seeds": seeds, "queries": queries,
                     **{f"sd_{k}": math.sqrt(v) for k, v in zip(("seed", "query", "resid"), components)},
                     "sd_seed_low": low, "sd_seed_high": high,
                     "effect": effect, **{f"seeds_{s}": needed.get(s) for s in SEEDS_PLANNED},
                     "cheapest_seeds": best[0] if best else None, "cheapest_queries": best[1] if best else None,
                     "seeds_needed": own[0], "seeds_needed_low": own[1], "seeds_needed_high": own[2]})
    schema = {"dataset": pl.String, "claims": pl.Int64, "seeds": pl.Int64, "queries": pl.Int64,
              **{c: pl.Float64 for c in ("sd_seed", "sd_query", "sd_resid", "sd_seed_low", "sd_seed_high", "effect")},
              **{f"seeds_{s}": pl.Int64 for s in SEEDS_PLANNED}, "cheapest_seeds": pl.Int64,
              "cheapest_queries": pl.Int64, "seeds_needed": pl.Int64, "seeds_needed_low": pl.Int64,
              "seeds_needed_high": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def _signed(value: float, digits: int = 4) -> str:
    return "–" if not math.isfinite(value) else f"{value:+.{digits}f}".replace("-", "−")


def _p(value: float) -> str:
    return "–" if not math.isfinite(value) else ("< 0.001" if value < 0.001 else f"{value:.3f}")


def verdict_cell(row: Mapping[str, Any]) -> str:
    """``reproduced (+2.5%)``: the verdict word and the relative effect, then :data:`NOT_SURVIVING` when the
    verdict is decided but does not survive the multiplicity adjustment (a row without ``survives`` gets none). A
    cell judged in rounds shows its sequential verdict and the seeds of its look instead, ``reproduced (+2.5%, 10
    seeds)``, without the mark (the adjustment is of the fixed tests at those seeds)."""
    pct = row["effect_pct"]
    effect = f"{_signed(pct, 1)}%" if pct is not None and math.isfinite(pct) else None
    if row.get("sequential_verdict") is not None:
        seeds = f"{row['look_seeds']} seeds"
        inside = f"{effect}, {seeds}" if effect else seeds
        return f"{row['sequential_verdict']} ({inside})"
    cell = f"{row['verdict']} ({effect})" if effect else row["verdict"]
    return cell + NOT_SURVIVING if fails_adjustment(row) else cell


def fails_adjustment(row: Mapping[str, Any]) -> bool:
    """Whether a row's verdict is decided but does not survive the multiplicity adjustment (the page marks it
    :data:`NOT_SURVIVING`); a row without ``survives`` does not fail."""
    return row["verdict"] != INCONCLUSIVE and row.get("survives") is False


def sequential_cell(row: Mapping[str, Any]) -> str:
    """A row's sequential verdict, the seeds of its look and that look's threshold of the difference test, e.g.
    ``reproduced (10 seeds, p < 0.0054)``; ``–`` for a fixed-seed row."""
    if row.get("sequential_verdict") is None:
        return "–"
    return f"{row['sequential_verdict']} ({row['look_seeds']} seeds, p < {row['p_boundary']:.2g})"


def sequential_paragraph(alpha: float, multiplicity: str = "none") -> list[str]:
    """The findings page's account of a study judged in rounds (``study.sequential``), with ``multiplicity`` the
    adjustment the rounds used (``holm``: :func:`curricula.statistics.sequential.holm_design`; ``none``)."""
    family = (f"The rounds adjust for the number of cells by the sequential Holm procedure (curricula.sequential."
              f"holm_design; Maurer & Bretz 2013): every cell's difference and equivalence hypotheses form one family "
              f"at alpha {alpha:g} times the sequential claims' share of all claims, each hypothesis tested at the "
              f"family's alpha over the cells still holding a hypothesis not rejected (a cell's two nulls cannot both "
              f"be true; Shaffer 1986), so the p boundary shown is already adjusted. "
              if multiplicity == "holm" else
              "The rounds do not adjust for the number of cells (study.multiplicity none). ")
    return [f"Seeds in rounds (study.sequential): each cell was tested after each round of seeds and trained more "
            f"only while undecided; its verdict is the group-sequential one (curricula.statistics.sequential: Lan-DeMets alpha "
            f"spending over all its looks), at the first look where the seed-aware p fell below that look's threshold "
            f"(or both equivalence p below theirs), else inconclusive at the last look. {family}The verdict matrix "
            f"shows it with the seeds of that look; every other column is the fixed test on those seeds (its verdict "
            f"and multiplicity adjustment at alpha {alpha:g}, for comparison). Active-learning claims keep their fixed "
            f"seeds.", ""]


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def plan_markdown(plans: pl.DataFrame, measure: str, alpha: float = 0.05, power: float = 0.8,
                  max_queries: int | None = None) -> list[str]:
    """The findings page's planner section (a :func:`dataset_plans` table) as Markdown lines."""
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


def findings_markdown(table: pl.DataFrame, *, alpha: float = 0.05, power: float = 0.8, title: str = "",
                      inference: str = "seed_aware", margin: float = 0.02, multiplicity: str = "holm",
                      plans: pl.DataFrame | None = None, max_queries: int | None = None,
                      costs: pl.DataFrame | None = None, changes: pl.DataFrame | None = None,
                      previous: str = "") -> str:
    """The findings page: how to read it, a verdict matrix (claim x dataset), the family and its multiplicity
    adjustment, the verdicts that changed since the last study (``changes``, :func:`verdict_changes` against the file
    ``previous``), the cost per dataset (``costs``, :func:`curricula.study.costs.dataset_costs`), then one table per claim
    with each dataset's means, effect, CI, p (and the per-query p), MDE, equivalence p and verdict, and the planner
    (``plans``, :func:`dataset_plans`)."""
    if table.is_empty():
        return f"# {title or 'Findings'}\n\nThe study lists no claims (study.claims).\n"
    datasets = list(dict.fromkeys(table["dataset"]))
    claims = list(dict.fromkeys(zip(table["paper"], table["claim"])))
    measure = table["measure"][0]
    rounds = table["sequential_verdict"].is_not_null().any()
    level = f"{100 * (1 - alpha):g}%"
    if inference == "seed_aware":
        test = ("the seed-aware test: the per-seed per-query differences (seeds paired across the two experiments "
                "by seed id, queries by qid) as a crossed random-effects model, d = mu + seed + query + residual, "
                "whose variance components are estimated by the method of moments; the mean's SE is the plug-in of "
                "the clipped components, sqrt(s2_seed / S + s2_query / Q + s2_resid / (S Q)), with Satterthwaite's "
                "df taken at the seed mean square's upper 80% confidence limit and never below S - 1 (no pretest: "
                "its simulated type-I error stays at 5% from 2 seeds up), so a verdict must survive a new draw of "
                "seeds as well as of queries (with one seed it is the per-query t-test). "
                "p per query: the paired t-test on seed-averaged values, which holds the trained models fixed")
    else:
        test = "the paired two-sided t-test on seed-averaged per-query values (study.inference: per_query)"
    lines = [f"# {title or 'Findings of the study'}", "",
             f"Datasets: {', '.join(datasets)}. Each claim compares two experiments of the same grid on each dataset: "
             f"effect = mean over seeds and test queries of (experiment - against) on per-query test {measure} "
             f"(positive = the experiment is better), with its {level} confidence interval and p value by {test}. "
             f"MDE: the minimum detectable effect of that test (alpha {alpha:g}, power {power:g}), "
             f"(t_(1-alpha/2),df + t_power,df) * SE. Verdict, in this order: **{REPRODUCED}** when p < {alpha:g} "
             f"and the effect has the claimed sign, **{NOT_REPRODUCED}** when p < {alpha:g} and it has the "
             f"opposite sign, each followed by **{BELOW_MARGIN[2:]}** when two one-sided tests also put it within "
             f"the margin (a real effect, measured precisely, smaller than the margin); else **{EQUIVALENT}** when "
             f"two one-sided tests (same SE and df) put the effect within ±{margin:.0%} of the compared result's "
             f"mean (p_equiv < {alpha:g}: no effect as large as the margin); else **{INCONCLUSIVE}** (too little data "
             f"to tell). Where t_(1-alpha),df * SE reaches the margin the design cannot show equivalence at all "
             f"(p_equiv reads \"out of reach\"): inconclusive is then certain for any effect. Each claim names the "
             f"factors it tests; "
             f"the keys in which its two arms' resolved training specs differ are listed under it (a difference "
             f"outside its factors stops the study at start-up).", "",
             *(sequential_paragraph(alpha, multiplicity) if rounds else []),
             "## Verdicts", "", "| paper | claim | " + " | ".join(datasets) + " |",
             "|---|---|" + "---|" * len(datasets)]
    cell = {(r["paper"], r["claim"], r["dataset"]): r for r in table.iter_rows(named=True)}
    sequential_column = (["sequential (seeds, p boundary)"] if rounds else [])
    for paper, claim in claims:
        cells = [verdict_cell(cell[(paper, claim, d)]) if (paper, claim, d) in cell else "–" for d in datasets]
        lines.append(f"| {paper} | {claim} | " + " | ".join(cells) + " |")
    lines += ["", f"{NOT_SURVIVING}: decided at alpha {alpha:g}, but does not survive "
              f"{MULTIPLICITY_NAMES[multiplicity]} over the family (below)."] if multiplicity != "none" else []
    counts = table.group_by("verdict").len()
    tally = {v: n for v, n in counts.iter_rows()}
    survivors = table.filter(pl.col("survives"))
    kept = {v: n for v, n in survivors.group_by("verdict").len().iter_rows()}
    decided = [v for v in VERDICTS if v != INCONCLUSIVE]
    listed = [v for v in VERDICTS if tally.get(v) or not v.endswith(BELOW_MARGIN)]
    lines += ["", f"Over {table.height} (claim, dataset) tests: " + ", ".join(
        f"{tally.get(v, 0)} {v}" for v in listed) + ".", "",
        "Multiplicity: the family is every claim x dataset, " + (
            f"{len(claims)} claims x {len(datasets)} datasets = " if len(claims) * len(datasets) == table.height else
            f"each claim on the datasets it is tested on ({len(claims)} claims, {len(datasets)} datasets): ") +
        f"{table.height} rows; each contributes both its p values, the difference test's and the equivalence "
        f"test's, so the family holds {2 * table.height} tests (a null judged equivalent cannot leave it and lower "
        f"the bar for the others), adjusted by {MULTIPLICITY_NAMES[multiplicity]}"
        + (" counting rows, not tests: a row's two nulls (no difference, a difference beyond the margin) cannot both "
           "be true, so a row leaves the count only when both its tests are rejected (Shaffer 1986)"
           if multiplicity == "holm" else "") + f" (study.multiplicity: "
        f"{multiplicity}). A decided verdict survives when every p it rests on (p for {REPRODUCED} and "
        f"{NOT_REPRODUCED}, p_equiv for {EQUIVALENT}, both for {BELOW_MARGIN[2:]}) stays below {alpha:g} after "
        f"adjustment: " + ", ".join(
            f"{kept.get(v, 0)} of {tally.get(v, 0)} {v}" for v in decided if tally.get(v)) + " (column "
        "\"survives\").", ""]
    if changes is not None:
        lines += verdict_changes_markdown(changes, previous)
    if costs is not None:
        lines += costs_markdown(costs)
    for paper, claim in claims:
        rows = table.filter((pl.col("paper") == paper) & (pl.col("claim") == claim))
        first = rows.row(0, named=True)
        lines += [f"## {paper}: {claim}", "",
                  f"`{first['experiment']}` against `{first['against']}`, expected {first['expect']}."
                  + differing_keys_sentence(rows), "",
                  f"| dataset | test queries | seeds | {first['experiment']} | {first['against']} | effect | "
                  f"{level} CI | p | p per query | MDE | p_equiv (±margin) | verdict | adjusted p, p_equiv | "
                  "survives |" + "".join(f" {c} |" for c in sequential_column),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + "---|" * len(sequential_column)]
        for r in rows.iter_rows(named=True):
            pct = f" ({_signed(r['effect_pct'], 1)}%)" if math.isfinite(r["effect_pct"]) else ""
            mde_pct = 100 * r["mde"] / r["against_mean"] if r["against_mean"] > 0 else math.nan
            mde_txt = f"{r['mde']:.4f}" + (f" ({mde_pct:.1f}%)" if math.isfinite(mde_pct) else "")
            equiv = (f"{_p(r['p_equivalence'])} (±{r['margin']:.4f})" if r["equivalence_reachable"] else
                     f"out of reach (±{r['margin']:.4f})") if math.isfinite(r["margin"]) else "–"
            survives = "–" if r["verdict"] == INCONCLUSIVE else ("yes" if r["survives"] else "no")
            lines.append(f"| {r['dataset']} | {r['queries']:,} | {r['seeds']} | {r['experiment_mean']:.4f} | "
                         f"{r['against_mean']:.4f} | {_signed(r['effect'])}{pct} | "
                         f"[{_signed(r['ci_low'])}, {_signed(r['ci_high'])}] | {_p(r['p'])} | "
                         f"{_p(r['p_per_query'])} | {mde_txt} | {equiv} | {r['verdict']} | {_p(r['p_adjusted'])}, "
                         f"{_p(r['p_equivalence_adjusted'])} | {survives} |"
                         + (f" {sequential_cell(r)} |" if sequential_column else ""))
        lines.append("")
    if plans is not None:
        lines += plan_markdown(plans, measure, alpha, power, max_queries)
    return "\n".join(lines)


#: The columns a previous study's findings table (findings.parquet or findings.csv) needs for :func:`verdict_changes`.
PREVIOUS_COLUMNS = ("paper", "claim", "dataset", "verdict", "seeds")
#: How a cell compares with the last study (:func:`verdict_changes`'s ``change``).
SAME, CHANGED, NEW, GONE = "same", "changed", "new", "gone"


def shown_verdicts(table: pl.DataFrame) -> pl.DataFrame:
    """Each cell's verdict as the verdict matrix reads it, without the effect: (paper, claim, dataset, verdict,
    seeds). A cell judged in rounds shows its sequential verdict and the seeds of its look; a fixed-seed cell its
    verdict, marked :data:`NOT_SURVIVING` when decided but not surviving the multiplicity adjustment, and its seeds.
    A table without the optional columns (``sequential_verdict``, ``look_seeds``, ``survives``) reads as fixed-seed
    and surviving."""
    rows = []
    for r in table.iter_rows(named=True):
        if r.get("sequential_verdict") is not None:
            rows.append((r["paper"], r["claim"], r["dataset"], r["sequential_verdict"], r["look_seeds"]))
            continue
        rows.append((r["paper"], r["claim"], r["dataset"],
                     r["verdict"] + (NOT_SURVIVING if fails_adjustment(r) else ""), r["seeds"]))
    return pl.DataFrame(rows, schema={"paper": pl.String, "claim": pl.String, "dataset": pl.String,
                                      "verdict": pl.String, "seeds": pl.Int64}, orient="row")


def read_previous_findings(path: str | Path) -> pl.DataFrame:
    """A previous study's findings table, the ``findings.parquet`` or ``findings.csv`` its ``report_study`` wrote
    (study.previous), read for :func:`verdict_changes`; a file that is missing, of another format or without the
    columns :data:`PREVIOUS_COLUMNS` is an :class:`~curricula.plumbing.errors.InputFormatError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise InputFormatError(path, None, "study.previous: no such file (a findings.parquet or findings.csv of an "
                                           "earlier study)")
    if path.suffix not in (".parquet", ".csv"):
        raise InputFormatError(path, None, f"study.previous: expected a findings .parquet or .csv, got {path.suffix!r}")
    try:
        frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
    except (pl.exceptions.PolarsError, OSError) as err:
        raise InputFormatError(path, None, f"study.previous: not a readable {path.suffix[1:]} table ({err})") from None
    missing = [c for c in PREVIOUS_COLUMNS if c not in frame.columns]
    if missing:
        raise InputFormatError(path, None, f"study.previous: not a findings table: no column {missing} (it has "
                                           f"{frame.columns})")
    return frame


def verdict_changes(table: pl.DataFrame, previous: pl.DataFrame) -> pl.DataFrame:
    """This study's verdicts (``table``) cell by cell against a previous study's (``previous``), both as the verdict
    matrix shows them (:func:`shown_verdicts`), matched on (paper, claim, dataset): ``previous_verdict``,
    ``previous_seeds``, ``verdict``, ``seeds`` and ``change``: :data:`SAME` or :data:`CHANGED` verdict, :data:`NEW`
    (no such cell before) or :data:`GONE` (not in this study). In this study's cell order, gone cells last."""
    key = ["paper", "claim", "dataset"]
    now = shown_verdicts(table).with_row_index("order")
    before = shown_verdicts(previous).rename({"verdict": "previous_verdict", "seeds": "previous_seeds"})
    joined = now.join(before, on=key, how="full", coalesce=True)
    change = (pl.when(pl.col("verdict").is_null()).then(pl.lit(GONE))
              .when(pl.col("previous_verdict").is_null()).then(pl.lit(NEW))
              .when(pl.col("verdict") == pl.col("previous_verdict")).then(pl.lit(SAME))
              .otherwise(pl.lit(CHANGED)))
    return (joined.with_columns(change=change).sort("order", nulls_last=True, maintain_order=True)
            .select(*key, "previous_verdict", "previous_seeds", "verdict", "seeds", "change"))


def verdict_changes_markdown(changes: pl.DataFrame, previous: str = "") -> list[str]:
    """The findings page's section on the verdicts that changed since the last study (a :func:`verdict_changes`
    table read from ``previous``): the counts, then a row per changed, new or gone cell."""
    counts = {c: n for c, n in changes.group_by("change").len().iter_rows()}
    source = f" (`{previous}`, study.previous)" if previous else ""
    lines = ["## Verdicts against the last study", "",
             f"Against the last study's findings{source}, cell by cell as each verdict matrix shows it (a sequential "
             f"verdict with the seeds of its look): {counts.get(CHANGED, 0)} changed, {counts.get(SAME, 0)} the "
             f"same, {counts.get(NEW, 0)} new, {counts.get(GONE, 0)} no longer tested.", ""]
    shown = changes.filter(pl.col("change") != SAME)
    if shown.is_empty():
        return lines
    lines += ["| paper | claim | dataset | last study (seeds) | this study (seeds) | change |",
              "|---|---|---|---|---|---|"]

    def cell(verdict: str | None, seeds: int | None) -> str:
        return "–" if verdict is None else f"{verdict} ({seeds})"

    for r in shown.iter_rows(named=True):
        before = cell(r["previous_verdict"], r["previous_seeds"])
        lines.append(f"| {r['paper']} | {r['claim']} | {r['dataset']} | {before} | {cell(r['verdict'], r['seeds'])} | "
                     f"{r['change']} |")
    return lines + [""]


def costs_markdown(costs: pl.DataFrame) -> list[str]:
    """The findings page's cost section: per dataset, the core-hours of the stages before training and of the runs
    the page rests on (a :func:`curricula.study.costs.dataset_costs` table)."""
    lines = ["## Cost", "",
             "CPU time of the jobs per dataset, in core-hours (3,600 CPU seconds; Snakemake's benchmark files, each "
             "job's latest run, curricula/study/costs.py): the stages before training (BM25, embeddings, teacher, "
             "difficulty, curricula, references and the dataset's report), and the runs this page rests on (each "
             "claim arm's training and evaluation for every seed it reads). A run without a benchmark file (trained "
             "elsewhere, or its files deleted) is counted as unmeasured and adds nothing.", "",
             "| dataset | stage jobs | stages, core-hours | runs | runs, core-hours | unmeasured runs | core-hours |",
             "|---|---|---|---|---|---|---|"]
    for r in costs.iter_rows(named=True):
        lines.append(f"| {r['dataset']} | {r['stage_jobs']} | {r['stage_core_hours']:.2f} | {r['runs']} | "
                     f"{r['run_core_hours']:.2f} | {r['runs_unmeasured']} | {r['core_hours']:.2f} |")
    total = costs["core_hours"].sum() if costs.height else 0.0
    return lines + ["", f"All datasets: {total:.2f} core-hours.", ""]


def plot_findings(table: pl.DataFrame, path: str | Path, columns: int = 2) -> Path:
    """A forest plot, one panel per claim (``columns`` panels a row): per dataset, the effect as % of the compared
    result's mean with its confidence interval, the +/-MDE band shaded, coloured by verdict."""
    from curricula.report.figures import _save, _use_agg

    _use_agg()
    import matplotlib.pyplot as plt

    claims = list(dict.fromkeys(zip(table["paper"], table["claim"])))
    datasets = list(dict.fromkeys(table["dataset"]))
    colours = {REPRODUCED: "tab:green", NOT_REPRODUCED: "tab:red", EQUIVALENT: "tab:blue", INCONCLUSIVE: "tab:gray"}
    columns = max(1, min(columns, len(claims)))
    rows = math.ceil(len(claims) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, rows * (0.32 * len(datasets) + 1.0)),
                             squeeze=False)
    for ax in axes.flat[len(claims):]:
        ax.set_visible(False)
    for ax, (paper, claim) in zip(axes.flat, claims):
        for r in table.filter((pl.col("paper") == paper) & (pl.col("claim") == claim)).iter_rows(named=True):
            scale = 100 / r["against_mean"] if r["against_mean"] > 0 else math.nan
            y = len(datasets) - 1 - datasets.index(r["dataset"])
            ax.fill_between([-r["mde"] * scale, r["mde"] * scale], y - 0.35, y + 0.35, color="0.88", lw=0)
            ax.errorbar(r["effect"] * scale, y, xerr=[[max(0.0, (r["effect"] - r["ci_low"]) * scale)],
                                                      [max(0.0, (r["ci_high"] - r["effect"]) * scale)]],
                        fmt="o", color=colours[r["verdict"]], capsize=3, ms=4)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(range(len(datasets)), list(reversed(datasets)), fontsize=7)
        ax.set_ylim(-0.6, len(datasets) - 0.4)
        ax.set_title(f"{paper}: {claim}", fontsize=7, loc="left", wrap=True)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    fig.supxlabel(f"effect, % of the compared mean ({table['measure'][0]}), with its CI; grey band: ±MDE; "
                  "green reproduced, red not reproduced, blue equivalent, grey inconclusive", fontsize=7)
    fig.tight_layout()
    out = _save(fig, path)
    plt.close(fig)
    return out


def load_active_metrics(paths: Mapping[tuple[str, str], str | Path]) -> pl.DataFrame:
    """Per-query test values of active-learning runs (ACTIVE_TEST_METRICS files keyed (method, seed)) as a long
    metrics frame whose experiment is ``active:<method>@<round>``."""
    from curricula.active.loop import ACTIVE_TEST_METRICS
    from curricula.plumbing.contracts import read_table

    frames = [read_table(p, ACTIVE_TEST_METRICS).with_columns(
        experiment=pl.format(ACTIVE_PREFIX + method + "@{}", pl.col("round")), seed=pl.lit(str(seed)))
        for (method, seed), p in paths.items()]
    return pl.concat(frames).select("experiment", "seed", "qid", "measure", "value")


def findings_stage(metric_paths: Mapping[tuple[str, str, str], str | Path], claims: Sequence[Mapping[str, str]],
                   outputs: Mapping[str, str | Path], *, measure: str, alpha: float = 0.05, power: float = 0.8,
                   title: str = "", active_paths: Mapping[tuple[str, str, str], str | Path] | None = None,
                   inference: str = "seed_aware", margin: float = 0.02, multiplicity: str = "holm",
                   plan_max_queries: int | None = None,
                   differing_keys: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
                   rounds: str | Path | None = None, seeds: Mapping[str, Sequence[int]] | None = None,
                   benchmarks: Mapping[str, str | Path] | None = None,
                   previous: str | Path | None = None) -> pl.DataFrame:
    """Rule ``report_study``: the findings table from every dataset's per-query test metrics, keyed (dataset,
    experiment, seed), and from its active-learning runs' per-round test values, keyed (dataset, method, seed),
    written as ``findings`` (.md), ``table`` (.csv), ``parquet`` and ``figure`` (.png), each atomically.
    ``inference``, ``margin``, ``multiplicity`` and ``differing_keys`` go to :func:`findings_table`; the page ends
    with the planner (:func:`dataset_plans`, at most ``plan_max_queries`` test queries). ``rounds``, the last
    round's record of a study with seeds in rounds (:func:`curricula.study.rounds.read_round`), gives each cell its
    sequential decision, judged on the first seeds of ``seeds`` ({dataset: its seed list, extended by
    :func:`curricula.study.rounds.look_seeds`}). ``benchmarks`` ({dataset: its benchmark folder}) adds the cost per dataset
    (:func:`curricula.study.costs.dataset_costs`; also written as ``costs``, .csv, when that output is given);
    ``previous``, an earlier study's findings table (:func:`read_previous_findings`), adds the verdict changes."""
    from curricula.evaluation.comparisons import load_metrics, trained_experiment
    from curricula.plumbing.contracts import write_file_atomically, write_text_atomically
    from curricula.study.costs import dataset_costs

    by_dataset: dict[str, dict[tuple[str, str], str | Path]] = {}
    for (dataset, experiment, seed), path in metric_paths.items():
        by_dataset.setdefault(dataset, {})[(experiment, seed)] = path
    active: dict[str, dict[tuple[str, str], str | Path]] = {}
    for (dataset, method, seed), path in (active_paths or {}).items():
        active.setdefault(dataset, {})[(method, seed)] = path
    metrics = {}
    for dataset in dict.fromkeys([*by_dataset, *active]):
        parts = [load_metrics(by_dataset[dataset])] if dataset in by_dataset else []
        parts += [load_active_metrics(active[dataset])] if dataset in active else []
        metrics[dataset] = pl.concat(parts)
    sequential = None
    if rounds is not None:
        from curricula.study.rounds import look_seeds, read_round

        if seeds is None:
            raise ValueError("a study with seeds in rounds needs each dataset's seed list")
        sequential = {(claim, dataset): (decision, look_seeds(seeds[dataset], decision.seeds))
                      for (claim, dataset), decision in read_round(rounds)["decisions"].items()}
    table = findings_table(metrics, claims, measure, alpha, power, inference=inference, margin=margin,
                           multiplicity=multiplicity, differing_keys=differing_keys, sequential=sequential)
    plans = dataset_plans(table, alpha, power, plan_max_queries)
    costs = None
    if benchmarks is not None:
        runs: dict[str, list[tuple[str, str]]] = {}
        for dataset, experiment, seed in metric_paths:
            runs.setdefault(dataset, []).append((trained_experiment(experiment), str(seed)))
        active_runs: dict[str, list[tuple[str, str]]] = {}
        for dataset, method, seed in (active_paths or {}):
            active_runs.setdefault(dataset, []).append((method, str(seed)))
        costs = dataset_costs({d: benchmarks[d] for d in metrics}, runs, active_runs)
    changes = None if previous is None else verdict_changes(table, read_previous_findings(previous))
    write_text_atomically(outputs["findings"], findings_markdown(
        table, alpha=alpha, power=power, title=title, inference=inference, margin=margin, multiplicity=multiplicity,
        plans=plans, max_queries=plan_max_queries, costs=costs, changes=changes,
        previous="" if previous is None else str(previous)))
    if costs is not None and "costs" in outputs.keys():  # a Namedlist's `in` looks at its values
        write_file_atomically(outputs["costs"], costs.write_csv)
    write_file_atomically(outputs["table"], table.write_csv)
    write_file_atomically(outputs["parquet"], table.write_parquet)
    plot_findings(table, outputs["figure"])
    return table

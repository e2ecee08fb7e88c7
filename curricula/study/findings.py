"""The findings of a study (rule ``report_study``): each paper's claim tested on each dataset, the multiplicity
adjustment over the family, the planner per dataset, and the table and forest plot. The page is
:mod:`curricula.study.findings_page`'s (its method explained in docs/studies.md), how a cell's verdict is shown and
compared with the last study's :mod:`curricula.study.verdicts`'s.

Each claim compares two results of the grid on one dataset (:func:`claim_row`): the mean over seeds and test queries
of the per-query difference, its confidence interval and p value by the seed-aware test
(:func:`curricula.statistics.seed_aware.seed_aware_test`; with ``inference="per_query"`` the paired t-test on
seed-averaged values), the per-query t-test's p beside it, the minimum detectable effect
(:func:`curricula.statistics.power.seed_aware_mde`), the two one-sided tests against the equivalence margin and
whether the design can reach equivalence at all, and the verdict (:func:`curricula.statistics.verdicts.verdict`). The
family (:func:`findings_table`) holds both p values of every row, so a true null judged equivalent cannot leave the
family and lower the bar for the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import polars as pl

from curricula.evaluation.comparisons import (
    _paired,
    check_inference,
    seed_aware_result,
    with_seeds,
)
from curricula.plumbing.atomic import write_file_atomically, write_text_atomically
from curricula.report.power import RELATIVE_EFFECT, _finite, pooled_components
from curricula.report.tables import seeds_range
from curricula.statistics.multiplicity import adjust
from curricula.statistics.paired import paired_ttest
from curricula.statistics.power import SEEDS_PLANNED, cheapest, plan, seed_aware_mde
from curricula.statistics.seed_aware import seed_aware_test
from curricula.statistics.sequential_verdicts import SequentialDecision
from curricula.statistics.verdicts import (
    EQUIVALENT,
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    equivalence_pvalue,
    equivalence_reachable,
    verdict,
    verdict_pvalues,
)
from curricula.study.grid import claim_datasets
from curricula.study.findings_page import findings_markdown
from curricula.study.looks import look_seeds
from curricula.study.rounds import read_round
from curricula.study.verdicts import read_previous_findings, verdict_changes

def claim_row(metrics: pl.DataFrame, experiment: str, against: str, measure: str, expect: str,
              alpha: float = 0.05, power: float = 0.8, *, inference: str = "seed_aware",
              margin: float = 0.02) -> dict[str, Any]:
    """One claim on one dataset from a long metrics frame (experiment, seed, qid, measure, value).

    With ``inference="seed_aware"`` (the default) the per-seed per-query differences (seeds paired by id, queries by
    qid; a balanced design) go to :func:`curricula.statistics.seed_aware.seed_aware_test`; with ``per_query`` the
    seed-averaged per-query differences go to the paired t-test (the same function with one row). The row holds the
    means, the effect, its relative size, the ``1 - alpha`` CI, ``p`` (that test's), ``p_per_query`` (the paired t-test
    on seed-averaged values, always), ``se`` and ``df``, the variance components' SDs (``sd_seed``, ``sd_query``,
    ``sd_resid``; null when the design is unbalanced under ``per_query``) and their mean squares (``ms_*``), the MDE,
    the equivalence margin (``margin`` relative to the ``against`` mean, as an absolute ``margin``), ``p_equivalence``
    (two one-sided tests, :func:`curricula.statistics.verdicts.equivalence_pvalue`), ``equivalence_reachable`` (whether
    the design can show equivalence at all, :func:`curricula.statistics.verdicts.equivalence_reachable`) and the
    :func:`curricula.statistics.verdicts.verdict`."""
    check_inference(inference)
    for name in (experiment, against):
        if metrics.filter((pl.col("experiment") == name) & (pl.col("measure") == measure)).is_empty():
            raise ValueError(f"no {measure} values for {name!r} (is it in the study's experiments?)")
    x, y = _paired(metrics, experiment, measure, None, against)
    d = x - y
    balanced = seed_aware_result(metrics, experiment, measure, against, alpha, inference=inference)
    components = balanced.components if balanced is not None else None
    result = balanced if inference == "seed_aware" else seed_aware_test(d[None, :], alpha)
    assert result is not None  # under seed_aware, seed_aware_result raises rather than give None
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
    (:func:`curricula.study.grid.claim_datasets`): :func:`claim_row` on that dataset's metrics, then the multiplicity
    adjustment (:func:`curricula.statistics.multiplicity.adjust` by ``multiplicity``: ``holm``, ``bh`` or ``none``) over
    one family holding *both* p values of every row, the difference test's ``p`` and the equivalence test's
    ``p_equivalence``, as ``p_adjusted`` and ``p_equivalence_adjusted``; Holm counts rows, of which at most one null
    each is true (Shaffer's count, :func:`curricula.statistics.multiplicity.holm`'s groups). ``survives`` is true for a
    decided verdict every p value of which (:func:`curricula.statistics.verdicts.verdict_pvalues`) stays below ``alpha``
    after adjustment.

    Taking only the p behind each verdict (the TOST p for an equivalent row) would let a true null judged equivalent
    leave the difference family and lower the bar for every other row: with 12 null rows the chance that a false
    reproduced / not reproduced survives was 0.357 instead of 0.05 (``tests/test_findings.py``).

    ``metrics`` maps a dataset to its long metrics frame (experiment, seed, qid, measure, value);
    ``differing_keys`` ({claim id: {dataset: keys}}, :func:`curricula.study.grid.claim_differences`) fills the column
    of the keys in which the two arms' specs differ, comma-separated (null where not given).

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
            claim_id = claim.get("id")  # None for a claim without an id: neither mapping below is keyed by one
            decision, seeds = ((sequential or {}).get((claim_id, dataset), (None, None)) if claim_id is not None
                               else (None, None))
            cell = frame if seeds is None else with_seeds(frame, seeds)
            try:
                row = claim_row(cell, claim["experiment"], claim["against"], measure, claim["expect"], alpha, power,
                                inference=inference, margin=margin)
            except ValueError as err:
                raise ValueError(f"study claim {claim['claim']!r} on {dataset}: {err}") from None
            keys = (differing_keys or {}).get(claim_id, {}).get(dataset) if claim_id is not None else None
            rows.append({"paper": claim["paper"], "claim": claim["claim"], "dataset": dataset,
                         "expect": claim["expect"], "measure": measure, **row,
                         "differing_keys": None if keys is None else ", ".join(keys),
                         **sequential_columns(decision)})
    # a cell's difference null (effect 0) and equivalence null (effect beyond the margin) cannot both be true: Holm
    # counts cells, not p values (multiplicity.holm's groups; the rounds count them alike, holm_design)
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


def dataset_plans(table: pl.DataFrame, alpha: float = 0.05, power: float = 0.8,
                  max_queries: int | None = None) -> pl.DataFrame:
    """The planner per dataset of a :func:`findings_table`: the variance components of the differences pooled over that
    dataset's claims (:func:`curricula.report.power.pooled_components`: mean squares averaged, then clipped), the 2%
    effect (of the mean of the claims' ``against`` means), the test queries 2 to 10 seeds need to detect it
    (:func:`curricula.statistics.power.plan`; columns ``seeds_<S>``, null when out of reach), the cheapest design
    (fewest seeds, :func:`curricula.statistics.power.cheapest`), and the seeds the dataset's own test queries need
    (``seeds_needed``, :func:`curricula.report.tables.seeds_range`) with the 90% interval of sd_seed (``sd_seed_low``,
    ``sd_seed_high``) and the seeds at its two ends (``seeds_needed_low``, ``seeds_needed_high``). A dataset without
    components (unbalanced, per_query) is left out."""
    rows = []
    for dataset in dict.fromkeys(table["dataset"]):
        part = table.filter(pl.col("dataset") == dataset)
        components = pooled_components(part)
        if components is None:
            continue
        # the part has rows (it has components) and these columns no nulls; polars types the aggregates as any
        # literal or None
        effect = RELATIVE_EFFECT * float(cast(float, part["against_mean"].mean()))
        seeds, queries = int(cast(int, part["seeds"].max())), int(cast(int, part["queries"].max()))
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


def sequential_cells(rounds: str | Path, seeds: Mapping[str, Sequence[int]] | None
                     ) -> dict[tuple[str, str], SequentialCell]:
    """{(claim id, dataset): (its sequential decision, the seed ids of its look)} from the last round's record of a
    study with seeds in rounds (:func:`curricula.study.rounds.read_round`), each look's seeds the first of that
    dataset's ``seeds`` (:func:`curricula.study.looks.look_seeds`); ValueError without ``seeds``."""
    if seeds is None:
        raise ValueError("a study with seeds in rounds needs each dataset's seed list")
    return {(claim, dataset): (decision, look_seeds(seeds[dataset], decision.seeds))
            for (claim, dataset), decision in read_round(rounds)["decisions"].items()}


def findings_outputs(metrics: Mapping[str, pl.DataFrame], claims: Sequence[Mapping[str, str]],
                     outputs: Mapping[str, str | Path], *, measure: str, alpha: float = 0.05, power: float = 0.8,
                     title: str = "", inference: str = "seed_aware", margin: float = 0.02, multiplicity: str = "holm",
                     plan_max_queries: int | None = None,
                     differing_keys: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
                     rounds: str | Path | None = None, seeds: Mapping[str, Sequence[int]] | None = None,
                     costs: pl.DataFrame | None = None, previous: str | Path | None = None) -> pl.DataFrame:
    """The findings table from every dataset's long metrics frame (``metrics``, experiment, seed, qid, measure,
    value; an active-learning result's experiment is ``active:<method>@<round>``), written as ``findings`` (.md),
    ``table`` (.csv), ``parquet`` and ``figure`` (.png), each atomically. ``inference``, ``margin``, ``multiplicity``
    and ``differing_keys`` go to :func:`findings_table`; the page ends with the planner (:func:`dataset_plans`, at
    most ``plan_max_queries`` test queries). ``rounds``, the last round's record of a study with seeds in rounds,
    gives each cell its sequential decision, judged on the first seeds of ``seeds`` ({dataset: its seed list};
    :func:`sequential_cells`). ``costs`` (:func:`curricula.study.ledger_runs.ledger_costs`) adds the cost per
    dataset (also written as ``costs``, .csv, when that output is given); ``previous``, an earlier study's findings
    table (:func:`curricula.study.verdicts.read_previous_findings`), adds the verdict changes."""
    table = findings_table(metrics, claims, measure, alpha, power, inference=inference, margin=margin,
                           multiplicity=multiplicity, differing_keys=differing_keys,
                           sequential=None if rounds is None else sequential_cells(rounds, seeds))
    changes = None if previous is None else verdict_changes(table, read_previous_findings(previous))
    write_text_atomically(outputs["findings"], findings_markdown(
        table, alpha=alpha, power=power, title=title, inference=inference, margin=margin, multiplicity=multiplicity,
        plans=dataset_plans(table, alpha, power, plan_max_queries), max_queries=plan_max_queries, costs=costs,
        changes=changes, previous="" if previous is None else str(previous)))
    if costs is not None and "costs" in outputs.keys():  # a Namedlist's `in` looks at its values
        write_file_atomically(outputs["costs"], costs.write_csv)
    write_file_atomically(outputs["table"], table.write_csv)
    write_file_atomically(outputs["parquet"], table.write_parquet)
    plot_findings(table, outputs["figure"])
    return table


def findings_from_ledger(runs: Mapping[tuple[str, str, int], str], claims: Sequence[Mapping[str, str]],
                         outputs: Mapping[str, str | Path], *, ledger: str | Path, **settings: Any) -> pl.DataFrame:
    """Rule ``report_study``: the findings page (:func:`findings_outputs`; ``settings`` are its keyword arguments)
    from the claim runs ({(dataset, claim arm, seed): its entry's path}), their values and costs read from the
    study's ``ledger`` (:func:`curricula.study.ledger_runs.gather`)."""
    from curricula.study.ledger_runs import claim_frames, gather, ledger_costs, used_records

    entries = gather(ledger, runs)
    return findings_outputs(claim_frames(entries), claims, outputs, costs=ledger_costs(used_records(entries)),
                            **settings)

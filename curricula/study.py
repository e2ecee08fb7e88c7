"""A study: one experiment grid run over several datasets in one invocation (config ``study``), and its findings.

``study.datasets`` maps a dataset key to where its config comes from: a preset file (``configs/wikiqa.yaml``), an
inline overlay, or both (``{preset: configs/wikiqa.yaml, train: {...}}``). Each dataset's config is built as

    config.yaml  <-  the dataset's preset  <-  the study file's own keys  <-  the dataset's inline overrides

so the study's grid (``experiments``, ``seeds``, ``train``...) is the same on every dataset, a preset supplies what
the study leaves open (its ``dataset`` section, ``train.negatives`` of a re-ranking set), and an override is the
explicit exception. The key names ``results/<key>/``. ``results`` and ``shards`` are the study's (Snakemake keeps
one scatter table per workflow). The Snakefile loads the pipeline once per dataset as a Snakemake module with that
config (rules/study.smk), so datasets share nothing that depends on the data.

The findings (:func:`claim_row`, :func:`findings_table`) test each paper's claim on each dataset: the mean per-query
difference of seed-averaged test values between two experiments, its 95% confidence interval and p value (paired
two-sided t-test), the minimum detectable effect (:func:`curricula.report.mde`, alpha 0.05, power 0.8) and a
verdict word.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import yaml
from scipy.stats import t as student_t

from curricula.config import merge
from curricula.report import (RELATIVE_EFFECT, SEEDS_PLANNED, _paired, adjust, check_inference, cheapest,
                               equivalence_pvalue, paired_ttest, plan, pooled_components, seed_aware_mde,
                               seed_aware_result, seed_aware_test)

KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
STUDY_WIDE = ("results", "shards")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"
EQUIVALENT = "equivalent"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, EQUIVALENT, INCONCLUSIVE)
MULTIPLICITY_NAMES = {"holm": "Holm's step-down adjustment (family-wise error)",
                      "bh": "the Benjamini-Hochberg adjustment (false discovery rate)", "none": "no adjustment"}


def _read_preset(path: str, where: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except FileNotFoundError:
        raise ValueError(f"{where}: preset file {path} not found (paths are relative to the working directory)") \
            from None
    except yaml.YAMLError as err:
        raise ValueError(f"{where}: preset file {path} is not valid YAML: {err}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: preset file {path} must hold a mapping of config keys")
    if "study" in data:
        raise ValueError(f"{where}: preset file {path} holds a study section; a dataset's preset configures one dataset")
    return dict(data)


def dataset_config(key: str, entry: Any, default: Mapping[str, Any], common: Mapping[str, Any],
                   study_wide: Mapping[str, Any]) -> dict[str, Any]:
    """One dataset's config: ``default`` <- its preset <- ``common`` (the study file's own keys) <- its overrides.

    ``entry`` is ``None`` (the default config's dataset), a preset path, or a mapping of overrides with an optional
    ``preset`` path. ``study_wide`` holds the values of :data:`STUDY_WIDE` every dataset must share; a preset or an
    override giving another value is refused. The result's ``dataset.name`` is ``key``.
    """
    where = f"study.datasets.{key}"
    if not KEY.match(key):
        raise ValueError(f"{where}: a dataset key is a letter then letters, digits or _ (it names rules and folders)")
    if entry is None:
        preset, overrides = {}, {}
    elif isinstance(entry, str):
        preset, overrides = _read_preset(entry, where), {}
    elif isinstance(entry, Mapping):
        overrides = dict(entry)
        path = overrides.pop("preset", None)
        preset = _read_preset(path, where) if path is not None else {}
    else:
        raise ValueError(f"{where}: expected a preset path or a mapping of overrides, got {type(entry).__name__}")
    if "study" in overrides:
        raise ValueError(f"{where}: a dataset's overrides cannot hold a study section")
    for source, layer in (("its preset", preset), ("its overrides", overrides)):
        for name in STUDY_WIDE:
            if name in layer and layer[name] != study_wide.get(name):
                raise ValueError(f"{where}: {source} sets {name}: {layer[name]!r}, but {name} is the study's "
                                 f"({study_wide.get(name)!r}); every dataset of a study shares it")
    config = merge(merge(merge(dict(default), preset), common), overrides)
    config["dataset"] = {**config["dataset"], "name": key}
    config.update({name: value for name, value in study_wide.items() if value is not None})
    return config


def study_configs(default: Mapping[str, Any], overlay: Mapping[str, Any],
                  study_wide: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{dataset key: its config} of the study in ``overlay`` (what --configfile/--config gave), in listed order.

    ``default`` is config.yaml's content; the study file's keys other than ``study`` are applied to every dataset.
    A study file with a top-level ``dataset`` section is refused: a study's datasets are named in study.datasets.
    """
    study = overlay.get("study") or {}
    datasets = study.get("datasets") or {}
    if not datasets:
        raise ValueError("study.datasets: a study needs at least one dataset")
    if "dataset" in overlay:
        raise ValueError("dataset: a study names its datasets in study.datasets (a preset path or overrides each); "
                         "drop the top-level dataset section")
    common = {k: v for k, v in overlay.items() if k != "study"}
    return {key: dataset_config(key, entry, default, common, study_wide) for key, entry in datasets.items()}


def listed_claims(claims: Mapping[str, Mapping[str, str] | None]) -> list[dict[str, str]]:
    """The claims of config ``study.claims`` (id -> claim, null = dropped) as a list in listed order, each with its
    ``id``."""
    return [{**claim, "id": key} for key, claim in claims.items() if claim is not None]


# ---------------------------------------------------------------------------------------------- controlled claims
#: the flattened key an ``<experiment>+bm25`` arm adds to its experiment's spec (score additivity with BM25)
ADDITIVITY_KEY = "additivity"
#: the keys an active-learning arm (``active:<method>@<round>``) stands for: both arms share the loop's ranker
ACTIVE_KEYS = ("active.method", "active.round")


def flatten(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested spec as {dotted key: value}: ``{"negatives": {"mode": "random"}}`` -> ``{"negatives.mode":
    "random"}``. A mapping keeps its own key too (an empty one, or null in the other arm, still shows), with the
    value ``{}``; its entries follow as ``key.entry``."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out[name] = {}
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def spec_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The dotted keys (:func:`flatten`) whose values differ between two specs, sorted; a key present in one spec
    only differs."""
    flat_a, flat_b = flatten(a), flatten(b)
    return sorted(k for k in {*flat_a, *flat_b} if k not in flat_a or k not in flat_b or flat_a[k] != flat_b[k])


def covered(key: str, factors: Sequence[str]) -> bool:
    """Whether a dotted key is one of the declared ``factors`` or lies under one (``weighting`` covers
    ``weighting.m``)."""
    return any(key == f or key.startswith(f"{f}.") for f in factors)


def arm_spec(name: str, runs_of: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The spec one arm of a claim trains with, flattened (:func:`flatten`, which leaves a flat spec as it is).

    ``runs_of`` is :func:`curricula.experiments.experiment_runs` of the dataset's config. An experiment's spec
    without its runtime knobs (:func:`curricula.experiments.job_params`); a tuned experiment's knob holds the list
    of the values tuned on dev (the knobs its runs share keep their value); ``<experiment>+bm25`` adds
    ``additivity: bm25``; ``active:<method>@<round>`` stands for that method and round of the dataset's one
    active-learning loop (:data:`ACTIVE_KEYS`)."""
    from curricula.experiments import job_params
    from curricula.report import BM25_SUFFIX

    active = parse_active_name(name)
    if active is not None:
        return dict(zip(ACTIVE_KEYS, active))
    base = name.removesuffix(BM25_SUFFIX)
    if base not in runs_of:
        raise ValueError(f"{name!r} is not an experiment of the grid (it has {sorted(runs_of)})")
    runs = [flatten(job_params(spec)) for spec in runs_of[base].values()]
    flat: dict[str, Any] = {}
    for key in dict.fromkeys(k for run in runs for k in run):
        values = [run.get(key) for run in runs]
        flat[key] = values[0] if all(v == values[0] for v in values) else values
    if base != name:
        flat[ADDITIVITY_KEY] = "bm25"
    return flat


def _value(flat: Mapping[str, Any], key: str) -> str:
    return repr(flat[key]) if key in flat else "absent"


def is_active_claim(claim: Mapping[str, Any]) -> bool:
    """Whether both arms of a claim are active-learning results: the loop's acquisition method is then the factor."""
    return all(parse_active_name(claim[arm]) is not None for arm in ("experiment", "against"))


def claim_differences(claims: Sequence[Mapping[str, Any]], runs: Mapping[str, Mapping[str, Mapping[str, Any]]]
                      ) -> dict[str, dict[str, list[str]]]:
    """{claim id: {dataset: the dotted keys in which its two arms' specs differ}} over every dataset of ``runs``
    ({dataset: :func:`curricula.experiments.experiment_runs` of its config}).

    A claim declares the factors it tests (``factors``: dotted key prefixes, e.g. ``[weighting]`` or ``[scoring,
    pacing]``); an arm pair that differs on a dataset in a key no factor covers is refused (ValueError naming the
    claim, the dataset, the undeclared keys and both arms' values), so a verdict is never about two changes at once.
    An active-learning claim (both arms ``active:<method>@<round>``) compares two methods of the same loop: its keys
    are ``active.method`` (and ``active.round``), its factors are not needed."""
    out: dict[str, dict[str, list[str]]] = {}
    for claim in claims:
        where = f"study.claims.{claim['id']}"
        active = is_active_claim(claim)
        factors = list(claim.get("factors") or [])
        if not active and not factors:
            raise ValueError(f"{where}: a claim declares the factors its arms differ in (factors: [<dotted key "
                             f"prefix>, ...], e.g. [weighting] or [scoring, pacing])")
        out[claim["id"]] = {}
        for dataset, runs_of in runs.items():
            try:
                a, b = (arm_spec(claim[arm], runs_of) for arm in ("experiment", "against"))
            except ValueError as err:
                raise ValueError(f"{where} on {dataset}: {err}") from None
            keys = spec_differences(a, b)
            undeclared = [k for k in keys if not covered(k, factors)]
            if undeclared and not active:
                values = "; ".join(f"{k}: {_value(a, k)} in {claim['experiment']}, {_value(b, k)} in "
                                   f"{claim['against']}" for k in undeclared)
                raise ValueError(
                    f"{where} ({claim['experiment']} against {claim['against']}) on {dataset}: the arms differ in "
                    f"{undeclared}, which its factors {factors} do not cover ({values}); make the arms differ only "
                    f"in the factor the claim tests, or declare it")
            out[claim["id"]][dataset] = keys
    return out


# --------------------------------------------------------------------------------------------------- findings
def confidence_interval(differences: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The two-sided ``level`` confidence interval of the mean of paired differences (Student's t, n - 1 degrees of
    freedom): mean -/+ t_{(1+level)/2, n-1} * sd / sqrt(n). (nan, nan) for fewer than 2 differences."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return math.nan, math.nan
    half = float(student_t.ppf((1 + level) / 2, d.size - 1)) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return float(d.mean()) - half, float(d.mean()) + half


def verdict(effect: float, p: float, expect: str, p_equivalence: float = math.nan, alpha: float = 0.05) -> str:
    """The verdict word of one claim on one dataset.

    ``effect`` is mean(experiment - against) (higher = better for the measures used here), ``p`` the two-sided p
    of the verdict's test of no difference (seed-aware by default, :func:`claim_row`), ``p_equivalence`` that of its
    two one-sided tests against the equivalence margin, ``expect`` the claim's direction (``better``: effect > 0;
    ``worse``: effect < 0). In this order: p < alpha -> ``reproduced`` when the effect has the claimed sign, ``not
    reproduced`` when it has the opposite sign; else p_equivalence < alpha -> ``equivalent`` (no effect as large as
    the margin); else ``inconclusive`` (too little data to tell either way).
    """
    if expect not in ("better", "worse"):
        raise ValueError(f"expect must be 'better' or 'worse', got {expect!r}")
    if math.isfinite(p) and p < alpha and effect != 0:
        return REPRODUCED if (effect > 0) == (expect == "better") else NOT_REPRODUCED
    if math.isfinite(p_equivalence) and p_equivalence < alpha:
        return EQUIVALENT
    return INCONCLUSIVE


def claim_row(metrics: pl.DataFrame, experiment: str, against: str, measure: str, expect: str,
              alpha: float = 0.05, power: float = 0.8, *, inference: str = "seed_aware",
              margin: float = 0.02) -> dict[str, Any]:
    """One claim on one dataset from a long metrics frame (experiment, seed, qid, measure, value).

    With ``inference="seed_aware"`` (the default) the per-seed per-query differences (seeds paired by id, queries by
    qid; a balanced design) go to :func:`curricula.report.seed_aware_test`; with ``per_query`` the seed-averaged
    per-query differences go to the paired t-test (the same function with one row). The row holds the means, the
    effect, its relative size, the ``1 - alpha`` CI, ``p`` (that test's), ``p_per_query`` (the paired t-test on
    seed-averaged values, always), ``se`` and ``df``, the variance components' SDs (``sd_seed``, ``sd_query``,
    ``sd_resid``; null when the design is unbalanced under ``per_query``), the MDE, the equivalence margin (``margin``
    relative to the ``against`` mean, as an absolute ``margin``), ``p_equivalence`` (two one-sided tests,
    :func:`curricula.report.equivalence_pvalue`) and the :func:`verdict`."""
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
            "mde": seed_aware_mde(result, alpha, power), "margin": margin_abs, "p_equivalence": p_equivalence,
            "verdict": verdict(effect, result.p, expect, p_equivalence, alpha)}


FINDINGS_SCHEMA = {"paper": pl.String, "claim": pl.String, "dataset": pl.String, "experiment": pl.String,
                   "against": pl.String, "expect": pl.String, "measure": pl.String, "queries": pl.Int64,
                   "seeds": pl.Int64, "experiment_mean": pl.Float64, "against_mean": pl.Float64,
                   "effect": pl.Float64, "effect_pct": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                   "p": pl.Float64, "p_per_query": pl.Float64, "se": pl.Float64, "df": pl.Float64,
                   "sd_seed": pl.Float64, "sd_query": pl.Float64, "sd_resid": pl.Float64, "mde": pl.Float64,
                   "margin": pl.Float64, "p_equivalence": pl.Float64, "verdict": pl.String,
                   "p_verdict": pl.Float64, "p_adjusted": pl.Float64, "survives": pl.Boolean,
                   "differing_keys": pl.String}


def findings_table(metrics: Mapping[str, pl.DataFrame], claims: Sequence[Mapping[str, str]], measure: str,
                   alpha: float = 0.05, power: float = 0.8, *, inference: str = "seed_aware", margin: float = 0.02,
                   multiplicity: str = "holm", differing_keys: Mapping[str, Mapping[str, Sequence[str]]] | None = None
                   ) -> pl.DataFrame:
    """A row per (claim, dataset) in claim then dataset order: :func:`claim_row` on that dataset's metrics, then the
    multiplicity adjustment over the family of every row (:func:`curricula.report.adjust` by ``multiplicity``:
    ``holm``, ``bh`` or ``none``) of ``p_verdict``, the p value behind each verdict (``p_equivalence`` for
    ``equivalent``, ``p`` otherwise), as ``p_adjusted``; ``survives`` is true for a decided verdict (not
    inconclusive) whose adjusted p is below ``alpha``.

    ``metrics`` maps a dataset to its long metrics frame (experiment, seed, qid, measure, value);
    ``differing_keys`` ({claim id: {dataset: keys}}, :func:`claim_differences`) fills the column of the keys in
    which the two arms' specs differ, comma-separated (null where not given).
    """
    rows = []
    for claim in claims:
        for dataset, frame in metrics.items():
            if measure not in set(frame["measure"]):
                raise ValueError(f"study.measure {measure!r} was not evaluated on {dataset} "
                                 f"(evaluated: {sorted(set(frame['measure']))})")
            try:
                row = claim_row(frame, claim["experiment"], claim["against"], measure, claim["expect"], alpha, power,
                                inference=inference, margin=margin)
            except ValueError as err:
                raise ValueError(f"study claim {claim['claim']!r} on {dataset}: {err}") from None
            keys = (differing_keys or {}).get(claim.get("id"), {}).get(dataset)
            rows.append({"paper": claim["paper"], "claim": claim["claim"], "dataset": dataset,
                         "expect": claim["expect"], "measure": measure, **row,
                         "p_verdict": row["p_equivalence"] if row["verdict"] == EQUIVALENT else row["p"],
                         "differing_keys": None if keys is None else ", ".join(keys)})
    adjusted = adjust([r["p_verdict"] for r in rows], multiplicity)
    for r, q in zip(rows, adjusted):
        r["p_adjusted"] = q
        r["survives"] = r["verdict"] != INCONCLUSIVE and math.isfinite(q) and q < alpha
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA).select(list(FINDINGS_SCHEMA))


def dataset_plans(table: pl.DataFrame, alpha: float = 0.05, power: float = 0.8,
                  max_queries: int | None = None) -> pl.DataFrame:
    """The planner per dataset of a :func:`findings_table`: the variance components of the differences pooled over
    that dataset's claims (:func:`curricula.report.pool_components`, the mean of each over the claims), the 2%
    effect (of the mean of the claims' ``against`` means), the test queries 2 to 10 seeds need to detect it
    (:func:`curricula.report.plan`; columns ``seeds_<S>``, null when out of reach) and the cheapest design (fewest
    seeds, :func:`curricula.report.cheapest`). A dataset without components (unbalanced, per_query) is left out."""
    rows = []
    for dataset in dict.fromkeys(table["dataset"]):
        part = table.filter(pl.col("dataset") == dataset)
        components = pooled_components(part)
        if components is None:
            continue
        effect = RELATIVE_EFFECT * float(part["against_mean"].mean())
        needed = plan(components, effect, alpha=alpha, power=power, max_queries=max_queries) if effect > 0 else {}
        best = cheapest(needed)
        rows.append({"dataset": dataset, "claims": part.height, "seeds": int(part["seeds"].max()),
                     "queries": int(part["queries"].max()),
                     **{f"sd_{k}": math.sqrt(v) for k, v in zip(("seed", "query", "resid"), components)},
                     "effect": effect, **{f"seeds_{s}": needed.get(s) for s in SEEDS_PLANNED},
                     "cheapest_seeds": best[0] if best else None, "cheapest_queries": best[1] if best else None})
    schema = {"dataset": pl.String, "claims": pl.Int64, "seeds": pl.Int64, "queries": pl.Int64,
              **{c: pl.Float64 for c in ("sd_seed", "sd_query", "sd_resid", "effect")},
              **{f"seeds_{s}": pl.Int64 for s in SEEDS_PLANNED}, "cheapest_seeds": pl.Int64,
              "cheapest_queries": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def _signed(value: float, digits: int = 4) -> str:
    return "–" if not math.isfinite(value) else f"{value:+.{digits}f}".replace("-", "−")


def _p(value: float) -> str:
    return "–" if not math.isfinite(value) else ("< 0.001" if value < 0.001 else f"{value:.3f}")


def verdict_cell(row: Mapping[str, Any]) -> str:
    """``reproduced (+2.5%)``: the verdict word and the relative effect."""
    pct = row["effect_pct"]
    return f"{row['verdict']} ({_signed(pct, 1)}%)" if pct is not None and math.isfinite(pct) else row["verdict"]


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
             f"(crossed random effects, method of moments), pooled over the dataset's claims as the mean of each "
             f"component over them; then the test queries the seed-aware test needs, for each number of seeds, to "
             f"detect an effect of {RELATIVE_EFFECT:.0%} of the mean of the compared results ({measure}) at alpha "
             f"{alpha:g} with power {power:g}, by the t approximation (Satterthwaite df of the expected mean "
             f"squares): Var(mean) = s2_seed / S + s2_query / Q + s2_resid / (S Q). –: out of reach (the seed "
             f"variance alone is too large for that many seeds). Cheapest: the fewest seeds (each a training run of "
             f"every arm){cap}.", "",
             "| dataset | run (seeds x queries) | sd_seed | sd_query | sd_resid | 2% effect | "
             + " | ".join(f"{s} seeds" for s in SEEDS_PLANNED) + " | cheapest |",
             "|---|---|---|---|---|---|" + "---|" * (len(SEEDS_PLANNED) + 1)]
    for r in plans.iter_rows(named=True):
        best = (f"{r['cheapest_seeds']} x {r['cheapest_queries']:,}" if r["cheapest_seeds"] is not None else "–")
        lines.append(f"| {r['dataset']} | {r['seeds']} x {r['queries']:,} | {r['sd_seed']:.4f} | {r['sd_query']:.4f} | "
                     f"{r['sd_resid']:.4f} | {r['effect']:.4f} | "
                     + " | ".join(_count(r[f"seeds_{s}"]) for s in SEEDS_PLANNED) + f" | {best} |")
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
                      plans: pl.DataFrame | None = None, max_queries: int | None = None) -> str:
    """The findings page: how to read it, a verdict matrix (claim x dataset), the family and its multiplicity
    adjustment, then one table per claim with each dataset's means, effect, CI, p (and the per-query p), MDE,
    equivalence p and verdict, and the planner (``plans``, :func:`dataset_plans`)."""
    if table.is_empty():
        return f"# {title or 'Findings'}\n\nThe study lists no claims (study.claims).\n"
    datasets = list(dict.fromkeys(table["dataset"]))
    claims = list(dict.fromkeys(zip(table["paper"], table["claim"])))
    measure = table["measure"][0]
    level = f"{100 * (1 - alpha):g}%"
    if inference == "seed_aware":
        test = ("the seed-aware test: the per-seed per-query differences (seeds paired across the two experiments "
                "by seed id, queries by qid) as a crossed random-effects model, d = mu + seed + query + residual, "
                "whose variance components are estimated by the method of moments; the mean's SE is "
                "sqrt((MS_seed + MS_query - MS_resid) / (S Q)) with Satterthwaite's df (a component estimated "
                "negative drops its term, so the SE is never below the per-query test's), so a verdict must survive a "
                "new draw of seeds as well as of queries (with one seed it is the per-query t-test). "
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
             f"opposite sign; else **{EQUIVALENT}** when two one-sided tests (same SE and df) put the effect "
             f"within ±{margin:.0%} of the compared result's mean (p_equiv < {alpha:g}: no effect as large as the "
             f"margin); else **{INCONCLUSIVE}** (too little data to tell). Each claim names the factors it tests; "
             f"the keys in which its two arms' resolved training specs differ are listed under it (a difference "
             f"outside its factors stops the study at start-up).", "",
             "## Verdicts", "", "| paper | claim | " + " | ".join(datasets) + " |",
             "|---|---|" + "---|" * len(datasets)]
    cell = {(r["paper"], r["claim"], r["dataset"]): r for r in table.iter_rows(named=True)}
    for paper, claim in claims:
        cells = [verdict_cell(cell[(paper, claim, d)]) if (paper, claim, d) in cell else "–" for d in datasets]
        lines.append(f"| {paper} | {claim} | " + " | ".join(cells) + " |")
    counts = table.group_by("verdict").len()
    tally = {v: n for v, n in counts.iter_rows()}
    survivors = table.filter(pl.col("survives"))
    kept = {v: n for v, n in survivors.group_by("verdict").len().iter_rows()}
    decided = [v for v in VERDICTS if v != INCONCLUSIVE]
    lines += ["", f"Over {table.height} (claim, dataset) tests: " + ", ".join(
        f"{tally.get(v, 0)} {v}" for v in VERDICTS) + ".", "",
        f"Multiplicity: the family is every claim x dataset, {len(claims)} claims x {len(datasets)} datasets = "
        f"{table.height} tests; each contributes the p value behind its verdict (p_equiv for {EQUIVALENT}, p "
        f"otherwise), adjusted by {MULTIPLICITY_NAMES[multiplicity]} (study.multiplicity: {multiplicity}). A decided "
        f"verdict survives when its adjusted p < {alpha:g}: " + ", ".join(
            f"{kept.get(v, 0)} of {tally.get(v, 0)} {v}" for v in decided) + " (column \"survives\").", ""]
    for paper, claim in claims:
        rows = table.filter((pl.col("paper") == paper) & (pl.col("claim") == claim))
        first = rows.row(0, named=True)
        lines += [f"## {paper}: {claim}", "",
                  f"`{first['experiment']}` against `{first['against']}`, expected {first['expect']}."
                  + differing_keys_sentence(rows), "",
                  f"| dataset | test queries | seeds | {first['experiment']} | {first['against']} | effect | "
                  f"{level} CI | p | p per query | MDE | p_equiv (±margin) | verdict | adjusted p | survives |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows.iter_rows(named=True):
            pct = f" ({_signed(r['effect_pct'], 1)}%)" if math.isfinite(r["effect_pct"]) else ""
            mde_pct = 100 * r["mde"] / r["against_mean"] if r["against_mean"] > 0 else math.nan
            mde_txt = f"{r['mde']:.4f}" + (f" ({mde_pct:.1f}%)" if math.isfinite(mde_pct) else "")
            equiv = f"{_p(r['p_equivalence'])} (±{r['margin']:.4f})" if math.isfinite(r["margin"]) else "–"
            survives = "–" if r["verdict"] == INCONCLUSIVE else ("yes" if r["survives"] else "no")
            lines.append(f"| {r['dataset']} | {r['queries']:,} | {r['seeds']} | {r['experiment_mean']:.4f} | "
                         f"{r['against_mean']:.4f} | {_signed(r['effect'])}{pct} | "
                         f"[{_signed(r['ci_low'])}, {_signed(r['ci_high'])}] | {_p(r['p'])} | "
                         f"{_p(r['p_per_query'])} | {mde_txt} | {equiv} | {r['verdict']} | {_p(r['p_adjusted'])} | "
                         f"{survives} |")
        lines.append("")
    if plans is not None:
        lines += plan_markdown(plans, measure, alpha, power, max_queries)
    return "\n".join(lines)


def plot_findings(table: pl.DataFrame, path: str | Path, columns: int = 2) -> Path:
    """A forest plot, one panel per claim (``columns`` panels a row): per dataset, the effect as % of the compared
    result's mean with its confidence interval, the +/-MDE band shaded, coloured by verdict."""
    from curricula.figures import _save, _use_agg

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


ACTIVE_PREFIX = "active:"


def parse_active_name(name: str) -> tuple[str, int] | None:
    """``active:<method>@<round>`` (an active-learning method's model after that round, 0-based) as (method, round);
    None for an experiment name. Claims name active-learning results this way (Wang et al. 2020)."""
    if not name.startswith(ACTIVE_PREFIX):
        return None
    method, at, rnd = name[len(ACTIVE_PREFIX):].partition("@")
    if not at or not rnd.isdigit() or not method:
        raise ValueError(f"{name!r}: an active-learning result is named active:<method>@<round>, e.g. active:dasl@3")
    return method, int(rnd)


def load_active_metrics(paths: Mapping[tuple[str, str], str | Path]) -> pl.DataFrame:
    """Per-query test values of active-learning runs (ACTIVE_TEST_METRICS files keyed (method, seed)) as a long
    metrics frame whose experiment is ``active:<method>@<round>``."""
    from curricula.active_loop import ACTIVE_TEST_METRICS
    from curricula.tables import read_table

    frames = [read_table(p, ACTIVE_TEST_METRICS).with_columns(
        experiment=pl.format(ACTIVE_PREFIX + method + "@{}", pl.col("round")), seed=pl.lit(str(seed)))
        for (method, seed), p in paths.items()]
    return pl.concat(frames).select("experiment", "seed", "qid", "measure", "value")


def findings_stage(metric_paths: Mapping[tuple[str, str, str], str | Path], claims: Sequence[Mapping[str, str]],
                   outputs: Mapping[str, str | Path], *, measure: str, alpha: float = 0.05, power: float = 0.8,
                   title: str = "", active_paths: Mapping[tuple[str, str, str], str | Path] | None = None,
                   inference: str = "seed_aware", margin: float = 0.02, multiplicity: str = "holm",
                   plan_max_queries: int | None = None,
                   differing_keys: Mapping[str, Mapping[str, Sequence[str]]] | None = None) -> pl.DataFrame:
    """Rule ``report_study``: the findings table from every dataset's per-query test metrics, keyed (dataset,
    experiment, seed), and from its active-learning runs' per-round test values, keyed (dataset, method, seed),
    written as ``findings`` (.md), ``table`` (.csv), ``parquet`` and ``figure`` (.png), each atomically.
    ``inference``, ``margin``, ``multiplicity`` and ``differing_keys`` go to :func:`findings_table`; the page ends
    with the planner (:func:`dataset_plans`, at most ``plan_max_queries`` test queries)."""
    from curricula.report import load_metrics
    from curricula.tables import write_file_atomically, write_text_atomically

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
    table = findings_table(metrics, claims, measure, alpha, power, inference=inference, margin=margin,
                           multiplicity=multiplicity, differing_keys=differing_keys)
    plans = dataset_plans(table, alpha, power, plan_max_queries)
    write_text_atomically(outputs["findings"], findings_markdown(
        table, alpha=alpha, power=power, title=title, inference=inference, margin=margin, multiplicity=multiplicity,
        plans=plans, max_queries=plan_max_queries))
    write_file_atomically(outputs["table"], table.write_csv)
    write_file_atomically(outputs["parquet"], table.write_parquet)
    plot_findings(table, outputs["figure"])
    return table

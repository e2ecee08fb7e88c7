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
from curricula.report import _paired, mde, paired_ttest

KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
STUDY_WIDE = ("results", "shards")
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not reproduced", "inconclusive"


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


# --------------------------------------------------------------------------------------------------- findings
def confidence_interval(differences: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The two-sided ``level`` confidence interval of the mean of paired differences (Student's t, n - 1 degrees of
    freedom): mean -/+ t_{(1+level)/2, n-1} * sd / sqrt(n). (nan, nan) for fewer than 2 differences."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size < 2:
        return math.nan, math.nan
    half = float(student_t.ppf((1 + level) / 2, d.size - 1)) * float(d.std(ddof=1)) / math.sqrt(d.size)
    return float(d.mean()) - half, float(d.mean()) + half


def verdict(effect: float, mde_abs: float, expect: str) -> str:
    """The verdict word of one claim on one dataset.

    ``effect`` is mean(experiment - against) on seed-averaged per-query values (higher = better for the measures
    used here), ``expect`` the claim's direction (``better``: effect > 0; ``worse``: effect < 0). An effect smaller
    in size than the minimum detectable effect is ``inconclusive`` (the comparison could not have told it from
    noise), and so is an effect of exactly 0; otherwise the claim is ``reproduced`` when the effect has the claimed
    sign and ``not reproduced`` when it has the opposite sign. Since |effect| >= MDE implies p < alpha for the
    paired t-test, a decided verdict is also a significant one.
    """
    if expect not in ("better", "worse"):
        raise ValueError(f"expect must be 'better' or 'worse', got {expect!r}")
    if not (math.isfinite(effect) and math.isfinite(mde_abs)) or abs(effect) < mde_abs or effect == 0:
        return INCONCLUSIVE
    return REPRODUCED if (effect > 0) == (expect == "better") else NOT_REPRODUCED


def claim_row(metrics: pl.DataFrame, experiment: str, against: str, measure: str, expect: str,
              alpha: float = 0.05, power: float = 0.8) -> dict[str, Any]:
    """One claim on one dataset from a long metrics frame (experiment, seed, qid, measure, value): the seed-averaged
    per-query values of ``experiment`` and ``against`` paired by qid, their means, the mean difference (effect), its
    relative size, 95% CI, paired t-test p, MDE and :func:`verdict`."""
    for name in (experiment, against):
        if metrics.filter((pl.col("experiment") == name) & (pl.col("measure") == measure)).is_empty():
            raise ValueError(f"no {measure} values for {name!r} (is it in the study's experiments?)")
    x, y = _paired(metrics, experiment, measure, None, against)
    d = x - y
    effect, mde_abs = float(d.mean()), mde(d, alpha, power)
    low, high = confidence_interval(d, 1 - alpha)
    seeds = metrics.filter(pl.col("experiment") == experiment)["seed"].n_unique()
    return {"experiment": experiment, "against": against, "queries": int(d.size), "seeds": int(seeds),
            "experiment_mean": float(x.mean()), "against_mean": float(y.mean()), "effect": effect,
            "effect_pct": 100 * effect / float(y.mean()) if y.mean() > 0 else math.nan,
            "ci_low": low, "ci_high": high, "p": paired_ttest(x, y), "mde": mde_abs,
            "verdict": verdict(effect, mde_abs, expect)}


FINDINGS_SCHEMA = {"paper": pl.String, "claim": pl.String, "dataset": pl.String, "experiment": pl.String,
                   "against": pl.String, "expect": pl.String, "measure": pl.String, "queries": pl.Int64,
                   "seeds": pl.Int64, "experiment_mean": pl.Float64, "against_mean": pl.Float64,
                   "effect": pl.Float64, "effect_pct": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                   "p": pl.Float64, "mde": pl.Float64, "verdict": pl.String}


def findings_table(metrics: Mapping[str, pl.DataFrame], claims: Sequence[Mapping[str, str]], measure: str,
                   alpha: float = 0.05, power: float = 0.8) -> pl.DataFrame:
    """A row per (claim, dataset) in claim then dataset order: :func:`claim_row` on that dataset's metrics.

    ``metrics`` maps a dataset to its long metrics frame (experiment, seed, qid, measure, value).
    """
    rows = []
    for claim in claims:
        for dataset, frame in metrics.items():
            if measure not in set(frame["measure"]):
                raise ValueError(f"study.measure {measure!r} was not evaluated on {dataset} "
                                 f"(evaluated: {sorted(set(frame['measure']))})")
            try:
                row = claim_row(frame, claim["experiment"], claim["against"], measure, claim["expect"], alpha, power)
            except ValueError as err:
                raise ValueError(f"study claim {claim['claim']!r} on {dataset}: {err}") from None
            rows.append({"paper": claim["paper"], "claim": claim["claim"], "dataset": dataset,
                         "expect": claim["expect"], "measure": measure, **row})
    return pl.DataFrame(rows, schema=FINDINGS_SCHEMA).select(list(FINDINGS_SCHEMA))


def _signed(value: float, digits: int = 4) -> str:
    return "–" if not math.isfinite(value) else f"{value:+.{digits}f}".replace("-", "−")


def _p(value: float) -> str:
    return "–" if not math.isfinite(value) else ("< 0.001" if value < 0.001 else f"{value:.3f}")


def verdict_cell(row: Mapping[str, Any]) -> str:
    """``reproduced (+2.5%)``: the verdict word and the relative effect."""
    pct = row["effect_pct"]
    return f"{row['verdict']} ({_signed(pct, 1)}%)" if pct is not None and math.isfinite(pct) else row["verdict"]


def findings_markdown(table: pl.DataFrame, *, alpha: float = 0.05, power: float = 0.8, title: str = "") -> str:
    """The findings page: how to read it, a verdict matrix (claim x dataset), then one table per claim with each
    dataset's means, effect, CI, p, MDE and verdict, and a count of verdicts per claim."""
    if table.is_empty():
        return f"# {title or 'Findings'}\n\nThe study lists no claims (study.claims).\n"
    datasets = list(dict.fromkeys(table["dataset"]))
    claims = list(dict.fromkeys(zip(table["paper"], table["claim"])))
    measure = table["measure"][0]
    level = f"{100 * (1 - alpha):g}%"
    lines = [f"# {title or 'Findings of the study'}", "",
             f"Datasets: {', '.join(datasets)}. Each claim compares two experiments of the same grid on each dataset: "
             f"effect = mean over test queries of (experiment - against) on seed-averaged per-query test {measure} "
             f"(positive = the experiment is better), with its {level} confidence interval and the p value of the "
             f"paired two-sided t-test. MDE: the minimum detectable effect of that test (alpha {alpha:g}, power "
             f"{power:g}), (t_(1-alpha/2),n-1 + t_power,n-1) * sd / sqrt(n). Verdict: **{INCONCLUSIVE}** when "
             f"|effect| < MDE (the comparison could not tell an effect of that size from noise), otherwise "
             f"**{REPRODUCED}** when the effect has the claimed sign and **{NOT_REPRODUCED}** when it has the "
             f"opposite sign (a decided verdict is always significant at alpha {alpha:g}).", "",
             "## Verdicts", "", "| paper | claim | " + " | ".join(datasets) + " |",
             "|---|---|" + "---|" * len(datasets)]
    cell = {(r["paper"], r["claim"], r["dataset"]): r for r in table.iter_rows(named=True)}
    for paper, claim in claims:
        cells = [verdict_cell(cell[(paper, claim, d)]) if (paper, claim, d) in cell else "–" for d in datasets]
        lines.append(f"| {paper} | {claim} | " + " | ".join(cells) + " |")
    counts = table.group_by("verdict").len()
    tally = {v: n for v, n in counts.iter_rows()}
    lines += ["", f"Over {table.height} (claim, dataset) tests: " + ", ".join(
        f"{tally.get(v, 0)} {v}" for v in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)) + ".", ""]
    for paper, claim in claims:
        rows = table.filter((pl.col("paper") == paper) & (pl.col("claim") == claim))
        first = rows.row(0, named=True)
        lines += [f"## {paper}: {claim}", "",
                  f"`{first['experiment']}` against `{first['against']}`, expected {first['expect']}.", "",
                  f"| dataset | test queries | seeds | {first['experiment']} | {first['against']} | effect | "
                  f"{level} CI | p | MDE | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows.iter_rows(named=True):
            pct = f" ({_signed(r['effect_pct'], 1)}%)" if math.isfinite(r["effect_pct"]) else ""
            mde_pct = 100 * r["mde"] / r["against_mean"] if r["against_mean"] > 0 else math.nan
            mde_txt = f"{r['mde']:.4f}" + (f" ({mde_pct:.1f}%)" if math.isfinite(mde_pct) else "")
            lines.append(f"| {r['dataset']} | {r['queries']:,} | {r['seeds']} | {r['experiment_mean']:.4f} | "
                         f"{r['against_mean']:.4f} | {_signed(r['effect'])}{pct} | "
                         f"[{_signed(r['ci_low'])}, {_signed(r['ci_high'])}] | {_p(r['p'])} | {mde_txt} | "
                         f"{r['verdict']} |")
        lines.append("")
    return "\n".join(lines)


def plot_findings(table: pl.DataFrame, path: str | Path, columns: int = 2) -> Path:
    """A forest plot, one panel per claim (``columns`` panels a row): per dataset, the effect as % of the compared
    result's mean with its confidence interval, the +/-MDE band shaded, coloured by verdict."""
    from curricula.figures import _save, _use_agg

    _use_agg()
    import matplotlib.pyplot as plt

    claims = list(dict.fromkeys(zip(table["paper"], table["claim"])))
    datasets = list(dict.fromkeys(table["dataset"]))
    colours = {REPRODUCED: "tab:green", NOT_REPRODUCED: "tab:red", INCONCLUSIVE: "tab:gray"}
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
            ax.errorbar(r["effect"] * scale, y, xerr=[[(r["effect"] - r["ci_low"]) * scale],
                                                      [(r["ci_high"] - r["effect"]) * scale]],
                        fmt="o", color=colours[r["verdict"]], capsize=3, ms=4)
        ax.axvline(0, color="k", lw=0.8)
        ax.set_yticks(range(len(datasets)), list(reversed(datasets)), fontsize=7)
        ax.set_ylim(-0.6, len(datasets) - 0.4)
        ax.set_title(f"{paper}: {claim}", fontsize=7, loc="left", wrap=True)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    fig.supxlabel(f"effect, % of the compared mean ({table['measure'][0]}), with its CI; grey band: ±MDE; "
                  "green reproduced, red not reproduced, grey inconclusive", fontsize=7)
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
                   ) -> pl.DataFrame:
    """Rule ``report_study``: the findings table from every dataset's per-query test metrics, keyed (dataset,
    experiment, seed), and from its active-learning runs' per-round test values, keyed (dataset, method, seed),
    written as ``findings`` (.md), ``table`` (.csv), ``parquet`` and ``figure`` (.png), each atomically."""
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
    table = findings_table(metrics, claims, measure, alpha, power)
    write_text_atomically(outputs["findings"], findings_markdown(table, alpha=alpha, power=power, title=title))
    write_file_atomically(outputs["table"], table.write_csv)
    write_file_atomically(outputs["parquet"], table.write_parquet)
    plot_findings(table, outputs["figure"])
    return table

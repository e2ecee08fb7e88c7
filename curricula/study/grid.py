"""A study: one experiment grid run over several datasets in one invocation (config ``study``), and its findings.

``study.datasets`` maps a dataset key to where its config comes from: a preset file (``configs/wikiqa.yaml``), an
inline overlay, or both (``{preset: configs/wikiqa.yaml, train: {...}}``). Each dataset's config is built as

    config.yaml  <-  the dataset's preset  <-  the study file's own keys  <-  the dataset's inline overrides

so the study's grid (``experiments``, ``seeds``, ``train``...) is the same on every dataset, a preset supplies what
the study leaves open (its ``dataset`` section, ``train.negatives`` of a re-ranking set), and an override is the
explicit exception. The key names ``results/<key>/``. ``results`` and ``shards`` are the study's (Snakemake keeps
one scatter table per workflow). The Snakefile loads the pipeline once per dataset as a Snakemake module with that
config (rules/study.smk), so datasets share nothing that depends on the data.

The findings of a study (its claims tested on every dataset) are :mod:`curricula.study.findings`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import yaml

from curricula.plumbing.config import load_yaml, merge
from curricula.plumbing.keys import without_bm25
from curricula.plumbing.layout import Layout, study_selection

if TYPE_CHECKING:
    from curricula.experiments.spec import TrainSpec

KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
STUDY_WIDE = ("results", "shards")


def _read_preset(path: str, where: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = load_yaml(fh) or {}
    except FileNotFoundError:
        raise ValueError(f"{where}: preset file {path} not found (paths are relative to the working directory)") \
            from None
    except yaml.YAMLError as err:
        raise ValueError(f"{where}: preset file {path} is not valid YAML: {err}") from None
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: preset file {path} must hold a mapping of config keys")
    if "study" in data:
        raise ValueError(f"{where}: preset file {path} holds a study section; a dataset's preset configures one "
                         "dataset")
    return dict(data)


def dataset_config(key: str, entry: Any, default: Mapping[str, Any], common: Mapping[str, Any],
                   study_wide: Mapping[str, Any]) -> dict[str, Any]:
    """One dataset's config: ``default`` <- its preset <- ``common`` (the study file's own keys) <- its overrides.

    ``entry`` is ``None`` (the default config's dataset), a preset path, or a mapping of overrides with an optional
    ``preset`` path. Overrides of ``experiments`` patch the study's grid (:func:`patch_experiments`) instead of
    replacing it, as a config file's would. ``study_wide`` holds the values of :data:`STUDY_WIDE` every dataset
    must share; a preset or an override giving another value is refused. The result's ``dataset.name`` is ``key``.
    """
    where = f"study.datasets.{key}"
    if not KEY.match(key):
        raise ValueError(f"{where}: a dataset key is a letter then letters, digits or _ (it names rules and folders)")
    preset: dict[str, Any]
    overrides: dict[str, Any]
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
    patch = overrides.pop("experiments", None)
    config = merge(merge(merge(dict(default), preset), common), overrides)
    if patch is not None:
        config["experiments"] = patch_experiments(config.get("experiments") or {}, patch, where)
    config["dataset"] = {**config["dataset"], "name": key}
    config.update({name: value for name, value in study_wide.items() if value is not None})
    return config


def patch_experiments(grid: Mapping[str, Any], patch: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The study's experiment ``grid`` with a dataset's ``patch`` ({experiment: knobs}) merged into the named
    experiments' specs: a knob changed on that dataset alone (e.g. MacAvaney's m for a ranker that converges in fewer
    steps). Every dataset runs the same experiments, so a name not in the grid, or a patch that is not a mapping of
    knobs, is refused (ValueError naming ``where``)."""
    if not isinstance(patch, Mapping):
        raise ValueError(f"{where}.experiments: expected a mapping of experiment -> knobs to change, got "
                         f"{type(patch).__name__}")
    for name, knobs in patch.items():
        if name not in grid:
            raise ValueError(f"{where}.experiments: {name} is not an experiment of the study's grid "
                             f"({', '.join(grid) or 'none'}); a dataset's overrides change an experiment's knobs, "
                             f"they cannot add or drop one")
        if not isinstance(knobs, Mapping):
            raise ValueError(f"{where}.experiments.{name}: expected a mapping of knobs to change, got "
                             f"{type(knobs).__name__}")
    return {name: merge(spec, patch[name]) if name in patch else spec for name, spec in grid.items()}


def study_configs(default: Mapping[str, Any], overlay: Mapping[str, Any],
                  study_wide: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{dataset key: its config} of the study in ``overlay`` (what --configfile/--config gave), in listed order.

    ``default`` is config.yaml's content; the study file's keys other than ``study`` are applied to every dataset.
    A study file with a top-level ``dataset`` section is refused: a study's datasets are named in study.datasets.
    ``study.only`` (a list of those keys) keeps the listed datasets alone, e.g. to run a study's rounds on one dataset
    (``--config`` cannot delete a key of a mapping that a config file gave).
    """
    study = overlay.get("study") or {}
    datasets = study.get("datasets") or {}
    if not datasets:
        raise ValueError("study.datasets: a study needs at least one dataset")
    if "dataset" in overlay:
        raise ValueError("dataset: a study names its datasets in study.datasets (a preset path or overrides each); "
                         "drop the top-level dataset section")
    common = {k: v for k, v in overlay.items() if k != "study"}
    return {key: dataset_config(key, datasets[key], default, common, study_wide)
            for key in selected_datasets(list(datasets), study.get("only"))}


def selected_datasets(datasets: Sequence[str], only: Sequence[str] | None) -> list[str]:
    """The keys of ``study.datasets`` a run plans, in listed order: those ``study.only`` lists (all when null); a key
    it lists that is not a dataset raises ValueError naming it."""
    if only is None:
        return list(datasets)
    unknown = [key for key in only if key not in datasets]
    if unknown:
        raise ValueError(f"study.only: {', '.join(map(str, unknown))} not among study.datasets "
                         f"({', '.join(datasets)})")
    return [key for key in datasets if key in only]


def study_name(datasets: Sequence[str], only: Sequence[str] | None) -> str:
    """The folder name of a study's own outputs, relative to ``<results>/report``, ``logs`` and ``benchmarks``:
    ``study`` for the whole study (``only`` null, or listing every key of ``datasets``), ``study/only=<k1>+<k2>`` for
    a ``study.only`` selection (its keys sorted, so the order they are listed in does not matter).

    A selection judges a smaller family of cells than the whole study, so its round records, findings page and
    their logs are its own: two selections run on one results tree (WikiQA's rounds, then DailyDialog++'s) each keep
    theirs instead of the second overwriting the first's (:attr:`curricula.plumbing.layout.Layout.study_name`). Keys
    match ``KEY``, so ``+`` and ``=`` cannot occur in one."""
    return Layout(only=study_selection(datasets, only)).study_name


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


def arm_spec(name: str, runs_of: Mapping[str, Mapping[str, TrainSpec]]) -> dict[str, Any]:
    """The spec one arm of a claim trains with, flattened (:func:`flatten`, which leaves a flat spec as it is).

    ``runs_of`` is :func:`curricula.experiments.specs.experiment_runs` of the dataset's config. An experiment's
    params (:func:`curricula.experiments.spec.spec_params`); a tuned experiment's knob holds the list
    of the values tuned on dev (the knobs its runs share keep their value); ``<experiment>+bm25`` adds
    ``additivity: bm25``; ``active:<method>@<round>`` stands for that method and round of the dataset's one
    active-learning loop (:data:`ACTIVE_KEYS`)."""
    from curricula.experiments.spec import spec_params

    active = parse_active_name(name)
    if active is not None:
        return dict(zip(ACTIVE_KEYS, active))
    base = without_bm25(name)
    if base not in runs_of:
        raise ValueError(f"{name!r} is not an experiment of the grid (it has {sorted(runs_of)})")
    runs = [flatten(spec_params(spec)) for spec in runs_of[base].values()]
    flat: dict[str, Any] = {}
    for key in dict.fromkeys(k for run in runs for k in run):
        values = [run.get(key) for run in runs]
        flat[key] = values[0] if all(v == values[0] for v in values) else values
    if base != name:
        flat[ADDITIVITY_KEY] = "bm25"
    return flat


def _value(flat: Mapping[str, Any], key: str) -> str:
    return repr(flat[key]) if key in flat else "absent"


def claim_datasets(claim: Mapping[str, Any], datasets: Sequence[str]) -> list[str]:
    """The datasets of ``datasets`` (in their order) a claim is tested on: those its ``datasets`` lists, or all of
    them when it lists none."""
    listed = claim.get("datasets")
    return list(datasets) if listed is None else [d for d in datasets if d in listed]


def check_claim_datasets(claims: Sequence[Mapping[str, Any]], datasets: Sequence[str]) -> None:
    """Refuse a claim whose ``datasets`` names a key that is not among the study's ``datasets`` (all of them, before
    ``study.only`` keeps some), naming the claim and the keys (ValueError)."""
    for claim in claims:
        unknown = [d for d in claim.get("datasets") or [] if d not in datasets]
        if unknown:
            raise ValueError(f"study.claims.{claim['id']}.datasets: {', '.join(map(str, unknown))} not among "
                             f"study.datasets ({', '.join(datasets)})")


def is_active_claim(claim: Mapping[str, Any]) -> bool:
    """Whether both arms of a claim are active-learning results: the loop's acquisition method is then the factor."""
    return all(parse_active_name(claim[arm]) is not None for arm in ("experiment", "against"))


def claim_differences(claims: Sequence[Mapping[str, Any]], runs: Mapping[str, Mapping[str, Mapping[str, Any]]]
                      ) -> dict[str, dict[str, list[str]]]:
    """{claim id: {dataset: the dotted keys in which its two arms' specs differ}} over every dataset of ``runs``
    ({dataset: :func:`curricula.experiments.specs.experiment_runs` of its config}) the claim is tested on
    (:func:`claim_datasets`).

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
        for dataset in claim_datasets(claim, list(runs)):
            runs_of = runs[dataset]
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



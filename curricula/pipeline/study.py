"""A study's run plan: every dataset's config and :class:`~curricula.pipeline.plan.DatasetPlan`, the claims, the
looks of seeds in rounds, and the metrics each claim's cells read, resolved once at parse time.

:func:`study_plan` builds each dataset's config (:func:`curricula.study.grid.study_configs`), checks the study
settings (:mod:`curricula.pipeline.checks`), cuts each dataset's seeds to the first look when the study adds seeds in
rounds (:mod:`curricula.study.rounds`; the rounds ask for the later looks' seeds by wildcard), plans every dataset,
and checks every claim against every dataset's grid (what it evaluates, and that the two arms differ only in the
claim's declared factors, :func:`curricula.study.grid.claim_differences`). It reads the study's ledger
(curricula/study/ledger.py), refusing one made under another study config, so that the judging rules ask only for
the runs the ledger lacks (:mod:`curricula.pipeline.ledger`). With ``study.replication`` the datasets are the
selected ones' replicas and the claims the cells it lists (:mod:`curricula.study.replication`). Every refusal is a
ValueError naming the config key, before any job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curricula.pipeline.checks import check_active_arm, check_evaluated, check_previous, parsed_arms, sequential_looks
from curricula.pipeline.plan import DatasetPlan, dataset_plan
from curricula.pipeline.ledger import run_inputs
from curricula.pipeline.targets import runs_by_key
from curricula.plumbing.config import REPO, SCHEMA, merge, read_yaml, validate_config
from curricula.plumbing.config_errors import check_config
from curricula.plumbing.keys import ACTIVE, METRICS, ClaimKey, SeedKey
from curricula.plumbing.layout import Layout
from curricula.study.grid import (
    STUDY_WIDE,
    check_claim_datasets,
    claim_datasets,
    claim_differences,
    listed_claims,
    study_configs,
)
from curricula.study.grid import ACTIVE_PREFIX
from curricula.study.ledger import Ledger
from curricula.study.ledger import manifest as study_manifest
from curricula.study.ledger_runs import ClaimRun
from curricula.study.replication import replicate
from curricula.study.looks import look_seeds
from curricula.study.rounds import first_round_arms, read_round


@dataclass(frozen=True)
class StudyPlan:
    """``settings`` (config ``study``), the study's ``layout`` (its own folder: the whole study's or a selection's),
    ``claims`` in listed order, ``looks`` (None without rounds), ``seeds`` ({dataset: its seeds up to the last look},
    empty without rounds), ``datasets`` ({key: its plan}, each config holding the first look's seeds),
    ``claim_runs`` ((dataset, claim arm, seed) of every arm a claim names on every dataset it is tested on,
    :func:`claim_runs`), ``differences`` ({claim id: {dataset: the keys its arms' specs differ in}}) and ``records``
    (the study's ledger's entries' records when the plan was made, curricula/study/ledger.py)."""

    settings: Mapping[str, Any]
    layout: Layout
    claims: list[dict[str, Any]]
    looks: tuple[int, ...] | None
    seeds: dict[str, list[int]]
    datasets: dict[str, DatasetPlan]
    claim_runs: list[ClaimRun]
    differences: dict[str, dict[str, list[str]]]
    records: list[dict[str, Any]] = field(default_factory=list)

    def outputs(self) -> list[str]:
        """The final targets of a study: the findings page (and through it the round records and every claim run's
        ledger entry; only the runs the ledger lacks are trained)."""
        return list(self.layout.study_report().values())

    def plan_of(self, dataset: str) -> DatasetPlan:
        """A dataset's plan; an unknown key raises ValueError (a wildcard no dataset has)."""
        if dataset not in self.datasets:
            raise ValueError(f"study: no dataset {dataset!r} (study.datasets: {', '.join(self.datasets)})")
        return self.datasets[dataset]

    # ------------------------------------------------------------------------------------- the judging rules' settings
    def round_settings(self, round_: int) -> dict[str, Any]:
        """Checkpoint ``study_round``'s settings for one round (its params; the ledger recomputation's too)."""
        study = self.settings
        return {"claims": self.claims, "looks": list(self.looks or ()), "kind": study["sequential"]["kind"],
                "alpha": study["alpha"], "seeds": self.seeds, "round_": round_, "measure": study["measure"],
                "margin": study["equivalence_margin"], "multiplicity": study["multiplicity"]}

    def report_settings(self) -> dict[str, Any]:
        """Rule ``report_study``'s settings but its inputs (its params; the ledger recomputation's too): all
        claims (the active-learning claims' share of alpha is left to them)."""
        study = self.settings
        return {"measure": study["measure"], "alpha": study["alpha"], "power": study["power"],
                "inference": study["inference"], "margin": study["equivalence_margin"],
                "multiplicity": study["multiplicity"], "plan_max_queries": study["plan_max_queries"],
                "differing_keys": self.differences, **({"seeds": self.seeds} if self.looks is not None else {})}

    # ------------------------------------------------------------------------------------------------ the ledger
    @property
    def manifest(self) -> dict[str, Any]:
        """The settings the study's ledger is judged under (:func:`curricula.study.ledger.manifest`)."""
        return study_manifest(self.settings, self.looks, self.claims)

    def run_inputs(self, runs: Iterable[ClaimRun]) -> dict[str, str]:
        """The ``run|...`` inputs of a judging rule (:func:`curricula.pipeline.ledger.run_inputs`)."""
        return run_inputs(self.layout, self.records, runs)

    def arms_runs(self, arms: Mapping[tuple[str, str], int]) -> list[ClaimRun]:
        """(dataset, claim arm, seed) of each (dataset, arm) for its first ``count`` seeds, from {(dataset, arm):
        count}."""
        return [(dataset, arm, seed) for (dataset, arm), count in arms.items() for seed in self.seeds[dataset][:count]]

    # ------------------------------------------------------------------------------------------ seeds in rounds
    def round_inputs(self, round_: int, record: Callable[[int], str]) -> dict[str, str]:
        """Round 1: every arm of every sequential claim on every dataset; round k > 1: the arms round k - 1 listed
        as needing more seeds, and its record (``record(k - 1)``, the checkpoint's output). Each arm for the first
        looks[k] seeds, as ``run|...`` inputs (:meth:`run_inputs`)."""
        assert self.looks is not None  # only a study with rounds has the round rules (rules/study.smk)
        count = self.looks[round_ - 1]
        if round_ == 1:
            return self.run_inputs(self.arms_runs({arm: count for arm in first_round_arms(self.claims,
                                                                                          list(self.datasets))}))
        previous = record(round_ - 1)
        return {"previous": previous,
                **self.run_inputs(self.arms_runs({arm: count for arm in read_round(previous)["next"]}))}

    def final_round(self, record: Callable[[int], str]) -> str:
        """The record of the last round the study needs: the first whose undecided cells need no more seeds (all
        decided, or the last look)."""
        assert self.looks is not None  # only a study with rounds has a last round (report_inputs asks with looks)
        for round_ in range(1, len(self.looks) + 1):
            path = record(round_)
            if not read_round(path)["next"]:
                return path
        raise ValueError(f"study rounds: the last round ({len(self.looks)}) still lists arms to extend")

    def report_runs(self, final: str | None = None) -> list[ClaimRun]:
        """The claim runs the findings page rests on: without rounds every claim arm's seeds; with rounds the seeds
        each arm trained by the ``final`` round, plus the fixed-seed active-learning claims'."""
        fixed = [(d, a, s) for d, a, s in self.claim_runs if final is None or a.startswith(ACTIVE_PREFIX)]
        return fixed if final is None else self.arms_runs(read_round(final)["trained"]) + fixed

    def report_inputs(self, record: Callable[[int], str]) -> dict[str, str]:
        """The findings page's inputs: the ``run|...`` inputs of :meth:`report_runs`, the last round's record with
        rounds, and the last study's findings table when study.previous names one."""
        previous = {} if self.settings["previous"] is None else {"previous": self.settings["previous"]}
        if self.looks is None:
            return {**self.run_inputs(self.report_runs()), **previous}
        final = self.final_round(record)
        return {"rounds": final, **self.run_inputs(self.report_runs(final)), **previous}


def claim_runs(claims: Sequence[Mapping[str, Any]], datasets: Mapping[str, DatasetPlan]) -> list[ClaimRun]:
    """(dataset, claim arm, seed) of every arm a claim names on every dataset it is tested on, for every seed: an
    experiment's (or ``<experiment>+bm25``'s) seeds, ``active:<method>`` for an active-learning arm
    (active:<method>@<round>) and its loop's seeds (:func:`claim_metrics`, which checks them)."""
    out = []
    for text in claim_metrics(claims, datasets):
        key = ClaimKey.decode(text)
        out.append((key.dataset, key.arm if key.kind == METRICS else ACTIVE_PREFIX + key.arm, key.seed))
    return out


def claim_metrics(claims: Sequence[Mapping[str, Any]], datasets: Mapping[str, DatasetPlan]) -> dict[str, str]:
    """{"metrics|<dataset>|<experiment>|<seed>": path} of every experiment a claim names, and
    {"active|<dataset>|<method>|<seed>": path} of every active-learning method a claim names
    (active:<method>@<round>), on every dataset it is tested on (study.claims.<id>.datasets, default all); a claim
    naming what such a dataset does not run is refused."""
    parsed = parsed_arms(claims)
    out = {}
    for dataset, plan in datasets.items():
        # what the claims tested on this dataset name (study.claims.<id>.datasets)
        here = {name for claim in claims if claim_datasets(claim, [dataset])
                for name in (claim["experiment"], claim["against"])}
        active = {name: arm for name in here if (arm := parsed[name]) is not None}
        settings = plan.config["active"]
        for name, (method, round_) in active.items():
            check_active_arm(name, method, round_, dataset, settings)
            for seed in settings["seeds"]:
                out[ClaimKey(ACTIVE, dataset, method, seed).encode()] = plan.layout.active(method, seed)["test_metrics"]
        runs = {SeedKey.decode(text): path for text, path in runs_by_key(plan, METRICS, additive=True).items()}
        named = here - set(active)
        check_evaluated(named, {key.name for key in runs}, dataset)
        for key, path in runs.items():
            if key.name in named:
                out[ClaimKey(METRICS, dataset, key.name, int(key.seed)).encode()] = path
    return out


def first_look(configs: Mapping[str, dict[str, Any]], looks: tuple[int, ...] | None
               ) -> tuple[dict[str, dict[str, Any]], dict[str, list[int]]]:
    """The dataset configs with their seeds cut to the first look, and {dataset: its seeds up to the last look}
    (:func:`curricula.study.looks.look_seeds`); without rounds the configs as they are and {}."""
    if looks is None:
        return dict(configs), {}
    seeds = {name: look_seeds(config["seeds"], looks[-1]) for name, config in configs.items()}
    return {name: {**config, "seeds": seeds[name][:looks[0]]} for name, config in configs.items()}, seeds


def study_plan(default: Mapping[str, Any], overlay: Mapping[str, Any], config: Mapping[str, Any],
               schema: Mapping[str, Any]) -> StudyPlan:
    """The plan of the study in ``config`` (validated): ``default`` is config.yaml as written, ``overlay`` what
    --configfile/--config gave (each dataset's config is built from them, :func:`curricula.study.grid.study_configs`)
    and ``schema`` schemas/config.schema.yaml; each dataset's config is validated here (defaults filled), as its
    module validates it again."""
    settings = config["study"]
    configs = study_configs(default, overlay, {name: config[name] for name in STUDY_WIDE})
    layout = Layout.of(config)
    claims = listed_claims(settings["claims"])
    check_claim_datasets(claims, list(settings["datasets"]))
    if settings.get("replication"):  # the decided cells again, on each selected dataset's replica
        configs, claims = replicate(configs, claims, settings["replication"], list(settings["datasets"]))
    looks = sequential_looks(settings)
    configs, seeds = first_look(configs, looks)
    check_previous(settings["previous"], list(layout.study_report().values()))
    datasets = {name: dataset_plan(check_config(dataset_config, schema), schema)
                for name, dataset_config in configs.items()}
    runs = claim_runs(claims, datasets)
    differences = claim_differences(claims, {name: plan.runs_of for name, plan in datasets.items()})
    ledger = Ledger(layout.study_ledger)
    ledger.check_manifest(study_manifest(settings, looks, claims))
    return StudyPlan(settings=settings, layout=layout, claims=claims, looks=looks, seeds=seeds, datasets=datasets,
                     claim_runs=runs, differences=differences, records=ledger.records())


def study_plan_of(configfiles: Sequence[str | Path], overrides: Mapping[str, Any] | None = None) -> StudyPlan:
    """The plan of the study that ``snakemake --configfile <configfiles> --config <overrides>`` runs, outside
    Snakemake (the ledger's commands): config.yaml overlaid with the files, then the overrides."""
    default = read_yaml(REPO / "config.yaml")
    overlay: dict[str, Any] = {}
    for path in configfiles:
        overlay = merge(overlay, read_yaml(path))
    overlay = merge(overlay, overrides or {})
    config = validate_config(merge(default, overlay))
    if not config.get("study"):
        raise ValueError(f"{', '.join(map(str, configfiles)) or 'config.yaml'}: not a study (no study section)")
    return study_plan(default, overlay, config, read_yaml(SCHEMA))

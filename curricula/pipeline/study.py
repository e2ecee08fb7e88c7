"""A study's run plan: every dataset's config and :class:`~curricula.pipeline.plan.DatasetPlan`, the claims, the
looks of seeds in rounds, and the metrics each claim's cells read, resolved once at parse time.

:func:`study_plan` builds each dataset's config (:func:`curricula.study.grid.study_configs`), checks the study
settings (:mod:`curricula.pipeline.checks`), cuts each dataset's seeds to the first look when the study adds seeds in
rounds (:mod:`curricula.study.rounds`; the rounds ask for the later looks' seeds by wildcard), plans every dataset,
and checks every claim against every dataset's grid (what it evaluates, and that the two arms differ only in the
claim's declared factors, :func:`curricula.study.grid.claim_differences`). Every refusal is a ValueError naming the
config key, before any job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from curricula.evaluation.comparisons import BM25_SUFFIX, trained_experiment
from curricula.pipeline.checks import check_active_arm, check_evaluated, check_previous, parsed_arms, sequential_looks
from curricula.pipeline.plan import DatasetPlan, dataset_plan
from curricula.pipeline.targets import all_outputs, evaluate_outputs, runs_by_key
from curricula.plumbing.config_errors import check_config
from curricula.plumbing.layout import Layout
from curricula.study.grid import (
    STUDY_WIDE,
    check_claim_datasets,
    claim_datasets,
    claim_differences,
    listed_claims,
    study_configs,
)
from curricula.study.rounds import first_round_arms, look_seeds, read_round


@dataclass(frozen=True)
class StudyPlan:
    """``settings`` (config ``study``), the study's ``layout`` (its own folder: the whole study's or a selection's),
    ``claims`` in listed order, ``looks`` (None without rounds), ``seeds`` ({dataset: its seeds up to the last look},
    empty without rounds), ``datasets`` ({key: its plan}, each config holding the first look's seeds),
    ``claim_metrics`` ({"metrics|<dataset>|<experiment>|<seed>" or "active|<dataset>|<method>|<seed>": path} of
    every arm a claim names on every dataset it is tested on) and ``differences`` ({claim id: {dataset: the keys
    its arms' specs differ in}})."""

    settings: Mapping[str, Any]
    layout: Layout
    claims: list[dict[str, Any]]
    looks: tuple[int, ...] | None
    seeds: dict[str, list[int]]
    datasets: dict[str, DatasetPlan]
    claim_metrics: dict[str, str]
    differences: dict[str, dict[str, list[str]]]

    def benchmark_folders(self) -> dict[str, str]:
        """{dataset: its benchmark folder}, where the findings page reads each dataset's cost
        (curricula/study/costs.py)."""
        return {name: plan.layout.benchmarks for name, plan in self.datasets.items()}

    def outputs(self) -> list[str]:
        """The final targets of a study: every dataset's targets (its first look's) and the findings page."""
        return [path for plan in self.datasets.values() for path in all_outputs(plan)] + \
            list(self.layout.study_report().values())

    # ------------------------------------------------------------------------------------------ seeds in rounds
    def arm_metrics(self, dataset: str, arm: str, seed: int) -> str:
        """The per-query test metrics of one arm of a claim (an experiment, or ``<experiment>+bm25``) for one
        seed."""
        outputs = evaluate_outputs(self.datasets[dataset], trained_experiment(arm), seed)
        return outputs["additive_metrics" if arm.endswith(BM25_SUFFIX) else "metrics"]

    def arms_metrics(self, arms: Mapping[tuple[str, str], int]) -> dict[str, str]:
        """{"metrics|<dataset>|<arm>|<seed>": path} of each (dataset, arm) for its first ``count`` seeds, from
        {(dataset, arm): count}."""
        return {f"metrics|{dataset}|{arm}|{seed}": self.arm_metrics(dataset, arm, seed)
                for (dataset, arm), count in arms.items() for seed in self.seeds[dataset][:count]}

    def round_inputs(self, round_: int, record: Callable[[int], str]) -> dict[str, str]:
        """Round 1: every arm of every sequential claim on every dataset; round k > 1: the arms round k - 1 listed
        as needing more seeds, and its record (``record(k - 1)``, the checkpoint's output). Each arm for the first
        looks[k] seeds."""
        count = self.looks[round_ - 1]
        if round_ == 1:
            return self.arms_metrics({arm: count for arm in first_round_arms(self.claims, list(self.datasets))})
        previous = record(round_ - 1)
        return {"previous": previous, **self.arms_metrics({arm: count for arm in read_round(previous)["next"]})}

    def final_round(self, record: Callable[[int], str]) -> str:
        """The record of the last round the study needs: the first whose undecided cells need no more seeds (all
        decided, or the last look)."""
        for round_ in range(1, len(self.looks) + 1):
            path = record(round_)
            if not read_round(path)["next"]:
                return path
        raise ValueError(f"study rounds: the last round ({len(self.looks)}) still lists arms to extend")

    def report_inputs(self, record: Callable[[int], str]) -> dict[str, str]:
        """The findings page's inputs: without rounds the claims' metrics for every seed; with rounds the last
        round's record and every claim arm's metrics for the seeds it trained, plus the fixed-seed active-learning
        claims' metrics; and the last study's findings table when study.previous names one."""
        previous = {} if self.settings["previous"] is None else {"previous": self.settings["previous"]}
        if self.looks is None:
            return {**self.claim_metrics, **previous}
        final = self.final_round(record)
        active = {key: path for key, path in self.claim_metrics.items() if key.startswith("active|")}
        return {"rounds": final, **self.arms_metrics(read_round(final)["trained"]), **active, **previous}


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
        active = {name: parsed[name] for name in here if parsed[name] is not None}
        settings = plan.config["active"]
        for name, (method, round_) in active.items():
            check_active_arm(name, method, round_, dataset, settings)
            for seed in settings["seeds"]:
                out[f"active|{dataset}|{method}|{seed}"] = plan.layout.active(method, seed)["test_metrics"]
        runs = runs_by_key(plan, "metrics", additive=True)
        named = here - set(active)
        check_evaluated(named, {key.split("|")[1] for key in runs}, dataset)
        for key, path in runs.items():
            _, experiment, seed = key.split("|")
            if experiment in named:
                out[f"metrics|{dataset}|{experiment}|{seed}"] = path
    return out


def first_look(configs: Mapping[str, dict[str, Any]], looks: tuple[int, ...] | None
               ) -> tuple[dict[str, dict[str, Any]], dict[str, list[int]]]:
    """The dataset configs with their seeds cut to the first look, and {dataset: its seeds up to the last look}
    (:func:`curricula.study.rounds.look_seeds`); without rounds the configs as they are and {}."""
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
    looks = sequential_looks(settings)
    configs, seeds = first_look(configs, looks)
    check_previous(settings["previous"], list(layout.study_report().values()))
    datasets = {name: dataset_plan(check_config(dataset_config, schema), schema)
                for name, dataset_config in configs.items()}
    metrics = claim_metrics(claims, datasets)
    differences = claim_differences(claims, {name: plan.runs_of for name, plan in datasets.items()})
    return StudyPlan(settings=settings, layout=layout, claims=claims, looks=looks, seeds=seeds, datasets=datasets,
                     claim_metrics=metrics, differences=differences)

"""One dataset's run plan: the config resolved once, at parse time, into what the rule files read.

:func:`dataset_plan` checks the config (:mod:`curricula.pipeline.checks`) and resolves every experiment into its
training runs (:func:`curricula.experiments.specs.experiment_runs`), the tuned experiments' grids, the dense model's
settings and the active-learning ranker's spec. The :class:`DatasetPlan` it returns gives the params each rule passes
(only the knobs that change its output, so that other knobs never re-run it); :mod:`curricula.pipeline.targets` gives
the rules' inputs and the run's final targets from it and its :class:`~curricula.plumbing.layout.Layout`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from curricula.difficulty import FUNCTIONS, function_knobs
from curricula.evaluation.rerank import parse_rnk
from curricula.experiments.spec import TrainSpec, spec_params
from curricula.experiments.specs import active_spec, experiment_runs, finetune_dense_model, tuned_values
from curricula.pipeline.checks import check_difficulty_functions, check_references
from curricula.pipeline.devices import gpus
from curricula.plumbing.layout import Layout
from curricula.retrieval.precompute import dense_max_length

#: the teacher knobs only `teacher_score` reads: changing them keeps the trained model
TEACHER_SCORE_ONLY = ("folds", "score_batch_size")
#: the keys of config `active` that are not loop knobs (a job's curve depends on the others and the ranker spec)
ACTIVE_NOT_LOOP = ("enabled", "methods", "seeds", "train")


def one_of(names: Iterable[str]) -> str:
    """A wildcard constraint matching exactly these names (none: a pattern that matches nothing)."""
    names = sorted(names, key=len, reverse=True)
    return "|".join(re.escape(n) for n in names) if names else r"(?!x)x"


@dataclass(frozen=True)
class DatasetPlan:
    """A validated config (defaults filled) resolved once: ``runs_of`` ({experiment: {training run: spec}}),
    ``tuned`` ({experiment: {run: {knob: value}}} of the experiments that tune a knob on dev), whether G is fine-tuned
    (``finetune_g``, Su et al. 2021 §3.4) and the length it encodes at, and the active-learning ranker's spec (None
    when disabled)."""

    config: Mapping[str, Any]
    layout: Layout
    runs_of: Mapping[str, Mapping[str, TrainSpec]]
    tuned: Mapping[str, Mapping[str, Mapping[str, Any]]]
    finetune_g: bool
    dense_max_length: int
    active: TrainSpec | None

    @property
    def runs(self) -> dict[str, TrainSpec]:
        """Every training run's spec: an untuned experiment is one run of its own name, a tuned one a run per value."""
        return {run: spec for runs in self.runs_of.values() for run, spec in runs.items()}

    @property
    def experiments(self) -> dict[str, TrainSpec]:
        """The experiments the report shows; a tuned experiment's runtime knobs (threads, device, scoring) are its
        first run's."""
        return {name: next(iter(runs.values())) for name, runs in self.runs_of.items()}

    @property
    def additive(self) -> bool:
        """Whether score additivity with BM25 is evaluated (config ``evaluate.additivity.enabled``)."""
        return bool(self.config["evaluate"]["additivity"]["enabled"])

    @property
    def seeds(self) -> list[int]:
        return list(self.config["seeds"])

    def spec_of(self, name: str) -> TrainSpec:
        """The spec of a training run or of a (tuned) experiment."""
        runs = self.runs
        return runs[name] if name in runs else self.experiments[name]

    # ------------------------------------------------------------------------------------------- params
    def section(self, name: str, *keys: str) -> dict[str, Any]:
        """Only the given keys of a config section: a rule's params, so that other knobs never re-run it."""
        return {key: self.config[name][key] for key in keys}

    def bm25_tune_seed(self) -> int | None:
        """The seed of the R<n>@<k> candidate cut when the tuning measure is one (else it cannot change the grid)."""
        return self.config["pipeline_seed"] if parse_rnk(self.config["bm25"]["tune"]["measure"]) else None

    def teacher_params(self, stage: str) -> dict[str, Any]:
        """The teacher knobs that change this stage's output (threads go to `threads:`): cross-fitting folds and the
        scoring batch size only affect `teacher_score` (``stage`` ``score``), so changing them keeps the model;
        ``deterministic`` only when true (false: the params of a config written before it existed)."""
        skip = {"threads"} | (set(TEACHER_SCORE_ONLY) if stage == "train" else set())
        teacher = self.config["teacher"]
        skip |= set() if teacher.get("deterministic") else {"deterministic"}
        return {k: v for k, v in teacher.items() if k not in skip}

    def dense_encode_params(self) -> dict[str, Any]:
        """The encoding knobs, ``max_length`` resolved (:attr:`dense_max_length`)."""
        return {**self.section("dense", "model", "layers"), "max_length": self.dense_max_length,
                **self.section("dense", "query_truncation", "batch_size", "device", "precision")}

    def difficulty_knobs(self, function: str) -> dict[str, Any]:
        """The knobs one difficulty function's job depends on (:func:`curricula.difficulty.function_knobs`)."""
        return function_knobs(function, self.config["difficulty"], self.config["pipeline_seed"])

    def train_params(self, run: str) -> dict[str, Any]:
        """A training run's spec without its runtime knobs."""
        return spec_params(self.runs[run])

    def experiment_params(self) -> dict[str, dict[str, Any]]:
        """Every experiment's spec without runtime knobs (params of rules that read all of them)."""
        return {name: spec_params(spec) for name, spec in self.experiments.items()}

    def experiment_gpus(self, name: str) -> int:
        """The ``gpu`` resource of a per-experiment job (its spec's device)."""
        return gpus(self.spec_of(name).runtime.device)

    def evaluate_knobs(self, name: str) -> dict[str, Any]:
        """The scoring knobs of an experiment's model (what changes its test scores); ``deterministic`` only when
        true."""
        spec = self.spec_of(name)
        knobs = {"score_batch_size": spec.evaluation.score_batch_size, "precision": spec.runtime.precision,
                 "device": spec.runtime.device}
        return {**knobs, "deterministic": True} if spec.runtime.deterministic else knobs

    def additivity_params(self) -> dict[str, Any] | None:
        """The interpolation knobs of score additivity, or None when off."""
        settings = self.config["evaluate"]["additivity"]
        return {k: v for k, v in settings.items() if k != "enabled"} if self.additive else None

    def consumed_functions(self) -> list[str]:
        """The difficulty functions a training run reads, in the registry's order: every run's order (``scoring``;
        the baseline's ``random`` too, whose seeded order is its curriculum) and MacAvaney's weights
        (``weighting.scoring``). The report's figures read :meth:`report_functions` on the test pairs instead
        (rule ``difficulty_test``), and the active-learning loop none."""
        used = set()
        for spec in self.runs.values():
            used.add(spec.arm.scoring)
            if spec.arm.weighting is not None:
                used.add(spec.arm.weighting.scoring)
        return [name for name in FUNCTIONS if name in used]

    def difficulty_functions(self) -> list[str]:
        """The functions joined into the diagnostic table ``difficulty/difficulty.parquet`` (its log: their Spearman
        correlations): config ``difficulty.functions``, every registered one for ``all``, and when null the ones the
        grid consumes (:meth:`consumed_functions`), so that the table adds no job of its own. Empty (``[]``): no
        table."""
        chosen = self.config["difficulty"]["functions"]
        if chosen is None:
            return self.consumed_functions()
        return list(FUNCTIONS) if chosen == "all" else list(chosen)

    def report_functions(self) -> list[str]:
        """The difficulty functions the report's figures show: ``report.difficulty_functions``, or when null every
        experiment's scoring function but random."""
        chosen = self.config["report"]["difficulty_functions"]
        if chosen is None:
            chosen = sorted({spec.arm.scoring for spec in self.experiments.values()} - {"random"})
        return list(chosen)

    def active_params(self) -> dict[str, Any]:
        """The active-learning ranker's params (:func:`curricula.experiments.spec.spec_params`)."""
        assert self.active is not None, "active learning is off"
        return spec_params(self.active)

    def active_settings(self) -> dict[str, Any]:
        """The loop knobs of config `active` (what a job's curve depends on besides the ranker spec)."""
        return {k: v for k, v in self.config["active"].items() if k not in ACTIVE_NOT_LOOP}


def dataset_plan(config: Mapping[str, Any], schema: Mapping[str, Any]) -> DatasetPlan:
    """The plan of a validated config (``schema``: schemas/config.schema.yaml, read once); a bad experiment, an
    unregistered difficulty function, a reference ranker without its stage or a bad active-learning spec raises a
    ValueError naming the key, before any job."""
    runs_of = experiment_runs(config, schema)
    runs = {run: spec for specs in runs_of.values() for run, spec in specs.items()}
    finetune = finetune_dense_model(config, runs)
    check_difficulty_functions(config, runs_of)
    check_references(config)
    active = active_spec(config, schema) if config["active"]["enabled"] else None
    return DatasetPlan(config=config, layout=Layout.of(config), runs_of=runs_of, tuned=tuned_values(config),
                       finetune_g=finetune, dense_max_length=dense_max_length(config, finetune), active=active)

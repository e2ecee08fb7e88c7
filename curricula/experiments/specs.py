"""One experiment spec composes every curriculum axis; this module resolves the config into per-experiment specs.

Config: ``train`` holds the knobs shared by all experiments (model, steps, loss, negatives, evaluation...);
``experiments`` maps a name to overrides of those knobs plus the curriculum axes:

* ``scoring``: the difficulty function that orders the training instances (Penha's f_score, HCL's f_d);
* ``pacing``: how fast the allowed prefix grows (:mod:`curricula.curriculum.pacing`; ``standard`` = no ordering effect);
* ``weighting``: MacAvaney's loss weights ``{scoring, m, anti, iteration_steps}`` (null = none);
* ``negatives``: ``{mode, m, depth, pacing[, false_negative_guard]}`` (:mod:`curricula.curriculum.negatives`; HCL-IC is
  ``mode: neighbors``; the guard stays out of a resolved spec unless set, so older runs keep their params).

``baseline`` (random order, standard pacing, no weighting, the shared negatives) is always present; a config may
refine it (e.g. ``negatives.mode: candidates`` for a re-ranking dataset) but not give it a curriculum. ``pacing``
and ``weighting`` given by an experiment replace the shared ones whole; ``negatives`` and ``architecture`` are
merged key by key (the negatives' own ``pacing`` replaced whole). Every resolved spec is validated against the
schema's ``train`` section, so a wrong type in one experiment is reported with the experiment's name before any job
runs. A list in place of a scalar knob is tuned on dev: the experiment becomes one training run per value
(:mod:`curricula.experiments.tuning`, :func:`experiment_runs`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonschema

from curricula.curriculum.negatives import Negatives
from curricula.difficulty import FUNCTIONS, check_names
from curricula.experiments.spec import Arm, TrainSpec, parse_train_spec
from curricula.experiments.tuning import variants
from curricula.models import DEFAULT_LR, DEFAULT_SCHEDULE, resolve_architecture
from curricula.training.checks import check_keep, check_min_steps
from curricula.training.losses import LOSSES

AXES = ("scoring", "pacing", "weighting")
BASELINE = "baseline"
BASELINE_AXES: dict[str, Any] = {"scoring": "random", "pacing": {"name": "standard"}, "weighting": None}
#: the grid's model-selection knobs (issue 45), the same for every arm (an experiment may not set them): the
#: diagnostic test column of the dev curve and the weight average
SELECTION_KNOBS = ("diagnostic_test", "diagnostic_averages", "averaging", "ema_decay", "keep")


def merge_experiment(train: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The shared ``train`` knobs with one experiment's ``overrides`` applied (see the module docstring); a null
    ``negatives.false_negative_guard`` is off, as if never written."""
    spec = copy.deepcopy(dict(train))
    for key, value in overrides.items():
        if key in ("negatives", "architecture") and isinstance(value, Mapping):
            spec[key] = {**(spec.get(key) or {}), **copy.deepcopy(dict(value))}
        else:
            spec[key] = copy.deepcopy(value)
    negatives = spec.get("negatives")
    if isinstance(negatives, dict) and negatives.get("false_negative_guard", 0) is None:
        del negatives["false_negative_guard"]
    for key, value in BASELINE_AXES.items():
        spec.setdefault(key, copy.deepcopy(value))
    return spec


def resolve_ranker(spec: dict[str, Any]) -> dict[str, Any]:
    """Fill the ranker's architecture defaults, its learning rate when ``lr`` is null and its learning-rate schedule
    when ``schedule`` is null or absent (in place; returned; :data:`curricula.models.DEFAULT_LR` /
    :data:`~curricula.models.DEFAULT_SCHEDULE`).

    Resolved values are what the train job's params show, so changing a default re-runs what it changes.
    """
    ranker = spec.setdefault("ranker", "cross_encoder")
    spec["architecture"] = resolve_architecture(ranker, spec.get("architecture"))
    if spec.get("lr") is None:
        spec["lr"] = DEFAULT_LR[ranker]
    if spec.get("schedule") is None:
        spec["schedule"] = DEFAULT_SCHEDULE[ranker]
    return spec


def config_knobs(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys outside ``train`` that :func:`resolve_run` reads: ``difficulty.bm25_list`` (default ``candidates``,
    as in the schema) and ``bm25.k`` (None when the config has no ``bm25`` section, e.g. a test's)."""
    return {"bm25_list": (config.get("difficulty") or {}).get("bm25_list", "candidates"),
            "bm25_k": (config.get("bm25") or {}).get("k")}


def resolve_run(name: str, values: dict[str, Any], schema: Mapping[str, Any] | None = None, *,
                bm25_list: str = "candidates", bm25_k: int | None = None) -> TrainSpec:
    """The :class:`TrainSpec` of one merged run mapping of experiment ``name``: checked (:func:`check_spec`), the
    ranker's defaults filled (:func:`resolve_ranker`), parsed, its ``keep`` and pair-level weighting checked.
    ValueError naming the experiment and key."""
    check_spec(name, values, schema)
    try:
        resolve_ranker(values)
    except ValueError as err:
        raise ValueError(f"experiments.{name}: {err}") from None
    spec = parse_train_spec(values, f"experiments.{name}")
    try:
        check_keep(spec.fit.keep, spec.fit.patience)
    except ValueError as err:
        raise ValueError(f"experiments.{name}: train.{err}") from None
    check_arm(f"experiments.{name}", spec.arm, bm25_list, bm25_k)
    return spec


def check_overrides(name: str, overrides: Mapping[str, Any]) -> None:
    """ValueError when an experiment sets a knob every arm of a grid shares (``min_steps``, :data:`SELECTION_KNOBS`)."""
    if "min_steps" in overrides:
        raise ValueError(f"experiments.{name}.min_steps: every arm of a grid shares min_steps (the longest "
                         f"curriculum of the grid); set train.min_steps for a floor instead")
    for key in SELECTION_KNOBS:
        if key in overrides:
            raise ValueError(f"experiments.{name}.{key}: every arm of a grid is selected alike; set "
                             f"train.{key} instead")


def experiment_runs(config: Mapping[str, Any], schema: Mapping[str, Any] | None = None
                    ) -> dict[str, dict[str, TrainSpec]]:
    """{experiment: {run: typed spec}}, ``baseline`` first, every run validated (names, types, cross-axis rules).

    An untuned experiment is one run of its own name; an experiment that lists values for a knob is one run per
    point of its tuning grid (:func:`curricula.experiments.tuning.variants`), selected on dev later.

    Every run gets the same ``min_steps``: the longest :attr:`Arm.end` of all runs of all experiments (or
    ``train.min_steps`` when that is larger), so early stopping gives every arm the same minimum budget instead
    of each its own curriculum's length. With ``patience``, a ``min_steps`` above the budget is a ValueError."""
    train = config.get("train", {})
    experiments = dict(config.get("experiments") or {})
    base = experiments.pop(BASELINE, {}) or {}
    for axis in AXES:
        if axis in base and base[axis] != BASELINE_AXES[axis]:
            raise ValueError(f"experiments.baseline.{axis}: the baseline has no curriculum "
                             f"({axis} is always {BASELINE_AXES[axis]!r}); define another experiment instead")
    out: dict[str, dict[str, TrainSpec]] = {}
    for name, overrides in {BASELINE: {**base, **BASELINE_AXES}, **experiments}.items():
        check_overrides(name, overrides or {})
        try:
            grid = variants(name, overrides or {})
        except ValueError as err:
            raise ValueError(f"experiments.{name}.{err}") from None
        out[name] = {run: resolve_run(name, merge_experiment(train, scalar), schema, **config_knobs(config))
                     for run, (_, scalar) in grid.items()}
    return set_min_steps(out, train.get("min_steps"))


def set_min_steps(runs: Mapping[str, Mapping[str, TrainSpec]], floor: int | None = None
                  ) -> dict[str, dict[str, TrainSpec]]:
    """The runs with ``min_steps`` set: the longest :attr:`Arm.end` of the runs, or ``floor`` (config
    ``train.min_steps``) when larger, on specs with ``patience``, weight ``averaging`` or a diagnostic
    (:attr:`TrainSpec.needs_min_steps`; null without: nothing counts evaluations or starts an average then, and a
    longer curriculum added to the grid must not re-run the others). Early stopping counts evaluations, and the
    weight average takes weights in, only after it (:meth:`curricula.training.core.FitConfig.of`).

    A ``min_steps`` above a run's budget (``max_steps``, null = ``steps``) is a ValueError naming the run and both
    values (:func:`check_min_steps`, the rule the training core applies in the job, checked here before any job
    runs)."""
    least = max([spec.arm.end for of in runs.values() for spec in of.values()] + [int(floor or 0)])
    out: dict[str, dict[str, TrainSpec]] = {}
    for name, of in runs.items():
        out[name] = {}
        for run, spec in of.items():
            spec = spec.with_fit(min_steps=least if spec.needs_min_steps else None)
            try:
                check_min_steps(spec.fit.min_steps, spec.fit.max_steps or spec.fit.steps)
            except ValueError as err:
                raise ValueError(
                    f"experiments.{name} (run {run!r}): {err}; min_steps is the longest curriculum of the grid"
                    f"{' or train.min_steps' if floor and int(floor) == least else ''}") from None
            out[name][run] = spec
    return out


def experiment_specs(config: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> dict[str, TrainSpec]:
    """Typed spec of every training run (:func:`experiment_runs` flattened; an untuned experiment's run has
    the experiment's name)."""
    return {run: spec for runs in experiment_runs(config, schema).values() for run, spec in runs.items()}


def tuned_values(config: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{experiment: {run: {knob: value}}} of the experiments that tune a knob on dev (none: {})."""
    out = {}
    for name, overrides in (config.get("experiments") or {}).items():
        grid = variants(name, overrides or {})
        if list(grid) != [name]:
            out[name] = {run: values for run, (values, _) in grid.items()}
    return out


def check_pair_weighting(where: str, scoring: str, negatives: Negatives, bm25_list: str,
                         bm25_k: int | None) -> None:
    """A pair-level weighting (MacAvaney's eq. 6-11) needs the difficulty of every negative the run draws: the
    difficulty tables hold the dataset's candidates, and with ``difficulty.bm25_list: run`` also the BM25 run's
    pairs of the training queries (:func:`curricula.difficulty.scores_run_pairs`). So ``negatives.mode`` must be
    ``candidates``, or ``bm25`` with ``bm25_list: run`` and a run at least as deep as ``negatives.depth``
    (``bm25.k``, when known; a null depth is the whole run). ValueError naming the keys otherwise."""
    mode = negatives.mode
    if mode == "candidates":
        return
    if mode != "bm25" or bm25_list != "run":
        raise ValueError(
            f"{where}: weighting by the pair-level {scoring!r} needs the difficulty of every negative, which exists "
            f"for the dataset's candidates, and for the BM25 run's pairs when difficulty.bm25_list is run (now "
            f"negatives.mode: {mode}, difficulty.bm25_list: {bm25_list}): set negatives.mode: candidates, or "
            f"negatives.mode: bm25 with difficulty.bm25_list: run")
    depth = negatives.depth
    if bm25_k is not None and depth is not None and int(depth) > int(bm25_k):
        raise ValueError(
            f"{where}.negatives.depth: {depth} is deeper than the BM25 run (bm25.k: {bm25_k}), whose pairs are the "
            f"only ones {scoring!r} is scored on beyond the candidates: set negatives.depth <= bm25.k or raise bm25.k")


def check_spec(name: str, spec: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> None:
    """Raise ValueError naming the experiment when a merged run mapping breaks the schema's ``train`` section, or
    names an unknown difficulty function or loss."""
    where = f"experiments.{name}"
    if schema is not None:
        train_schema = schema["properties"]["train"]
        errors = sorted(jsonschema.Draft202012Validator(train_schema).iter_errors(
            {k: v for k, v in spec.items() if k not in AXES}), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            raise ValueError(f"{where}.{'.'.join(map(str, e.path)) or '<spec>'}: {e.message}")
    check_names([spec["scoring"]], f"{where}.scoring")
    if spec["loss"] not in LOSSES:
        raise ValueError(f"{where}.loss: unknown loss {spec['loss']!r}; known: {list(LOSSES)}")


def check_arm(where: str, arm: Arm, bm25_list: str = "candidates", bm25_k: int | None = None) -> None:
    """The cross-axis rules of a resolved curriculum: a pair-level weighting needs the difficulty of every negative
    the run draws (:func:`check_pair_weighting`)."""
    if arm.weighting and FUNCTIONS[arm.weighting.scoring].pair_level:
        check_pair_weighting(where, arm.weighting.scoring, arm.negatives, bm25_list, bm25_k)


def uses_dense_model(spec: TrainSpec) -> bool:
    """Whether a run's curriculum reads the dense model G of Su et al. 2021 §3.4: HCL-IC's neighbours
    (``negatives.mode: neighbors``) or a difficulty function on G's vectors (``hcl_corpus``, eq. 2), as its
    ordering or as MacAvaney's weights."""
    arm = spec.arm
    scorings = [arm.scoring, arm.weighting.scoring if arm.weighting else None]
    on_vectors = any(name in FUNCTIONS and "query_vectors" in FUNCTIONS[name].inputs for name in scorings)
    return on_vectors or arm.negatives.mode == "neighbors"


def finetune_dense_model(config: Mapping[str, Any], runs: Mapping[str, TrainSpec]) -> bool:
    """Whether the dense model G is fine-tuned before it is used (config ``dense.finetune.enabled``): as set, or,
    when null, whenever a run's curriculum uses G (:func:`uses_dense_model`): Su et al. 2021 §3.4 train G with
    in-batch negatives on the training data before HCL, so an HCL arm never ranks with the encoder as shipped."""
    enabled = ((config.get("dense") or {}).get("finetune") or {}).get("enabled")
    if enabled is not None:
        return bool(enabled)
    return any(uses_dense_model(spec) for spec in runs.values())


def needed_tables(spec: TrainSpec) -> set[str]:
    """Inputs of an experiment's train job beyond the ingest tables and its curriculum shards."""
    arm = spec.arm
    need = set()
    if arm.weighting:
        need.add("weights")
    if arm.negatives.mode == "neighbors":
        need.add("neighbors")
        if arm.negatives.guard is not None:  # G(c, r+) from the dense embeddings
            need |= {"query_vectors", "doc_vectors"}
    elif arm.negatives.mode == "bm25":
        need.add("run")
    return need


#: the active-learning ranker's knobs over the shared ``train`` section (config ``active.train`` overrides them)
ACTIVE_TRAIN: dict[str, Any] = {"ranker": "lstm_qa", "architecture": {}, "lr": None, "loss": "pointwise_ce",
                                "steps": 200, "batch_size": 16, "eval_every": 50, "eval_metric": "RR",
                                "negatives": {"mode": "candidates", "m": 1}, "dev_queries": None}


def active_spec(config: Mapping[str, Any], schema: Mapping[str, Any] | None = None) -> TrainSpec:
    """The resolved train spec of the active-learning ranker (:mod:`curricula.active.loop`):
    ``train`` < ACTIVE_TRAIN < ``active.train``; the grid's :data:`SELECTION_KNOBS` in ``train`` are not the
    active-learning ranker's (its fits have no curriculum phase to start an average after)."""
    overrides = merge_experiment(ACTIVE_TRAIN, (config.get("active") or {}).get("train") or {})
    train = {k: v for k, v in config.get("train", {}).items() if k not in SELECTION_KNOBS}
    values = merge_experiment(train, overrides)
    check_spec("active", values, schema)
    try:
        resolve_ranker(values)
    except ValueError as err:
        raise ValueError(f"active.train: {err}") from None
    return parse_train_spec(values, "active.train")

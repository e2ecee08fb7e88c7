"""A training run's typed spec, parsed once from the resolved config mapping, and the one rule that writes its params.

:func:`parse_train_spec` turns a resolved run mapping (:func:`curricula.experiments.specs.experiment_runs`: config
``train`` with one experiment's overrides, the ranker's defaults filled) into a :class:`TrainSpec` at the boundary:
when the plan is built and when a job starts (from the job's params). Below it code reads fields. Defaults live in
the schema and in the parts' fields (:mod:`curricula.training.spec`); a test holds them equal.

:func:`spec_params` is the one generic rule that makes a job's params, and through them every digest (the
checkpoint's fingerprint, the ledger's spec digest): each field of the first params format, a field added later
only while it differs from its default, runtime-only fields never, and :data:`SPEC_VERSION` once it counts a
deliberate change. The curriculum sections (pacing, negatives, weighting) are kept as written (their knobs' defaults
depend on the function they name) and resolved once into the :class:`Arm` the samplers read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, get_type_hints

from curricula.curriculum.negatives import Negatives, resolve_negatives
from curricula.curriculum.pacing import Pacing, resolve_pacing
from curricula.curriculum.weighting import Weighting, resolve_weighting
from curricula.models.registry import arithmetic_version
from curricula.training.spec import Evaluation, FitSpec, Objective, RankerSpec, Runtime, knob

#: counts deliberate changes of what a spec's fields mean; written into params (``spec_version``) once above 1, so a
#: change of meaning re-runs every job instead of pairing results of both meanings
SPEC_VERSION = 1


class Section(tuple[tuple[str, Any], ...]):
    """A config section frozen as written: (key, value) pairs in order, nested sections and lists frozen too."""

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default``."""
        return next((value for k, value in self if k == key), default)


def freeze(value: Any) -> Any:
    """A config value made immutable: a mapping becomes a :class:`Section`, a list a tuple (recursively)."""
    if isinstance(value, Mapping):
        return Section((str(k), freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain form of a :func:`freeze`-d value (dicts and lists, as the config wrote them)."""
    if isinstance(value, Section):
        return {k: thaw(v) for k, v in value}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class CurriculumSpec:
    """The curriculum axes as written: ``scoring`` (the difficulty function ordering the instances; ``random`` =
    none), ``pacing``, ``negatives`` and MacAvaney's ``weighting`` (None = uniform) sections."""

    scoring: str = knob("random")
    pacing: Section = knob(Section((("name", "standard"),)))
    negatives: Section = knob(Section())
    weighting: Section | None = knob(None)


@dataclass(frozen=True)
class Arm:
    """One run's curriculum resolved against its length: the ordering (``scoring``), its
    :class:`~curricula.curriculum.pacing.Pacing`, the :class:`~curricula.curriculum.negatives.Negatives` and
    MacAvaney's :class:`~curricula.curriculum.weighting.Weighting` (None = uniform loss weights). ``length`` (the
    spec's ``steps``, in optimiser updates) is what every fraction was resolved against. The samplers and the loss
    weights read these values, never the sections."""

    scoring: str
    pacing: Pacing
    negatives: Negatives
    weighting: Weighting | None
    length: int

    @property
    def end(self) -> int:
        """Steps until every curriculum axis has ended, so early stopping never stops a curriculum early: the
        pacing's ``length`` and, with MacAvaney's weights, their m iterations (eq. 3; W = 1 from iteration m on).
        An ``m = inf`` weighting never ends; it counts as ``length``."""
        end = self.length
        if self.weighting is not None and not math.isinf(self.weighting.end):
            end = max(end, int(self.weighting.end))
        return end


def resolve_arm(curriculum: CurriculumSpec, length: int, where: str = "experiment") -> Arm:
    """The :class:`Arm` of a curriculum against ``length`` steps: the one place its sections are parsed and their
    lengths decided. ValueError naming ``where`` and the key for an invalid pacing, negatives or weighting."""
    try:
        pacing = resolve_pacing(thaw(curriculum.pacing), length)
    except ValueError as err:
        raise ValueError(f"{where}.pacing: {err}") from None
    negatives = resolve_negatives(thaw(curriculum.negatives), length, f"{where}.negatives")
    weighting = None
    if curriculum.weighting:
        weighting = resolve_weighting(thaw(curriculum.weighting), f"{where}.weighting")
    return Arm(curriculum.scoring, pacing, negatives, weighting, length)


@dataclass(frozen=True)
class TrainSpec:
    """A training run parsed once: the ranker, the objective, dev selection, the fit, the runtime and the
    curriculum, with the curriculum's :class:`Arm` resolved. ``order`` is the order of the keys in the mapping it was
    parsed from, kept only so :func:`spec_params` writes params in the same order (Snakemake compares params by
    their ``repr``); it takes no part in equality."""

    ranker: RankerSpec
    objective: Objective
    evaluation: Evaluation
    fit: FitSpec
    runtime: Runtime
    curriculum: CurriculumSpec
    arm: Arm = field(compare=False, repr=False)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def needs_min_steps(self) -> bool:
        """Whether the run needs the grid's ``min_steps`` (:attr:`FitSpec.uses_min_steps`, or a diagnostic run,
        which records it for the replay of early stopping)."""
        return self.fit.uses_min_steps or self.evaluation.diagnostic_test

    def with_fit(self, **changes: Any) -> TrainSpec:
        """This spec with fit fields changed (e.g. the grid's ``min_steps``); a new ``steps`` (the curriculum's
        length) resolves the :class:`Arm` again."""
        fit = _settled(replace(self.fit, **changes))
        arm = self.arm if fit.steps == self.fit.steps else resolve_arm(self.curriculum, fit.steps)
        return replace(self, fit=fit, arm=arm)

    def with_runtime(self, **changes: Any) -> TrainSpec:
        """This spec with runtime fields changed (e.g. the job's ``threads``)."""
        return replace(self, runtime=replace(self.runtime, **changes))


#: the parts of a :class:`TrainSpec` (its compared fields), by attribute, in the order their fields are written
PARTS: dict[str, type] = {f.name: get_type_hints(TrainSpec)[f.name] for f in fields(TrainSpec) if f.compare}
#: every field name a run mapping may hold, and the spec version's key
KNOWN_KEYS = frozenset(f.name for cls in PARTS.values() for f in fields(cls)) | {"spec_version"}


def _part(cls: type, values: Mapping[str, Any]) -> Any:
    """One part from the values its fields name (absent: the field's default), frozen and :func:`_settled`."""
    return _settled(cls(**{f.name: freeze(values[f.name]) for f in fields(cls) if f.name in values}))


def _settled(part: Any) -> Any:
    """``part`` with every field that has ``used_when`` reset to its default while nothing reads it."""
    idle = {f.name: f.default for f in fields(part)
            if f.metadata.get("used_when") and not getattr(part, f.metadata["used_when"])}
    return replace(part, **idle) if idle else part


def parse_train_spec(values: Mapping[str, Any], where: str = "experiment") -> TrainSpec:
    """The :class:`TrainSpec` of a resolved run mapping (or of a job's params, which omit idle knobs). ValueError
    naming ``where`` for an unknown key, a spec of another :data:`SPEC_VERSION`, or an invalid curriculum section.
    A field read only in some settings (``used_when``: ``ema_decay`` under an EMA) is reset to its default outside
    them."""
    unknown = sorted(set(values) - KNOWN_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}")
    version = values.get("spec_version", 1)
    if version != SPEC_VERSION:
        raise ValueError(f"{where}: a spec of version {version}; this pipeline reads version {SPEC_VERSION}")
    parts = {name: _part(cls, values) for name, cls in PARTS.items()}
    parts["ranker"] = _current_arithmetic(parts["ranker"], values.get("arithmetic"), where)
    arm = resolve_arm(parts["curriculum"], parts["fit"].steps, where)
    return TrainSpec(**parts, arm=arm, order=tuple(values))


def _current_arithmetic(ranker: RankerSpec, given: Any, where: str) -> RankerSpec:
    """``ranker`` with the registry's arithmetic version of its ranker (:func:`arithmetic_version`). ValueError
    naming ``where`` when the mapping holds another version: params planned by code that computed otherwise."""
    current = arithmetic_version(ranker.ranker)
    if given is not None and given != current:
        raise ValueError(f"{where}: planned for arithmetic version {given} of ranker {ranker.ranker!r}; this "
                         f"pipeline computes version {current}: plan the run again")
    return replace(ranker, arithmetic=current)


def _written(part: Any, f: Field[Any]) -> bool:
    """Whether a job's params hold field ``f`` of ``part`` (the rule of the module docstring)."""
    if not f.metadata.get("params", True):
        return False
    if f.metadata.get("used_when"):
        return bool(getattr(part, f.metadata["used_when"]))
    return not (f.metadata.get("added") and getattr(part, f.name) == f.default)


def spec_params(spec: TrainSpec) -> dict[str, Any]:
    """A run's params: what its outputs depend on, by the one rule of the module docstring, in the order of the
    mapping it was parsed from (then field order)."""
    flat: dict[str, Any] = {}
    for name in PARTS:
        part = getattr(spec, name)
        for f in fields(part):
            if _written(part, f):
                flat[f.name] = thaw(getattr(part, f.name))
    if SPEC_VERSION > 1:
        flat["spec_version"] = SPEC_VERSION
    ordered = {key: flat[key] for key in spec.order if key in flat}
    return {**ordered, **{key: value for key, value in flat.items() if key not in ordered}}


def spec_record(spec: TrainSpec) -> dict[str, Any]:
    """What a train job's ``config.json`` records of its spec: its params and the threads it ran on."""
    return {**spec_params(spec), "threads": spec.runtime.threads}


__all__ = ["Arm", "CurriculumSpec", "PARTS", "SPEC_VERSION", "Section", "TrainSpec", "freeze", "parse_train_spec",
           "resolve_arm", "spec_params", "spec_record", "thaw"]

"""The registry of rankers: one :func:`register_ranker` call per architecture, carrying all about it.

An entry gives the ranker's class (or a lazy ``"module:Class"`` path, so that registering imports no torch: Snakemake
imports :mod:`curricula.models` while it parses the workflow), its architecture knobs with their defaults (config
``train.architecture``), its default learning rate and learning-rate schedule (when the config leaves ``lr`` /
``schedule`` null), and the paper it follows. :mod:`curricula.models` registers the built-in rankers and derives its
public tables (``ARCHITECTURES``, ``DEFAULT_LR``, ``DEFAULT_SCHEDULE``, ``RANKERS``) from this registry; a ranker
registered elsewhere reaches the workflow through the config's ``plugins`` (:mod:`curricula.plugins`).
"""

from __future__ import annotations

import copy
import importlib
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from curricula.models.base import Ranker


@dataclass(frozen=True)
class Knob:
    """One architecture knob of a ranker and its default.

    A knob whose default is None is *optional*: it stays out of a resolved architecture unless a config sets it
    (null = the behaviour from before the knob existed), so adding one changes no existing run's spec, nor the
    params Snakemake compares."""

    name: str
    default: Any

    @property
    def optional(self) -> bool:
        """Whether the knob stays out of a resolved architecture unless set (its default is None)."""
        return self.default is None


@dataclass(frozen=True)
class RankerEntry:
    """One registered ranker; see :func:`register_ranker` for the fields."""

    name: str
    cls: type | str = field(repr=False)
    knobs: tuple[Knob, ...]
    lr: float
    schedule: str
    citation: str = ""
    spec_knobs: tuple[str, ...] = ()
    arithmetic: int = 1

    @property
    def defaults(self) -> dict[str, Any]:
        """The knobs a resolved architecture always holds, with their defaults, in registration order (a fresh
        copy: mutating it changes no entry)."""
        return {k.name: copy.deepcopy(k.default) for k in self.knobs if not k.optional}

    @property
    def optional_knobs(self) -> tuple[str, ...]:
        """The knobs that stay out of a resolved architecture unless set (:attr:`Knob.optional`)."""
        return tuple(k.name for k in self.knobs if k.optional)

    def architecture(self, arch: Mapping[str, Any] | None) -> dict[str, Any]:
        """The architecture knobs with their defaults for those absent or null, then the optional knobs that are
        set, in the order given. ValueError for a knob the ranker does not have."""
        defaults = self.defaults
        given = {k: v for k, v in (arch or {}).items() if v is not None}
        unknown = sorted(set(given) - {k.name for k in self.knobs})
        if unknown:
            others = f"none; use {', '.join(self.spec_knobs)}" if self.spec_knobs else "none"
            raise ValueError(f"architecture knob(s) {unknown} do not apply to ranker {self.name!r} "
                             f"(its knobs: {sorted(defaults) or others})")
        return {**defaults, **given}

    def ranker_class(self) -> type[Ranker]:
        """The class (a lazy path is imported now, with torch). ValueError when it is not named :attr:`name`."""
        cls = self.cls
        if isinstance(cls, str):
            module, _, attribute = cls.partition(":")
            cls = getattr(importlib.import_module(module), attribute)
        if getattr(cls, "name", None) != self.name:
            raise ValueError(f"ranker {self.name!r}: its class {cls.__name__} has name {getattr(cls, 'name', None)!r}")
        return cls


#: name -> ranker, in registration order
REGISTRY: dict[str, RankerEntry] = {}


def arithmetic_version(name: str) -> int:
    """The arithmetic version of registered ranker ``name`` (:func:`register_ranker`); 1 for a name not registered
    (another check refuses it)."""
    entry = REGISTRY.get(name)
    return entry.arithmetic if entry is not None else 1


def register_ranker(
    name: str,
    cls: type | str,
    *,
    knobs: Mapping[str, Any] | None = None,
    lr: float,
    schedule: str,
    citation: str = "",
    spec_knobs: Sequence[str] = (),
    arithmetic: int = 1,
) -> RankerEntry:
    """Register a ranker under ``name`` (a config ``train.ranker``); returns its entry.

    * ``cls``: a :class:`curricula.models.base.Ranker` subclass whose ``name`` is ``name``, or its lazy path
      ``"package.module:Class"`` (imported only when a ranker is built or loaded, so registering needs no torch).
      It implements ``build(spec, seed)`` and ``load(folder, config)`` as
      :class:`curricula.models.text.TwoSidedRanker` does.
    * ``knobs``: ``{knob: default}``, its keys of config ``train.architecture`` in the order a resolved architecture
      lists them; a knob whose default is None stays out unless set (:attr:`Knob.optional`). A knob new to the
      pipeline also needs an entry under ``train.architecture`` in ``schemas/config.schema.yaml``.
    * ``lr``: the Adam/AdamW learning rate when the config's ``lr`` is null (> 0).
    * ``schedule``: the learning-rate schedule when ``schedule`` is null (``constant`` or ``linear``,
      :func:`curricula.training.core.schedule_factor`).
    * ``citation``: the paper and section it follows; ``spec_knobs``: the ``train`` keys outside ``architecture``
      it reads instead (the cross-encoder's ``model``, ``layers``, ``max_length``), named when a knob is refused.
    * ``arithmetic``: the version of the ranker's arithmetic, counted up whenever a change of its code changes its
      numbers (the last bits included). A version above 1 enters every run's params (``arithmetic``), so a run
      computed by the new code never shares a digest, a checkpoint or a ledger pairing with one of the old.

    A name registered twice is a ValueError (:func:`unregister_ranker` first).
    """
    if name in REGISTRY:
        raise ValueError(f"ranker {name!r} is already registered")
    if not (isinstance(cls, type) or (isinstance(cls, str) and ":" in cls)):
        raise ValueError(f"ranker {name}: cls must be a class or a 'package.module:Class' path, got {cls!r}")
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not lr > 0:
        raise ValueError(f"ranker {name}: lr must be a number > 0, got {lr!r}")
    if not isinstance(schedule, str) or not schedule:
        raise ValueError(f"ranker {name}: schedule must be a schedule's name, got {schedule!r}")
    if isinstance(arithmetic, bool) or not isinstance(arithmetic, int) or arithmetic < 1:
        raise ValueError(f"ranker {name}: arithmetic must be an integer >= 1, got {arithmetic!r}")
    entry = RankerEntry(name, cls, tuple(Knob(k, v) for k, v in (knobs or {}).items()), float(lr), schedule,
                        citation, tuple(spec_knobs), arithmetic)
    REGISTRY[name] = entry
    return entry


def unregister_ranker(name: str) -> RankerEntry:
    """Remove a registered ranker (tests registering a toy one clean up with this); returns it."""
    return REGISTRY.pop(lookup_ranker(name).name)


def lookup_ranker(name: str | None) -> RankerEntry:
    """The registered ranker ``name``; an unknown name (or None, a ``ranker.json`` naming no ranker) is a ValueError
    listing the known ones."""
    try:
        if name is not None:
            return REGISTRY[name]
    except (KeyError, TypeError):  # TypeError: an unhashable value read from a ranker.json
        pass
    raise ValueError(f"unknown ranker {name!r}; known: {list(REGISTRY)}") from None


class RegistryView(Mapping[str, Any]):
    """A read-only, live table of one field of every registered ranker ({name: value}), in registration order."""

    def __init__(self, value: Callable[[RankerEntry], Any]):
        self._value = value

    def __getitem__(self, name: str) -> Any:
        return self._value(REGISTRY[name])

    def __iter__(self) -> Iterator[str]:
        return iter(list(REGISTRY))

    def __len__(self) -> int:
        return len(REGISTRY)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class RegistryNames(Sequence[str]):
    """The registered rankers' names, live and read-only, in registration order; compares equal to a tuple or list
    of the same names."""

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        """An int gives a name, a slice a tuple of them."""
        return tuple(REGISTRY)[index]

    def __len__(self) -> int:
        return len(REGISTRY)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    # no __hash__: defining __eq__ leaves it None (unhashable), as a value that changes with the registry must be

    def __repr__(self) -> str:
        return repr(tuple(REGISTRY))

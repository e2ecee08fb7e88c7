"""Rule input keys as types: the names ``<kind>|<a>|<b>`` under which the rules hand files to their scripts
(``metrics|<experiment>|<seed>``, ``run|<dataset>|<arm>|<seed>``, ``upstream|<path>``, ...) are built and taken apart
only here, and the ``+bm25`` suffix of a BM25-interpolated variant's name is defined only here.

A key string is its kind and its parts joined by :data:`SEP`. Key strings are Snakemake input names, and a ledger
entry's inputs and a results path follow from them, so their bytes never change. Each shape is a frozen dataclass:

- :class:`NameKey` ``<kind>|<name>``: a tuned experiment's training run's dev curve or model (``curve``, ``model``;
  rule ``select_tuned``), a reference ranker's test metrics (``reference``), a difficulty function's test-pair table
  (``difficulty``);
- :class:`SeedKey` ``<kind>|<name>|<seed>``: an experiment's dev curve or test metrics (``curve``, ``metrics``), a
  tuned experiment's dev selection (``selection``), an active-learning method's learning curve (``curve``);
- :class:`ClaimKey` ``<kind>|<dataset>|<arm>|<seed>``: a study's claim run (``run``, a judging rule's input), or the
  test metrics (``metrics``) or active-learning values (``active``) a claim names;
- :class:`UpstreamKey` ``upstream|<path>``: a table a ledger entry's run read, by its path under the dataset's folder.

:func:`decode_key` gives the typed key of a key string (its shape chosen by the kind and the number of parts) and
refuses a malformed one with a ValueError naming it; :func:`input_key` does the same for a rule's input name and gives
None for a plain name (``queries``, ``previous``). Torch-free: the rule files use it while Snakemake parses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral
from typing import TYPE_CHECKING, ClassVar, TypeVar

#: what joins a key's kind and parts
SEP = "|"
#: the suffix of a BM25-interpolated variant's name (score additivity): ``<experiment>+bm25``, ``teacher+bm25``
BM25_SUFFIX = "+bm25"

# the key kinds
CURVE = "curve"
MODEL = "model"
METRICS = "metrics"
REFERENCE = "reference"
SELECTION = "selection"
DIFFICULTY = "difficulty"
ACTIVE = "active"
RUN = "run"
UPSTREAM = "upstream"

K = TypeVar("K", bound="_Key")


def with_bm25(name: str) -> str:
    """The name of ``name``'s BM25-interpolated variant: ``<name>+bm25``."""
    return name + BM25_SUFFIX


def is_bm25(name: str) -> bool:
    """Whether ``name`` names a BM25-interpolated variant (ends with ``+bm25``)."""
    return name.endswith(BM25_SUFFIX)


def without_bm25(name: str) -> str:
    """The name a BM25-interpolated variant interpolates (``x+bm25`` -> ``x``); any other name is itself."""
    return name.removesuffix(BM25_SUFFIX)


class _Key:
    """What the key shapes share: ``KINDS`` (the kinds of this shape), ``PARTS`` (the fields after the kind, in their
    encoded order), the checks a key passes when it is made, :meth:`encode` and :meth:`decode`."""

    KINDS: ClassVar[tuple[str, ...]] = ()
    PARTS: ClassVar[tuple[str, ...]] = ()
    kind: str

    if TYPE_CHECKING:
        # what the dataclass shapes' generated __init__ take, as :meth:`decode` calls it (the kind and each part by
        # name); declared for the type checker only
        def __init__(self, *, kind: str, **parts: str) -> None: ...

    def __post_init__(self) -> None:
        """Refuse a kind this shape does not have, and an empty part or one holding :data:`SEP` (which would not
        decode back to the same key)."""
        if self.kind not in self.KINDS:
            raise ValueError(f"{type(self).__name__} kind {self.kind!r} is not one of {', '.join(self.KINDS)}")
        for name, value in zip(self.PARTS, self.parts):
            if not value or SEP in value:
                raise ValueError(f"{type(self).__name__} {name} {value!r} is empty or holds {SEP!r}")

    @property
    def parts(self) -> tuple[str, ...]:
        """The encoded parts after the kind (seeds as their decimal text)."""
        return tuple(str(getattr(self, name)) for name in self.PARTS)

    def encode(self) -> str:
        """The key string: ``<kind>|<part>|...``."""
        return SEP.join((self.kind, *self.parts))

    @classmethod
    def form(cls) -> str:
        """How this shape's key strings look, for messages: ``<kind>|<name>|<seed>`` and its kinds."""
        return SEP.join(("<kind>", *(f"<{name}>" for name in cls.PARTS))) + f" (kind: {', '.join(cls.KINDS)})"

    @classmethod
    def decode(cls: type[K], text: str) -> K:
        """The key ``text`` encodes; a string of another shape or kind, or with an empty or malformed part, raises
        a ValueError naming it."""
        pieces = text.split(SEP)
        try:
            if len(pieces) != len(cls.PARTS) + 1:
                raise ValueError(f"{len(pieces) - 1} parts after the kind, not {len(cls.PARTS)}")
            return cls(kind=pieces[0], **dict(zip(cls.PARTS, pieces[1:])))
        except ValueError as err:
            raise ValueError(f"malformed rule input key {text!r}: expected {cls.form()}; {err}") from None


def _seed_text(seed: int | str) -> str:
    """A seed's decimal text; a string must be a plain integer (``3``, ``-1``; not ``03`` nor `` 3``), so that the
    key decodes and encodes to the same bytes."""
    text = str(seed)
    try:
        plain = not isinstance(seed, bool) and isinstance(seed, (Integral, str)) and str(int(seed)) == text
    except ValueError:  # not a number at all
        plain = False
    if not plain:
        raise ValueError(f"seed {seed!r} is not a plain integer")
    return text


@dataclass(frozen=True)
class NameKey(_Key):
    """``<kind>|<name>``: ``curve``/``model`` of a tuned experiment's training run, ``reference`` (a reference
    ranker, or its ``+bm25`` variant), ``difficulty`` (a difficulty function)."""

    KINDS: ClassVar[tuple[str, ...]] = (CURVE, MODEL, REFERENCE, DIFFICULTY)
    PARTS: ClassVar[tuple[str, ...]] = ("name",)
    kind: str
    name: str


@dataclass(frozen=True)
class SeedKey(_Key):
    """``<kind>|<name>|<seed>``: ``curve``/``metrics`` of an experiment (or its ``+bm25`` variant's metrics) or of an
    active-learning method's curve, ``selection`` of a tuned experiment. ``seed`` is kept as its decimal text (the
    report's frames key seeds by text); an int is accepted."""

    KINDS: ClassVar[tuple[str, ...]] = (CURVE, METRICS, SELECTION)
    PARTS: ClassVar[tuple[str, ...]] = ("name", "seed")
    kind: str
    name: str
    seed: str

    def __post_init__(self) -> None:
        """The seed as its decimal text, then the shared checks."""
        object.__setattr__(self, "seed", _seed_text(self.seed))
        super().__post_init__()


@dataclass(frozen=True)
class ClaimKey(_Key):
    """``<kind>|<dataset>|<arm>|<seed>``: ``run`` (a claim run a judging rule reads: an experiment, its ``+bm25``
    variant or ``active:<method>@<round>``), ``metrics`` (an experiment's test metrics a claim names), ``active`` (an
    active-learning method's test values a claim names). ``seed`` is an int; its decimal text is accepted."""

    KINDS: ClassVar[tuple[str, ...]] = (RUN, METRICS, ACTIVE)
    PARTS: ClassVar[tuple[str, ...]] = ("dataset", "arm", "seed")
    kind: str
    dataset: str
    arm: str
    seed: int

    def __post_init__(self) -> None:
        """The seed as an int, then the shared checks."""
        object.__setattr__(self, "seed", int(_seed_text(self.seed)))
        super().__post_init__()


@dataclass(frozen=True)
class UpstreamKey(_Key):
    """``upstream|<path>``: a table a ledger entry's run read, by its path under the dataset's results folder."""

    KINDS: ClassVar[tuple[str, ...]] = (UPSTREAM,)
    PARTS: ClassVar[tuple[str, ...]] = ("path",)
    path: str
    kind: str = field(default=UPSTREAM)


#: a typed rule input key
Key = NameKey | SeedKey | ClaimKey | UpstreamKey
#: {(kind, number of parts): shape}: how :func:`decode_key` tells the shapes apart (``curve`` and ``metrics`` each
#: come in two shapes)
SHAPES: dict[tuple[str, int], type[Key]] = {(kind, len(shape.PARTS)): shape
                                            for shape in (NameKey, SeedKey, ClaimKey, UpstreamKey)
                                            for kind in shape.KINDS}


def decode_key(text: str) -> Key:
    """The typed key a key string encodes; one of no known kind and shape raises a ValueError naming it."""
    pieces = text.split(SEP)
    count = len(pieces) - 1
    shape = SHAPES.get((pieces[0], count))
    if shape is None:
        shapes = [s for s in (NameKey, SeedKey, ClaimKey, UpstreamKey) if pieces[0] in s.KINDS]
        forms = "; ".join(s.form() for s in shapes or (NameKey, SeedKey, ClaimKey, UpstreamKey))
        raise ValueError(f"malformed rule input key {text!r}: no key of kind {pieces[0]!r} has {count} "
                         f"part{'' if count == 1 else 's'} after the kind (expected {forms})")
    return shape.decode(text)


def input_key(name: str) -> Key | None:
    """The typed key of a rule's input name, None for a plain name (no :data:`SEP`, e.g. ``queries``); a malformed
    key raises a ValueError naming it (:func:`decode_key`)."""
    return decode_key(name) if SEP in name else None


def split_inputs(inputs: Mapping[str, str], kind: str) -> dict[tuple[str, ...], str]:
    """Named rule inputs ``<kind>|a|b`` as {(a, b): path} (how the report rules key runs by experiment and seed): the
    parts of each input's :func:`input_key` of that kind; plain input names are skipped."""
    out = {}
    for name in inputs.keys():
        key = input_key(name)
        if key is not None and key.kind == kind:
            out[key.parts] = inputs[name]
    return out


__all__ = ["ACTIVE", "BM25_SUFFIX", "CURVE", "ClaimKey", "DIFFICULTY", "Key", "METRICS", "MODEL", "NameKey",
           "REFERENCE", "RUN", "SELECTION", "SEP", "SHAPES", "SeedKey", "UPSTREAM", "UpstreamKey", "decode_key",
           "input_key", "is_bm25", "split_inputs", "with_bm25", "without_bm25"]

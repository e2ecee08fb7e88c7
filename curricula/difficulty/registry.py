"""The registry of difficulty scoring functions: one :func:`register` call per function, carrying all about it.

The pipeline asks the registry which extra tables a function reads (the ``difficulty_function`` rule's inputs),
which ``difficulty`` config keys it depends on (its job's params, so a knob re-runs only its functions), whether
it is query- or pair-level (the trainer's eq. 7/9/11 pairwise ease, the experiments' checks), how its raw value is
oriented and bounded (whether MacAvaney's weights may read it as the heuristic h), which pairs it scores (with
``difficulty.bm25_list: run``, also the BM25 run's), and how to compute it. The start-up checks
(:mod:`curricula.pipeline.checks`) refuse a config that uses a function against this metadata. The built-in
functions of the papers are registered in :mod:`curricula.difficulty`; a function registered elsewhere reaches
the workflow through the config's ``plugins`` (:mod:`curricula.plugins`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import polars as pl

#: the extra tables a function may read, beyond the ingest tables (queries, docs, qrels, candidates)
INPUT_TABLES = ("candidate_scores", "run", "teacher", "query_vectors", "doc_vectors")
LEVELS = ("query", "pair")
#: how ``<f>_raw`` is oriented (the ``<f>`` column is always a difficulty in [0, 1], 1 = hardest): ``harder`` = a
#: larger raw value is a harder instance (Penha's functions), ``easier`` = a larger raw value is an easier one (HCL's
#: similarity G), ``relevance`` = pair-level, a larger raw value means the document looks more relevant, so easier
#: for a relevant document and harder for a negative (MacAvaney's heuristic h, 1 = ranked high by BM25)
ORIENTATIONS = ("harder", "easier", "relevance")
#: the raw range of a function that declares none: any real value
UNBOUNDED = (-math.inf, math.inf)


@dataclass(frozen=True)
class Inputs:
    """What a scoring function's ``compute`` receives.

    ``pairs``: the scored (query, candidate) pairs, qid, docid, rel (Int32, 1 = relevant), sorted by qid, docid;
    ``queries`` and ``docs``: the ingest tables (every split); ``tables``: the extra tables the function declared
    (only those needed for these knobs); ``knobs``: the values of the knobs it declared, and ``seed`` if it uses it.
    """

    pairs: pl.DataFrame
    queries: pl.DataFrame
    docs: pl.DataFrame
    tables: Mapping[str, pl.DataFrame]
    knobs: Mapping[str, Any]


@dataclass(frozen=True)
class DifficultyFunction:
    """One registered scoring function; see :func:`register` for the fields."""

    name: str
    citation: str
    level: str
    compute: Callable[[Inputs], pl.DataFrame] = field(repr=False)
    inputs: tuple[str, ...] = ()
    conditional_inputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    knobs: tuple[str, ...] = ()
    uses_seed: bool = False
    orientation: str = "harder"
    raw_range: tuple[float, float] = UNBOUNDED
    run_pairs: bool = False

    @property
    def pair_level(self) -> bool:
        """True when the function has one value per (query, candidate), False for one value per query."""
        return self.level == "pair"

    @property
    def raw_in_unit_interval(self) -> bool:
        """Whether every ``<f>_raw`` value lies in [0, 1] (its registered ``raw_range``)."""
        return self.raw_range[0] >= 0.0 and self.raw_range[1] <= 1.0

    @property
    def macavaney_h(self) -> bool:
        """Whether ``<f>_raw`` is a heuristic h as MacAvaney et al. 2020 eq. 7/9/11 read it: pair-level, in [0, 1],
        oriented ``relevance`` (1 = the document looks relevant), so that D_pair = (h(d+) - h(d-) + 1) / 2 is an
        ease in [0, 1] with 1 = easy."""
        return self.pair_level and self.orientation == "relevance" and self.raw_in_unit_interval

    def weighs_by_raw(self, pointwise: bool) -> bool:
        """Whether MacAvaney's weights read ``<f>_raw`` (as the h of D_pair): a pair-level function under a pairwise
        loss (``pointwise`` False). Otherwise they read ``<f>`` (ease D = 1 - difficulty, in [0, 1] by contract)."""
        return self.pair_level and not pointwise

    @property
    def range_text(self) -> str:
        """``raw_range`` as an interval, e.g. ``[0, 1]`` or ``[0, inf)``."""
        lo, hi = self.raw_range
        return f"{'(' if math.isinf(lo) else '['}{lo:g}, {hi:g}{')' if math.isinf(hi) else ']'}"

    @property
    def key(self) -> tuple[str, ...]:
        """The columns that identify one value: ``("qid",)`` or ``("qid", "docid")``."""
        return ("qid", "docid") if self.pair_level else ("qid",)

    def needed_inputs(self, knobs: Mapping[str, Any]) -> set[str]:
        """The extra tables read under these knob values (a conditional table whose knob is absent is not read)."""
        out = set(self.inputs)
        out.update(table for table, when in self.conditional_inputs.items()
                   if all(k in knobs and knobs[k] == v for k, v in when.items()))
        return out

    def knob_values(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """This function's knobs (and ``seed`` if it uses it) picked from ``values``; a missing one is a ValueError."""
        wanted = self.knobs + (("seed",) if self.uses_seed else ())
        missing = [k for k in wanted if k not in values]
        if missing:
            raise ValueError(f"difficulty {self.name}: no value for knob(s) {missing}")
        return {k: values[k] for k in wanted}


#: name -> function, in registration order
FUNCTIONS: dict[str, DifficultyFunction] = {}


def register(
    name: str,
    citation: str,
    *,
    level: str,
    compute: Callable[[Inputs], pl.DataFrame],
    inputs: Sequence[str] = (),
    conditional_inputs: Mapping[str, Mapping[str, Any]] | None = None,
    knobs: Sequence[str] = (),
    uses_seed: bool = False,
    orientation: str = "harder",
    raw_range: tuple[float, float] = UNBOUNDED,
    run_pairs: bool = False,
) -> DifficultyFunction:
    """Register a difficulty scoring function under ``name`` (a config ``difficulty.functions`` entry); returns it.

    * ``citation``: the paper and equation it implements, e.g. ``"MacAvaney et al. 2020, eq. 5-6"``.
    * ``level``: ``"query"`` (one value per query, the instance Penha & Hauff and Su et al. sort) or ``"pair"``
      (one value per (query, candidate), MacAvaney et al.'s heuristics; the trainer then forms the pairwise
      ease from two rows' raw values).
    * ``compute(inputs) -> DataFrame``: given :class:`Inputs`, a frame with the key columns (``qid``, plus
      ``docid`` when pair-level), one row per key of ``inputs.pairs`` (extra queries are ignored), and two Float64
      columns: ``{name}_raw``, the value exactly as the paper defines it (its own units and orientation), and
      ``{name}``, the pipeline's difficulty in [0, 1] with **1 = hardest** (e.g. the percentile rank of the raw
      value among the scored queries, or 1 - D when the paper's D is an ease). No null values.
    * ``inputs``: the extra tables it always reads, among :data:`INPUT_TABLES` (the ingest tables are always given).
    * ``conditional_inputs``: ``{table: {knob: value, ...}}``, a table read only when every listed knob has that
      value, e.g. MacAvaney's ``{"run": {"bm25_list": "run"}}``; the knobs must be among ``knobs``.
    * ``knobs``: the keys of the config's ``difficulty`` section it reads (``sm_words``, ``bm25_list``, ...);
      changing one re-runs only the functions that declare it. ``compute`` finds their values in ``inputs.knobs``.
    * ``uses_seed``: it reads the config ``seed`` (``inputs.knobs["seed"]``); only ``random`` should, so that a
      changed seed does not re-run the deterministic functions.
    * ``orientation``: how ``{name}_raw`` is oriented, one of :data:`ORIENTATIONS` (``harder``: larger = harder;
      ``easier``: larger = easier; ``relevance``: pair-level, larger = the document looks more relevant, as
      MacAvaney's h).
    * ``raw_range``: ``(low, high)``, the values ``{name}_raw`` can take in its own units (``math.inf`` for no
      bound), e.g. ``(0, math.inf)`` for a count. Weighting a pairwise loss by a pair-level function reads the raw
      value as MacAvaney's h, which must be in [0, 1] with orientation ``relevance`` (:attr:`macavaney_h`); the
      start-up checks refuse any other pair-level function as ``weighting.scoring`` there.
    * ``run_pairs``: with ``difficulty.bm25_list: run`` the stage also scores the BM25 run's pairs of the training
      queries (:func:`curricula.difficulty.scores_run_pairs`), whose BM25 scores it adds to ``candidate_scores``;
      only for a pair-level function that reads ``candidate_scores`` and, under ``bm25_list: run``, the ``run``.
      Without it, the start-up checks refuse the function wherever those pairs are needed (weights of
      ``negatives.mode: bm25``; a joined table with a function that has them).

    A name registered twice is a ValueError (:func:`unregister` first).
    """
    if name in FUNCTIONS:
        raise ValueError(f"difficulty function {name!r} is already registered")
    conditional = _check_wiring(name, level, inputs, conditional_inputs or {}, knobs)
    raw_range = _check_raw_metadata(name, level, orientation, raw_range)
    if run_pairs and not (level == "pair" and "candidate_scores" in inputs
                          and dict(conditional.get("run", {})) == {"bm25_list": "run"}):
        raise ValueError(f"difficulty {name}: run_pairs=True needs level='pair', 'candidate_scores' in inputs and "
                         "conditional_inputs={'run': {'bm25_list': 'run'}} (the run's pairs come with its BM25 scores)")
    fn = DifficultyFunction(name, citation, level, compute, tuple(inputs), MappingProxyType(conditional),
                            tuple(knobs), uses_seed, orientation, raw_range, bool(run_pairs))
    FUNCTIONS[name] = fn
    return fn


def _check_wiring(name: str, level: str, inputs: Sequence[str], conditional_inputs: Mapping[str, Mapping[str, Any]],
                  knobs: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """The conditional inputs, frozen; ValueError for a bad level, an unknown table or a knob not declared."""
    if level not in LEVELS:
        raise ValueError(f"difficulty {name}: level must be one of {LEVELS}, got {level!r}")
    conditional: dict[str, Mapping[str, Any]] = {t: MappingProxyType(dict(when))
                                                 for t, when in conditional_inputs.items()}
    unknown = sorted(set(inputs).union(conditional) - set(INPUT_TABLES))
    if unknown:
        raise ValueError(f"difficulty {name}: unknown input table(s) {unknown}; known: {list(INPUT_TABLES)}")
    loose = sorted({k for when in conditional.values() for k in when} - set(knobs))
    if loose:
        raise ValueError(f"difficulty {name}: conditional_inputs depend on undeclared knob(s) {loose}")
    if "seed" in knobs:
        raise ValueError(f"difficulty {name}: declare the seed with uses_seed=True, not as a knob")
    return conditional


def _check_raw_metadata(name: str, level: str, orientation: str, raw_range: Sequence[float]) -> tuple[float, float]:
    """``raw_range`` as a (low, high) pair of floats; ValueError for a bad orientation or range."""
    if orientation not in ORIENTATIONS:
        raise ValueError(f"difficulty {name}: orientation must be one of {ORIENTATIONS}, got {orientation!r}")
    if orientation == "relevance" and level != "pair":
        raise ValueError(f"difficulty {name}: orientation 'relevance' describes a document, so needs level='pair'")
    try:
        low, high = (float(v) for v in raw_range)
    except (TypeError, ValueError):
        raise ValueError(f"difficulty {name}: raw_range must be (low, high), got {raw_range!r}") from None
    if math.isnan(low) or math.isnan(high) or low > high:
        raise ValueError(f"difficulty {name}: raw_range must be (low, high) with low <= high, got {raw_range!r}")
    return low, high


def unregister(name: str) -> DifficultyFunction:
    """Remove a registered function (tests registering a toy function clean up with this); returns it."""
    return FUNCTIONS.pop(lookup(name).name)


def lookup(name: str) -> DifficultyFunction:
    """The registered function ``name``; an unknown name is a ValueError listing the known ones."""
    try:
        return FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown difficulty function {name!r}; known: {list(FUNCTIONS)}") from None


def check_names(names: Sequence[str | None] | None, where: str) -> None:
    """ValueError naming the config key ``where`` when ``names`` holds a function nobody registered (a name a config
    left out, None, among them)."""
    unknown = [n for n in names or () if n not in FUNCTIONS]
    if unknown:
        raise ValueError(f"{where}: unknown difficulty function(s) {unknown}; known: {list(FUNCTIONS)}")


def pair_level(name: str) -> bool:
    """True when ``name`` is a pair-level function (one value per (query, candidate)); unknown is a ValueError."""
    return lookup(name).pair_level

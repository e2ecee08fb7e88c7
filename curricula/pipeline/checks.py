"""The checks a config passes before any job runs, beyond its schema: each returns what it resolved or raises a
ValueError with a one-line message naming the config key (the rule files prefix it with ``config:`` and stop)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from curricula.difficulty import check_names
from curricula.statistics.sequential_verdicts import SEQUENTIAL_MULTIPLICITIES
from curricula.study.grid import parse_active_name
from curricula.study.rounds import study_looks


def check_difficulty_functions(config: Mapping[str, Any]) -> None:
    """The difficulty functions the config names must be registered (curricula.difficulty.FUNCTIONS);
    ``difficulty.functions`` may also be null (the ones the grid consumes) or ``all``."""
    if config["difficulty"]["functions"] != "all":
        check_names(config["difficulty"]["functions"], "difficulty.functions")
    check_names(config["report"]["difficulty_functions"], "report.difficulty_functions")


def check_references(config: Mapping[str, Any]) -> None:
    """The reference ranker bm25_tuned needs the tuning (rule bm25_tune) enabled."""
    if "bm25_tuned" in config["evaluate"]["references"] and not config["bm25"]["tune"]["enabled"]:
        raise ValueError("evaluate.references names bm25_tuned but bm25.tune.enabled is false; enable the tuning "
                         "or drop bm25_tuned from evaluate.references")


def sequential_looks(settings: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The looks of a sequential study (``study.sequential.looks`` capped by ``study.max_seeds``,
    :func:`curricula.study.rounds.study_looks`), or None when it trains every seed of ``seeds``. ``settings`` is
    config ``study``. A cap without rounds, or a multiplicity no sequential procedure is built for, is refused."""
    if not settings["sequential"]["enabled"]:
        if settings["max_seeds"] is not None:
            raise ValueError(f"study.max_seeds ({settings['max_seeds']}) caps the rounds of study.sequential; "
                             "enable study.sequential or drop study.max_seeds")
        return None
    if settings["multiplicity"] not in SEQUENTIAL_MULTIPLICITIES:
        raise ValueError(f"study.multiplicity {settings['multiplicity']} with study.sequential: expected one of "
                         f"{', '.join(SEQUENTIAL_MULTIPLICITIES)} (no sequential Benjamini-Hochberg is built; "
                         f"Holm bounds the false discovery rate too)")
    return study_looks(settings["sequential"]["looks"], settings["max_seeds"])


def check_previous(previous: str | None, own: Sequence[str]) -> None:
    """``study.previous`` (the last study's findings table, compared with) must not be one of this study's own
    outputs ``own``, which the re-run replaces. Paths are compared as written, normalised."""
    if previous is not None and os.path.normpath(previous) in {os.path.normpath(path) for path in own}:
        raise ValueError(f"study.previous {previous} is this study's own findings table, which the re-run replaces: "
                         "copy it aside first (e.g. to findings-previous.parquet) and name the copy")


def parsed_arms(claims: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, int] | None]:
    """{arm name: (method, round) for an ``active:<method>@<round>`` arm, None for an experiment} of every claim's
    two arms (:func:`curricula.study.grid.parse_active_name`); a malformed active name is refused."""
    try:
        return {name: parse_active_name(name) for claim in claims for name in (claim["experiment"], claim["against"])}
    except ValueError as err:
        raise ValueError(f"study.claims: {err}") from None


def check_active_arm(name: str, method: str, round_: int, dataset: str, settings: Mapping[str, Any]) -> None:
    """An active-learning arm (``active:<method>@<round>``) must be a method and round the dataset's loop runs
    (``settings``: its config ``active``; the method ``all``, every label, has round 0 only)."""
    rounds = 1 if method == "all" else settings["rounds"]
    if not settings["enabled"] or method not in settings["methods"] or round_ >= rounds:
        raise ValueError(f"study.claims name {name}, which {dataset} does not run (active: enabled "
                         f"{settings['enabled']}, methods {settings['methods']}, rounds 0-{rounds - 1}; all has round "
                         f"0 only; a claim tested on some datasets only lists them in study.claims.<id>.datasets)")


def check_evaluated(named: set[str], have: set[str], dataset: str) -> None:
    """The experiments (and ``<experiment>+bm25`` forms) the claims name on a dataset must be among those its grid
    evaluates (``have``)."""
    missing = sorted(named - have)
    if missing:
        raise ValueError(f"study.claims name {missing}, which {dataset}'s grid does not evaluate (it has "
                         f"{sorted(have)}; +bm25 forms need evaluate.additivity.enabled)")

"""The checks a config passes before any job runs, beyond its schema: each returns what it resolved or raises a
ValueError with a one-line message naming the config key (the rule files prefix it with ``config:`` and stop)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from curricula.difficulty import FUNCTIONS, check_names, function_knobs, lookup, scores_run_pairs
from curricula.experiments.spec import TrainSpec
from curricula.statistics.multiplicity import SEQUENTIAL_MULTIPLICITIES
from curricula.study.grid import parse_active_name
from curricula.study.looks import study_looks
from curricula.training.losses import POINTWISE


def check_difficulty_functions(config: Mapping[str, Any], runs_of: Mapping[str, Mapping[str, TrainSpec]]) -> None:
    """The difficulty functions the config names must be registered (curricula.difficulty.FUNCTIONS);
    ``difficulty.functions`` may also be null (the ones the grid consumes) or ``all``. Every run must then use its
    functions as their registration allows (:func:`check_weighting_functions`, :func:`check_joined_run_pairs`);
    ``runs_of`` is :func:`curricula.experiments.specs.experiment_runs` of the config."""
    if config["difficulty"]["functions"] != "all":
        check_names(config["difficulty"]["functions"], "difficulty.functions")
    check_names(config["report"]["difficulty_functions"], "report.difficulty_functions")
    check_weighting_functions(runs_of)
    check_joined_run_pairs(config, runs_of)


def _names(test: Callable[[str], bool]) -> str:
    """The registered functions that pass ``test``, as ``a, b or c`` (``none`` when none does)."""
    names = [name for name in FUNCTIONS if test(name)]
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names) or "none"


def check_weighting_functions(runs_of: Mapping[str, Mapping[str, TrainSpec]]) -> None:
    """MacAvaney's weights (``weighting.scoring``) by a function its registration allows, in every run of
    ``runs_of`` ({experiment: {run: typed spec}}). A pair-level function under a pairwise loss is read as the
    heuristic h of D_pair (eq. 7/9/11), so it must be registered as one (in [0, 1], orientation ``relevance``:
    :attr:`~curricula.difficulty.DifficultyFunction.macavaney_h`); and a pair-level function weighing the negatives
    ``negatives.mode: bm25`` draws must score the BM25 run's pairs (``run_pairs``; the mode itself needs
    ``difficulty.bm25_list: run``, :func:`curricula.experiments.specs.check_pair_weighting`)."""
    for experiment, runs in runs_of.items():
        for spec in runs.values():
            arm, loss = spec.arm, spec.objective.loss
            if arm.weighting is None:
                continue
            where, fn = f"experiments.{experiment}.weighting.scoring", lookup(arm.weighting.scoring)
            if fn.weighs_by_raw(loss in POINTWISE) and not fn.macavaney_h:
                raise ValueError(
                    f"{where}: {fn.name} is pair-level, so the {loss} loss weighs each (d+, d-) by MacAvaney's D_pair "
                    f"= (h(d+) - h(d-) + 1) / 2 with h = {fn.name}_raw, but {fn.name}_raw is registered in "
                    f"{fn.range_text} with orientation {fn.orientation!r}, not as an h in [0, 1] (1 = looks "
                    f"relevant): weight by {_names(lambda f: lookup(f).macavaney_h)}, a query-level function, or "
                    f"use a pointwise loss ({', '.join(POINTWISE)})")
            if fn.pair_level and arm.negatives.mode == "bm25" and not fn.run_pairs:
                raise ValueError(
                    f"{where}: {fn.name} does not score the BM25 run's pairs (registered without run_pairs), so the "
                    f"negatives that negatives.mode: bm25 draws have no {fn.name} difficulty: weight by "
                    f"{_names(lambda f: lookup(f).run_pairs)} or a query-level function, or set negatives.mode: "
                    "candidates")


def joined_functions(config: Mapping[str, Any], runs_of: Mapping[str, Mapping[str, TrainSpec]]) -> list[str]:
    """The functions of the joined table ``difficulty/difficulty.parquet``, as
    :meth:`curricula.pipeline.plan.DatasetPlan.difficulty_functions` gives them: ``difficulty.functions``, every
    registered one for ``all``, and for null those the runs consume (``scoring``, ``weighting.scoring``)."""
    chosen = config["difficulty"]["functions"]
    if chosen is not None:
        return list(FUNCTIONS) if chosen == "all" else list(chosen)
    used = {s for runs in runs_of.values() for spec in runs.values()
            for s in (spec.arm.scoring, spec.arm.weighting.scoring if spec.arm.weighting else None)}
    return [name for name in FUNCTIONS if name in used]


def check_joined_run_pairs(config: Mapping[str, Any], runs_of: Mapping[str, Mapping[str, TrainSpec]]) -> None:
    """The pair-level tables of the joined difficulty table must score the same pairs: with
    ``difficulty.bm25_list: run`` a function that scores the BM25 run's pairs (:func:`scores_run_pairs`) cannot be
    joined with a pair-level one that does not (:func:`curricula.difficulty.combine_difficulty` would stop at run
    time; the query-level ones join any rows)."""
    settings = config["difficulty"]
    if settings["bm25_list"] != "run":
        return
    pairs = [f for f in joined_functions(config, runs_of) if lookup(f).pair_level]
    run = [f for f in pairs if scores_run_pairs(f, function_knobs(f, settings, config["pipeline_seed"]))]
    lacking = [f for f in pairs if f not in run]
    if run and lacking:
        chosen = settings["functions"]
        value = "null: the functions the experiments consume" if chosen is None else f"now {chosen!r}"
        raise ValueError(
            f"difficulty.functions: with difficulty.bm25_list: run, the tables of {', '.join(run)} hold the BM25 "
            f"run's training pairs too and those of {', '.join(lacking)} (registered without run_pairs) do not, so "
            f"they cannot be joined: list difficulty.functions without {', '.join(lacking)} ({value}), or set "
            "difficulty.bm25_list: candidates")


def check_references(config: Mapping[str, Any]) -> None:
    """The reference ranker bm25_tuned needs the tuning (rule bm25_tune) enabled."""
    if "bm25_tuned" in config["evaluate"]["references"] and not config["bm25"]["tune"]["enabled"]:
        raise ValueError("evaluate.references names bm25_tuned but bm25.tune.enabled is false; enable the tuning "
                         "or drop bm25_tuned from evaluate.references")


def sequential_looks(settings: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The looks of a sequential study (``study.sequential.looks`` capped by ``study.max_seeds``,
    :func:`curricula.study.looks.study_looks`), or None when it trains every seed of ``seeds``. ``settings`` is
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

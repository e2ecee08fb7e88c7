"""The step budget of a run's fit: how many steps it trains (``max_steps``, null = ``steps``), after which step
early stopping counts evaluations and the weight average takes weights in (the end of the curriculum phase).

No torch here, as in :mod:`curricula.training.checks`: :meth:`curricula.training.core.FitConfig.of` reads a run's
:class:`~curricula.training.spec.FitSpec` through these functions.
"""

from __future__ import annotations

from curricula.training.checks import check_min_steps
from curricula.training.spec import FitSpec


def budget(fit: FitSpec, length: int | None = None) -> tuple[int, int]:
    """(budget, least) in steps of a fit: ``max_steps`` (null = ``steps``) and the step after which early stopping
    counts evaluations (the curriculum's ``length``, default ``steps``, capped at the budget, when ``patience`` is
    on; else 0).

    A ``max_steps`` below ``steps`` would cut the curriculum short, and with ``patience`` a ``min_steps`` (the
    grid's longest curriculum, :func:`curricula.experiments.specs.experiment_runs`) above the budget would leave
    early stopping nothing to count: ValueError for both."""
    total = total_steps(fit)
    if not fit.patience:
        return total, 0
    return total, phase_end(fit, total, length)


def total_steps(fit: FitSpec) -> int:
    """A fit's budget in steps: ``max_steps`` (null = ``steps``); ValueError when below ``steps`` (it would cut the
    curriculum short)."""
    total = int(fit.max_steps or fit.steps)
    if total < fit.steps:
        raise ValueError(f"max_steps={total} is below steps={fit.steps}: the budget must cover the curriculum")
    return total


def phase_end(fit: FitSpec, total: int, length: int | None = None) -> int:
    """The step (steps done) at which the curriculum phase of a fit with budget ``total`` ends: its ``length``
    (default ``steps``; the pipeline passes the grid's longest curriculum, ``min_steps``), capped at the budget.
    ValueError when the fit's ``min_steps`` lies above the budget (:func:`check_min_steps`)."""
    check_min_steps(fit.min_steps, total)
    return min(total, fit.steps if length is None else int(length))


def average_start(fit: FitSpec, length: int | None = None) -> int:
    """The step (steps done) after which a fit's weight average takes weights in: the end of the curriculum phase
    (:func:`phase_end`; the pipeline's ``min_steps``, the grid's longest curriculum, so that every arm averages
    the same phase of training, never one arm's easy-only data), 0 without ``averaging`` or the diagnostic
    ``diagnostic_averages`` (:attr:`curricula.training.core.FitConfig.shadow_averages`), which start at the same step.

    Izmailov et al. 2018 ("Averaging Weights Leads to Wider Optima and Better Generalization", UAI) start SWA
    after a burn-in of ordinary training; starting at the longest curriculum's end is that burn-in here."""
    if not fit.averages and not fit.diagnostic_averages:
        return 0
    return phase_end(fit, total_steps(fit), length)

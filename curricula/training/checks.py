"""Checks of a run's fit that the config resolution (before any job) and the training core (in the job) share.

No torch here: :mod:`curricula.experiments.specs` runs them while Snakemake parses the workflow.
"""

from __future__ import annotations


def check_keep(keep: str, patience: int | None) -> None:
    """ValueError when ``keep`` (:attr:`curricula.training.core.FitConfig.keep`) is ``last`` beside ``patience`` (None
    or 0 = off): early stopping selects a model on dev, which keeping the weights after the whole budget forgoes."""
    if keep == "last" and patience:
        raise ValueError(f"keep last with patience={patience}: early stopping selects a model on dev; set patience "
                         f"null to keep the weights after the whole budget")


def check_min_steps(min_steps: int | None, total: int) -> None:
    """ValueError when ``min_steps`` (None = unset) lies above the budget ``total`` (``max_steps``, null = steps)."""
    if min_steps is not None and int(min_steps) > total:
        raise ValueError(f"min_steps={int(min_steps)} is above max_steps={total} (the budget; null = steps): early "
                         f"stopping would count no evaluation; raise max_steps to at least {int(min_steps)}")

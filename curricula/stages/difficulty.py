"""The entry points of rules/difficulty.smk: one scoring function's table (rules ``difficulty_function`` and
``difficulty_test``) and the per-function tables joined into one (rule ``difficulty``). The scoring is
:mod:`curricula.difficulty`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from curricula.data.ingest import read_ingest
from curricula.difficulty import (
    INPUT_SPECS,
    combine_difficulty,
    difficulty_spec,
    function_difficulty,
    log_difficulty,
    needed_inputs,
)
from curricula.plumbing.contracts import read_table, write_table
from curricula.stages import Files


def difficulty_function(inputs: Files, outputs: Files, *, function: str, knobs: Mapping[str, Any],
                        relevant_min: int = 1, split: str = "train") -> pl.DataFrame:
    """Rule ``difficulty_function`` (and ``difficulty_test``, ``split="test"``): scoring function ``function``
    (:func:`curricula.difficulty.function_difficulty`; ``knobs`` its :func:`~curricula.difficulty.function_knobs`)
    over the split's pairs of the ingest tables, reading the extra input tables it needs, into output ``table``."""
    ingest = read_ingest(inputs)
    extra = {name: read_table(inputs[name], INPUT_SPECS[name]) for name in needed_inputs([function], knobs=knobs)}
    table = function_difficulty(ingest, extra, function, knobs, relevant_min=relevant_min, split=split)
    write_table(table, outputs["table"], difficulty_spec([function]))
    return table


def difficulty(inputs: Files, outputs: Files, *, functions: Sequence[str]) -> pl.DataFrame:
    """Rule ``difficulty``: the per-function tables (an input per function, named after it) joined into one row per
    training pair (:func:`curricula.difficulty.combine_difficulty`), output ``table``; logs the Spearman matrix."""
    functions = list(functions)
    table = combine_difficulty([read_table(inputs[f], difficulty_spec([f])) for f in functions], functions)
    write_table(table, outputs["table"], difficulty_spec(functions))
    log_difficulty(table, functions)
    return table

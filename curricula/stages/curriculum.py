"""The entry point of rules/curriculum.smk: rule ``curriculum``."""

from __future__ import annotations

import polars as pl

from curricula.curriculum.ordering import build_curriculum
from curricula.difficulty import difficulty_spec
from curricula.plumbing.contracts import read_table
from curricula.stages import Files


def curriculum(inputs: Files, outputs: Files, *, scoring: str, shard_size: int, seed: int) -> pl.DataFrame:
    """Rule ``curriculum``: the training instances of scoring function ``scoring``'s table (input ``table``) sorted
    easy -> hard, sharded into the folder ``shards`` (:func:`curricula.curriculum.ordering.build_curriculum`);
    returns the shard index."""
    table = read_table(inputs["table"], difficulty_spec([scoring]))
    return build_curriculum(table, outputs["shards"], scoring, shard_size=shard_size, seed=seed)

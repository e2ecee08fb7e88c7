"""The generic gather of a sharded table, the entry point several rule files share: ``gather_table.py`` runs rules
``bm25_candidate_scores`` (rules/bm25.smk), ``dense_neighbors`` (rules/dense.smk) and ``teacher_score``
(rules/teacher.smk). Being generic, it sits here rather than in the module of the lowest of those files."""

from __future__ import annotations

from pathlib import Path

from curricula.plumbing.gather import gather_shards
from curricula.stages import Files


def gather_table(inputs: Files, out_path: str | Path, *, table: str, k: int | None = None) -> int:
    """Join the shard tables of ``table`` (input ``shards``; a key of :data:`curricula.plumbing.gather.GATHERED` or
    :data:`~curricula.plumbing.gather.STREAMED`, ``k`` the per-query depth of the latter) into ``out_path``, exactly
    the unsharded stage's table; returns its number of rows."""
    return gather_shards(table, list(inputs["shards"]), out_path, k=k)

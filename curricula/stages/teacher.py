"""The entry points of rules/teacher.smk: the teacher's training and its sharded scoring (the scores' gather is
:func:`curricula.stages.common.gather_table`). The teacher is :mod:`curricula.models.teacher`'s; ``teacher`` params
are the rule's slice of the config's ``teacher`` section, to which the job's ``threads`` and ``seed`` are added."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from curricula.data.ingest import read_ingest
from curricula.models.teacher import fit_teacher, teacher_config, teacher_scores
from curricula.plumbing.contracts import TEACHER_SCORES, write_table
from curricula.plumbing.shards import parse_scatteritem
from curricula.stages import Files


def teacher_train(inputs: Files, outputs: Files, *, teacher: Mapping[str, Any], seed: int, relevant_min: int = 1,
                  threads: int | None = None) -> dict[str, Any]:
    """Rule ``teacher_train``: the teacher fine-tuned on the train split's candidate pairs of the ingest tables,
    saved to output ``model`` (:func:`curricula.models.teacher.fit_teacher`); returns its training stats."""
    cfg = teacher_config(dict(teacher, threads=threads), seed)
    return fit_teacher(read_ingest(inputs), outputs["model"], cfg, relevant_min)


def teacher_score_shard(inputs: Files, outputs: Files, *, teacher: Mapping[str, Any], seed: int,
                        relevant_min: int = 1, threads: int | None = None,
                        scatteritem: str | None = None) -> pl.DataFrame:
    """Rule ``teacher_score_shard``: the logit and loss of input ``model`` (the trained teacher) for the
    ``{scatteritem}`` shard's batches of candidates of every split (train cross-fitted when ``folds`` > 1:
    :func:`curricula.models.teacher.teacher_scores`) into output ``scores``."""
    cfg = teacher_config(dict(teacher, threads=threads), seed)
    scores = teacher_scores(read_ingest(inputs), inputs["model"], cfg, relevant_min, parse_scatteritem(scatteritem))
    write_table(scores, outputs["scores"], TEACHER_SCORES)
    return scores

"""A run's curriculum read back from a results tree, and its training instances as a ``datasets.Dataset``.

:func:`run_curriculum` gives what a trained run's curriculum is, from its ``config.json``: the curriculum folder
(``curricula/<scoring>/``, the training instances sorted easy -> hard), the resolved pacing, negatives and
MacAvaney's weighting (:class:`curricula.experiments.spec.Arm`), the batch size and loss. :func:`instance_dataset`
builds the instances as sentence-transformers' trainer reads them: row ``i`` is curriculum position ``i`` (the
index :class:`curricula.ecosystem.sentence_transformers.CurriculumBatchSampler` draws), columns ``query``,
``positive``, ``negative_1`` ... ``negative_m`` (texts; a dialogue context is its turns joined by newlines) and,
with MacAvaney's weighting, ``label`` (the trainer's label column): the ease D in [0, 1] (1 = easy) of each loss
element, the positive's and each negative's for a pointwise loss, each (positive, negative) pair's for a pairwise
one (:meth:`curricula.curriculum.weighting.PairEase.ease`).

The negatives are the pipeline's (:class:`curricula.curriculum.negatives.NegativeSampler`, the run's mode and
``m``): HCL's instance level draws them from the top k = 10^h_p(t) dense neighbours with the false-negative guard
(never a neighbour scoring above ``ratio`` x G(c, r+)), BM25's from the run, ``candidates`` from the query's own
list. A dataset holds one draw per instance, at one step ``t`` of the run (its last by default: HCL's smallest,
hardest window); the pipeline draws anew at every step, so training on the dataset sees fixed negatives.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from curricula.curriculum.negatives import NegativeSampler
from curricula.curriculum.ordering import Curriculum
from curricula.curriculum.weighting import PairEase
from curricula.difficulty import difficulty_spec
from curricula.ecosystem.frames import read_data
from curricula.ecosystem.runs import run_spec
from curricula.experiments.spec import Arm, TrainSpec
from curricula.experiments.specs import needed_tables
from curricula.plumbing.contracts import read_table
from curricula.plumbing.layout import Layout


@dataclass(frozen=True)
class RunCurriculum:
    """A trained run's curriculum in the results folder ``root``: its ``spec`` (parsed from ``config.json``), the
    ``seed`` it trained with and the ``folder`` of its curriculum's shards."""

    root: Path
    experiment: str
    seed: int
    spec: TrainSpec

    @property
    def arm(self) -> Arm:
        """The resolved curriculum: scoring, pacing, negatives, weighting and the length they were resolved on."""
        return self.spec.arm

    @property
    def folder(self) -> Path:
        """The curriculum's folder: its shards in easy -> hard order and their index."""
        return Path(Layout.at(self.root).curriculum(self.arm.scoring))

    def curriculum(self) -> Curriculum:
        """The read side of the curriculum's folder."""
        return Curriculum(self.folder)

    def table_paths(self) -> dict[str, Path]:
        """The extra tables the run's negatives and weights read (as its train job got them): ``weights`` (the
        weighting function's difficulty table), ``neighbors``, ``run``, ``query_vectors``, ``doc_vectors``."""
        layout = Layout.at(self.root)
        dense = layout.dense()
        paths = {"neighbors": dense["neighbors"], "run": layout.bm25()["run"], "query_vectors": dense["queries"],
                 "doc_vectors": dense["docs"]}
        if self.arm.weighting is not None:
            paths["weights"] = layout.difficulty_function(self.arm.weighting.scoring)
        return {name: Path(paths[name]) for name in sorted(needed_tables(self.spec))}


def run_curriculum(root: str | Path, experiment: str, seed: int) -> RunCurriculum:
    """The curriculum of ``experiment``'s run for ``seed`` in the results folder ``root`` (``results/<dataset>``);
    a tuned experiment's is that of the run chosen on dev (:func:`curricula.ecosystem.runs.run_spec`)."""
    return RunCurriculum(Path(root), experiment, int(seed), run_spec(root, experiment, seed))


def negative_sampler(run: RunCurriculum, data: dict[str, pl.DataFrame], relevant_min: int = 1) -> NegativeSampler:
    """The run's negative sampler (its mode, ``m``, instance pacing and guard) over the ingest frames ``data``,
    seeded with the run's seed; neighbours, BM25 run and vectors read lazily from the results tree."""
    tables: dict[str, Any] = {name: path for name, path in run.table_paths().items() if name != "weights"}
    return NegativeSampler(run.arm.negatives, queries=data["queries"], docs=data["docs"], qrels=data["qrels"],
                           candidates=data["candidates"], relevant_min=relevant_min, seed=run.seed, **tables)


def draw_negatives(instances: pl.DataFrame, sampler: NegativeSampler, step: int) -> tuple[np.ndarray, np.ndarray]:
    """(doc codes (N, m), fell back (N,)) of one draw of ``m`` negatives per instance (qid, positive docid) at
    ``step``, as the pipeline draws them (:meth:`curricula.curriculum.negatives.NegativeSampler.sample`)."""
    codes = sampler.sample(instances["qid"].to_list(), step)
    return codes, sampler.last_fallback.copy()


def ease_matrix(run: RunCurriculum, sampler: NegativeSampler, instances: pl.DataFrame, negatives: np.ndarray,
                fallback: np.ndarray) -> np.ndarray:
    """MacAvaney's ease D (1 = easy) of each loss element of each instance: (N, 1 + m) for a pointwise loss, (N, m)
    for a pairwise one (:meth:`curricula.curriculum.weighting.PairEase.ease`). ValueError without a weighting."""
    weighting = run.arm.weighting
    if weighting is None:
        raise ValueError(f"{run.experiment}: its curriculum has no weighting, so its instances have no ease")
    table = read_table(run.table_paths()["weights"], difficulty_spec([weighting.scoring]))
    ease = PairEase.from_weighting(table, weighting, sampler.q_of, sampler.code_of, len(sampler.docids))
    q = np.array([sampler.q_of[x] for x in instances["qid"].to_list()], dtype=np.int64)
    positives = np.array([sampler.code_of[d] for d in instances["docid"].to_list()], dtype=np.int64)
    group = np.concatenate([positives[:, None], negatives], axis=1)
    return ease.ease(q, group, run.spec.objective.loss, fallback)


def instance_table(run: RunCurriculum, step: int | None = None, relevant_min: int = 1) -> pl.DataFrame:
    """Every training instance of the run's curriculum in position order with its negatives drawn at ``step``
    (default: the run's last curriculum step, ``arm.length - 1``): ``position, qid, docid, query, positive,
    negative_1..m`` (texts), ``negative_docids`` and, with a weighting, ``ease`` (:func:`ease_matrix`)."""
    data = read_data(run.root)
    curriculum = run.curriculum()
    instances = curriculum.take(np.arange(len(curriculum)))
    sampler = negative_sampler(run, data, relevant_min)
    step = run.arm.length - 1 if step is None else step
    negatives, fallback = draw_negatives(instances, sampler, step)
    queries = dict(zip(data["queries"]["qid"].to_list(), data["queries"]["text"].to_list()))
    texts = data["docs"]["text"].to_list()
    columns: dict[str, Any] = {
        "position": instances["position"], "qid": instances["qid"], "docid": instances["docid"],
        "query": [queries[q] for q in instances["qid"].to_list()],
        "positive": [texts[sampler.code_of[d]] for d in instances["docid"].to_list()]}
    for j in range(negatives.shape[1]):
        columns[f"negative_{j + 1}"] = [texts[c] for c in negatives[:, j]]
    columns["negative_docids"] = [[sampler.docids[c] for c in row] for row in negatives.tolist()]
    if run.arm.weighting is not None:
        columns["ease"] = ease_matrix(run, sampler, instances, negatives, fallback).tolist()
    return pl.DataFrame(columns)


def trainer_columns(table: pl.DataFrame) -> pl.DataFrame:
    """The trainer's columns of an :func:`instance_table`, in order: ``query``, ``positive``, ``negative_1`` ...
    and, where the table has an ``ease``, ``label`` (the trainer's label column) holding it."""
    negatives = sorted((c for c in table.columns if c.startswith("negative_") and c[9:].isdigit()),
                       key=lambda c: int(c[9:]))
    label = [pl.col("ease").alias("label")] if "ease" in table.columns else []
    return table.select("query", "positive", *negatives, *label)


def instance_dataset(run: RunCurriculum, step: int | None = None, relevant_min: int = 1) -> Any:
    """The run's instances (:func:`instance_table`) as a ``datasets.Dataset`` of the trainer's columns
    (:func:`trainer_columns`), row ``i`` = curriculum position ``i``."""
    from datasets import Dataset

    return Dataset.from_polars(trainer_columns(instance_table(run, step, relevant_min)))

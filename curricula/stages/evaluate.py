"""The entry point of rules/evaluate.smk: rules ``evaluate`` (a trained model), ``evaluate_reference`` (BM25's
scores) and ``evaluate_reference_additive`` (the teacher's, also interpolated with BM25). The re-ranking and its
metrics are :mod:`curricula.evaluation.rerank`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from curricula.data.ingest import read_ingest
from curricula.evaluation.rerank import evaluation_pairs, model_scores, reference_scores, write_evaluations
from curricula.stages import Files
from curricula.training.spec import Runtime


def evaluate(inputs: Files, outputs: Files, *, wildcards: Mapping[str, str], measures: Sequence[str],
             relevant_min: int, seed: int, knobs: Mapping[str, Any] | None = None,
             additivity: Mapping[str, Any] | None = None, threads: int | None = None) -> pl.DataFrame:
    """Score the test candidates of the ingest tables with input ``model`` (a trained ranker; ``knobs`` its scoring
    knobs, to which ``threads`` is added) or input ``scores`` (a reference ranker's), and write the TREC run and
    per-query metrics (outputs ``run``, ``metrics``) tagged with the run (wildcards experiment and seed) or the
    ``reference``; with ``additivity`` also the interpolation with input ``bm25``
    (:func:`curricula.evaluation.rerank.write_evaluations`). Returns the test metrics."""
    tag = wildcards.get("reference") or f"{wildcards['experiment']}.seed{wildcards['seed']}"
    data = read_ingest(inputs)
    pairs = evaluation_pairs(data, relevant_min, additive=bool(additivity))
    if "model" in set(inputs.keys()):  # a Snakemake Namedlist's `in` looks at its values
        scored = model_scores(inputs["model"], pairs, Runtime.of_section(knobs or {}, threads),
                              (knobs or {}).get("score_batch_size", 128), (knobs or {}).get("max_length"))
    else:
        scored = reference_scores(inputs["scores"], pairs)
    bm25 = reference_scores(inputs["bm25"], pairs) if additivity else None
    return write_evaluations(scored, pairs, data["qrels"], outputs, tag=tag, measures=measures,
                             relevant_min=relevant_min, seed=seed, additivity=additivity, bm25=bm25)

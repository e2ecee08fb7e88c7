"""The ingest stage's four tables: load the configured dataset, split, filter and write them; read them back.

Everything is checked before anything is written, and each table is written atomically, so a failed ingest
leaves no Parquet behind (Snakemake also removes the outputs of a failed job). Every later stage reads the tables
with :func:`read_ingest` and, where it scores (query, candidate) pairs, builds them with :func:`candidate_pairs`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from curricula.data import get_loader
from curricula.data.base import RankingData, fill_missing_splits, filter_queries
from curricula.plumbing.contracts import CANDIDATES, DOCS, QRELS, QUERIES, TableSpec, read_table, write_table

log = logging.getLogger(__name__)

#: the ingest tables by name, with their contracts (the keys of a stage's ``data`` inputs and of :func:`read_ingest`)
INGEST_TABLES: dict[str, TableSpec] = {"queries": QUERIES, "docs": DOCS, "qrels": QRELS, "candidates": CANDIDATES}


#: ``dataset.split.fractions`` when a config gives none (the schema's default)
DEFAULT_FRACTIONS = {"train": 0.8, "dev": 0.1, "test": 0.1}


def split_fractions(dataset: Mapping[str, Any]) -> dict[str, float]:
    """The split fractions of a ``dataset`` section (:data:`DEFAULT_FRACTIONS` when it gives none)."""
    return dict((dataset.get("split") or {}).get("fractions") or DEFAULT_FRACTIONS)


def load_loader_splits(dataset: Mapping[str, Any], seed: int) -> RankingData:
    """``dataset`` as its loader gives it, checked against the contract, before any query is filtered or split is
    carved: the splits it brings are the dataset's own (a loader that splits by itself, e.g. chitchat by
    conversation, takes ``fractions`` and ``seed``)."""
    fmt = dataset["format"]
    loader = get_loader(fmt)
    options = dict(dataset.get("options") or {})
    params = inspect.signature(loader).parameters
    if "fractions" in params:
        options.setdefault("fractions", split_fractions(dataset))
    if "seed" in params:
        options.setdefault("seed", seed)
    data = loader(dict(dataset.get("files") or {}), **options)
    return data.validate(f"{fmt} dataset '{dataset['name']}'")


def seed_draws_splits(dataset: Mapping[str, Any]) -> bool:
    """Whether the pipeline seed draws which queries of ``dataset`` (a config's ``dataset`` section) are in which
    split, so that another seed makes another carve: a re-split dataset (``split.resplit``), a loader that splits by
    itself with a seed (chitchat), or one that leaves a split with a positive fraction to be carved out of train (as
    WikiQA's loader leaves test) or brings no split at all. False when its loader brings every split the fractions
    ask for as its own (loads the dataset to see which it brings)."""
    if (dataset.get("split") or {}).get("resplit"):
        return True
    if "seed" in inspect.signature(get_loader(dataset["format"])).parameters:
        return True
    given = {split for split, n in load_loader_splits(dataset, 0).split_counts().items() if n}
    wanted = {split for split, fraction in split_fractions(dataset).items() if fraction > 0}
    return len(given) <= 1 or not wanted <= given


def load_configured(dataset: Mapping[str, Any], seed: int) -> RankingData:
    """Load ``dataset`` (the config's ``dataset`` section) into the ingest contract.

    Loaders that split by themselves (e.g. chitchat splits by conversation) take ``fractions`` and ``seed``;
    every other dataset keeps its own splits, and missing ones are carved out of train by query (or all queries
    are re-split with ``split.resplit``), from the queries ``keep_queries`` kept (so that a dropped query never moves
    another between splits; ``split.carve_from: all`` carves from every query, then filters).
    """
    fmt = dataset["format"]
    split_cfg = dataset.get("split") or {}
    fractions = split_fractions(dataset)
    data = load_loader_splits(dataset, seed)
    log.info("loaded %s: %d queries %s, %d docs, %d qrels, %d candidates", fmt, data.queries.height,
             data.split_counts(), data.docs.height, data.qrels.height, data.candidates.height)
    def keep(data: RankingData) -> tuple[RankingData, list[str]]:
        data, note = filter_queries(data, dataset.get("keep_queries", "with_positive"), dataset.get("relevant_min", 1))
        return data, [note] if note else []

    def carve(data: RankingData) -> tuple[RankingData, list[str]]:
        return fill_missing_splits(data, fractions, seed, resplit=bool(split_cfg.get("resplit", False)))

    # carve_from kept: keep_queries first, so that a query it drops never takes part in carving the splits
    for step in (keep, carve) if split_cfg.get("carve_from", "kept") == "kept" else (carve, keep):
        data, notes = step(data)
        for note in notes:
            log.info("%s; queries per split: %s", note, data.split_counts())
    log.info("queries per split, as ingested: %s", data.split_counts())
    empty = [s for s, n in data.split_counts().items() if n == 0]
    if empty:
        raise ValueError(f"dataset '{dataset['name']}' has no queries in split(s) {empty} after filtering")
    return data


def write_ingest(data: RankingData, outputs: Mapping[str, str | Path]) -> None:
    """Write the four tables to the paths in ``outputs`` (keys queries, docs, qrels, candidates)."""
    for name, (df, spec) in data.tables().items():
        write_table(df, outputs[name], spec)
        log.info("wrote %s: %d rows -> %s", name, df.height, outputs[name])


def ingest_paths(folder: str | Path) -> dict[str, Path]:
    """The four ingest tables' files in ``folder`` (``<name>.parquet``, as rule ``ingest`` writes them under
    ``results/<dataset>/data``), keyed by table name for :func:`read_ingest`."""
    return {name: Path(folder) / f"{name}.parquet" for name in INGEST_TABLES}


def read_ingest(paths: Mapping[str, str | Path],
                columns: Mapping[str, list[str]] | None = None) -> dict[str, pl.DataFrame]:
    """The four ingest tables (queries, docs, qrels, candidates) from ``paths``, each checked against its contract.

    ``paths`` may hold more names (a rule's other inputs); only the ingest tables are read. ``columns`` limits
    what is read of some tables (e.g. ``{"queries": ["qid", "split", "text"]}``: no turns).
    """
    columns = columns or {}
    return {name: read_table(paths[name], spec, columns.get(name)) for name, spec in INGEST_TABLES.items()}


def candidate_pairs(
    data: Mapping[str, pl.DataFrame],
    splits: tuple[str, ...] = ("train",),
    relevant_min: int = 1,
) -> pl.DataFrame:
    """Every (query, candidate) pair of ``splits`` with its text and binary label, sorted by qid, docid.

    Columns qid, docid, split, context (the query text), response (the doc text), rel (1 when the qrel's grade is
    at least ``relevant_min``, else 0; unjudged candidates are 0). Judged relevant docs that are not candidates
    are added as candidates (a relevant doc must be rankable). ``data`` holds the ingest frames
    (:func:`read_ingest`).
    """
    queries, docs, qrels, candidates = (data[name] for name in INGEST_TABLES)
    chosen = queries.filter(pl.col("split").is_in(list(splits))).select("qid", "split", pl.col("text").alias("context"))
    qids = chosen["qid"].implode()  # only the chosen splits' rows are joined (dev pairs: a tenth of the table)
    relevant = qrels.filter((pl.col("rel") >= relevant_min) & pl.col("qid").is_in(qids)).select("qid", "docid")
    pairs = pl.concat([candidates.filter(pl.col("qid").is_in(qids)).select("qid", "docid"), relevant]).unique()
    labelled = pairs.join(relevant.with_columns(rel=pl.lit(1, pl.Int64)), on=["qid", "docid"], how="left")
    return (
        labelled.with_columns(pl.col("rel").fill_null(0))
        .join(chosen, on="qid")
        .join(docs.select("docid", pl.col("text").alias("response")), on="docid")
        .select("qid", "docid", "split", "context", "response", "rel")
        .sort("qid", "docid")
    )

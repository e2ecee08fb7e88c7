"""The ingest stage: load the configured dataset, give it train/dev/test, filter queries, write four tables.

Everything is checked before anything is written, and each table is written atomically, so a failed ingest
leaves no Parquet behind (Snakemake also removes the outputs of a failed job).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from curricula.data import get_loader
from curricula.data.base import RankingData, fill_missing_splits, filter_queries
from curricula.tables import write_table

log = logging.getLogger(__name__)


def load_configured(dataset: Mapping[str, Any], seed: int) -> RankingData:
    """Load ``dataset`` (the config's ``dataset`` section) into the ingest contract.

    Loaders that split by themselves (e.g. chitchat splits by conversation) take ``fractions`` and ``seed``;
    every other dataset keeps its own splits, and missing ones are carved out of train by query (or all queries
    are re-split with ``split.resplit``). Then ``keep_queries`` drops queries that cannot be evaluated.
    """
    fmt = dataset["format"]
    loader = get_loader(fmt)
    options = dict(dataset.get("options") or {})
    split_cfg = dataset.get("split") or {}
    fractions = dict(split_cfg.get("fractions") or {"train": 0.8, "dev": 0.1, "test": 0.1})
    params = inspect.signature(loader).parameters
    if "fractions" in params:
        options.setdefault("fractions", fractions)
    if "seed" in params:
        options.setdefault("seed", seed)
    data = loader(dict(dataset.get("files") or {}), **options)
    data = data.validate(f"{fmt} dataset '{dataset['name']}'")
    log.info("loaded %s: %d queries %s, %d docs, %d qrels, %d candidates", fmt, data.queries.height,
             data.split_counts(), data.docs.height, data.qrels.height, data.candidates.height)
    data, notes = fill_missing_splits(data, fractions, seed, resplit=bool(split_cfg.get("resplit", False)))
    for note in notes:
        log.info(note)
    data, note = filter_queries(data, dataset.get("keep_queries", "with_positive"), dataset.get("relevant_min", 1))
    if note:
        log.info(note)
    empty = [s for s, n in data.split_counts().items() if n == 0]
    if empty:
        raise ValueError(f"dataset '{dataset['name']}' has no queries in split(s) {empty} after filtering")
    return data


def write_ingest(data: RankingData, outputs: Mapping[str, str | Path]) -> None:
    """Write the four tables to the paths in ``outputs`` (keys queries, docs, qrels, candidates)."""
    for name, (df, spec) in data.tables().items():
        write_table(df, outputs[name], spec)
        log.info("wrote %s: %d rows -> %s", name, df.height, outputs[name])

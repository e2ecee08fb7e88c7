"""The entry point of rules/data.smk: rule ``ingest``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from curricula.data.ingest import load_configured, write_ingest
from curricula.stages import Files


def ingest(outputs: Files, *, dataset: Mapping[str, Any], seed: int) -> None:
    """Rule ``ingest``: load ``dataset`` (the config's ``dataset`` section; ``seed`` splits it where the dataset does
    not) into the ingest contract and write its four tables (outputs queries, docs, qrels, candidates)."""
    write_ingest(load_configured(dataset, seed), dict(outputs.items()))

"""Data (stage 1): loaders, one module per native format, the registry the ingest stage dispatches on, and the
ingest stage itself (:mod:`~curricula.data.ingest`: load, split, filter and write the four tables).

Every loader is ``load(files: Mapping[str, Any], **options) -> RankingData``; ``files`` maps a role (usually a
split name: train/dev/test) to a path, and options are the format's own knobs from ``dataset.options`` in
config. Loaders raise :class:`curricula.plumbing.errors.InputFormatError` (``path:line: problem``) on malformed
input.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from curricula.data.base import RankingData

#: format name -> module under curricula.data that defines ``load``
FORMATS: dict[str, str] = {
    "chitchat": "chitchat",
    "msdialog": "msdialog",
    "dailydialog_pp": "dailydialog_pp",
    "wikiqa": "wikiqa",
    "semeval_cqa": "semeval_cqa",
    "trec": "trec",
    "ir_datasets": "ir_datasets",
}


def get_loader(fmt: str) -> Callable[..., RankingData]:
    if fmt not in FORMATS:
        raise ValueError(f"unknown dataset format {fmt!r}; known formats: {sorted(FORMATS)}")
    module = importlib.import_module(f"curricula.data.{FORMATS[fmt]}")
    return module.load


def load(fmt: str, files: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> RankingData:
    """Load a dataset of format ``fmt`` and check its tables and cross-references."""
    data = get_loader(fmt)(files, **dict(options or {}))
    return data.validate(f"{fmt} dataset")

"""Logging for workflow scripts: to the rule's ``log:`` file and to stderr, with timestamps."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def setup_logging(log_file: str | Path | None, level: int = logging.INFO) -> logging.Logger:
    """Send ``logging`` records to ``log_file`` (created with its folder) and to stderr; return the root logger.

    Python warnings are captured too. Progress bars (tqdm) keep writing to stderr.
    """
    root = logging.getLogger()
    root.setLevel(level)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="w", encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(fmt)
        root.addHandler(handler)
    logging.captureWarnings(True)
    # faiss logs every instruction-set build it tries (and fails) to load at INFO; keep only its warnings
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    return root


class logged:
    """Context manager for a workflow script: set up logging, and log any exception before it propagates.

    ``with logged(snakemake.log[0]) as log: ...`` puts the error message (e.g. ``path:line: problem``) in the
    rule's log file as well as on the terminal.
    """

    def __init__(self, log_file: str | Path | None, name: str = "curricula") -> None:
        self.log_file = log_file
        self.name = name

    def __enter__(self) -> logging.Logger:
        setup_logging(self.log_file)
        return logging.getLogger(self.name)

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None:
            logging.getLogger(self.name).error("%s: %s", exc_type.__name__, exc)
        for handler in logging.getLogger().handlers:
            handler.flush()
        return False

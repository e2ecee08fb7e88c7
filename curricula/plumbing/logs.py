"""Logging for workflow scripts: to the rule's ``log:`` file and to stderr, with timestamps."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from curricula.plumbing.errors import DeviceError, InputFormatError, SchemaError

#: the errors that are the user's to fix (a malformed input file, a table off its contract, a device the job cannot
#: use): a job stops on them with their one-line message, no traceback
USER_ERRORS = (InputFormatError, SchemaError, DeviceError)


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

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        if exc is not None:
            logging.getLogger(self.name).error("%s: %s", exc_type.__name__, exc)
        for handler in logging.getLogger().handlers:
            handler.flush()
        if isinstance(exc, USER_ERRORS):
            raise SystemExit(1)  # the message is logged; a traceback would only bury it
        return False


#: a job log's line for a user's error, as :class:`logged` writes it
_USER_ERROR_LINE = re.compile(r" ERROR [\w.]+: (?:%s): (.*)$" % "|".join(e.__name__ for e in USER_ERRORS))


def failed_job_errors(snakemake_logs: str | Path | Sequence[str | Path]) -> list[str]:
    """``<rule>: <message> (log: <job log>)`` for each failed job of a Snakemake run whose log holds a user's error
    (:data:`USER_ERRORS`, logged by :class:`logged`), read from the run's main log (Snakemake's ``onerror`` gets
    its path, or a list of them); the Snakefile prints them last, so the screen ends on what to fix."""
    paths = [snakemake_logs] if isinstance(snakemake_logs, (str, Path)) else list(snakemake_logs)
    text = "\n".join(Path(path).read_text(encoding="utf-8", errors="replace") for path in paths
                     if Path(path).is_file())
    lines = []
    for rule, block in re.findall(r"Error in rule (\w+):\n((?:[ \t]+.*\n?)*)", text):
        logs = re.findall(r"^\s+log: (.+?)(?: \(check log file\(s\) for error details\))?$", block, flags=re.M)
        for job_log in (path for entry in logs for path in entry.split(", ")):
            if not Path(job_log).is_file():
                continue
            for line in Path(job_log).read_text(encoding="utf-8", errors="replace").splitlines():
                found = _USER_ERROR_LINE.search(line)
                if found:
                    lines.append(f"{rule}: {found.group(1)} (log: {job_log})")
    return list(dict.fromkeys(lines))

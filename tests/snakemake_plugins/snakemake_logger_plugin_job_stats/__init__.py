"""A Snakemake logger plugin for the end-to-end tests: every run's job statistics (the planned jobs per rule, what
Snakemake's "Job stats" table shows) as one machine-readable line, ``job-stats: {"ingest": 1, ..., "total": n}``, on
the stream Snakemake logs to (standard output in a dry run, standard error otherwise), beside its usual text.

Snakemake finds it by its module name (``snakemake_logger_plugin_<name>`` on the Python path) and uses it with
``--logger job-stats``; ``tests/workflow_run.py`` does both and reads the line back (``jobs_of``)."""

from __future__ import annotations

import json
import sys
from logging import LogRecord

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

#: how the line starts; what follows it is the JSON object of the run's job counts per rule, and ``total``
PREFIX = "job-stats: "
#: how a planned job's line starts: ``{"rule": name, "resources": {name: value, ...}}`` (its numbers and strings)
JOB_PREFIX = "job-resources: "


def plain_resources(resources) -> dict:
    """A job's resources as plain numbers and strings (``slurm_partition``), those Snakemake knows when it plans the
    job (not ``<TBD>``); Snakemake hands a Resources mapping or a plain dict."""
    items = resources.items() if hasattr(resources, "items") else ()
    plain = {name: getattr(value, "value", value) for name, value in items}
    return {name: value if isinstance(value, (int, float)) else str(value) for name, value in plain.items()
            if isinstance(value, (int, float, str)) and not isinstance(value, bool) and not name.startswith("_")
            and str(value) != "<TBD>"}


class LogHandler(LogHandlerBase):
    """Writes the job statistics of each RUN_INFO record Snakemake logs and each planned job's rule and resources
    (JOB_INFO records), and nothing else."""

    def emit(self, record: LogRecord) -> None:
        event = getattr(record, "event", None)
        if event == LogEvent.RUN_INFO and getattr(record, "stats", None) is not None:
            line = f"{PREFIX}{json.dumps(record.stats)}"
        elif event == LogEvent.JOB_INFO and getattr(record, "rule_name", None):
            job = {"rule": record.rule_name, "resources": plain_resources(getattr(record, "resources", {}))}
            line = f"{JOB_PREFIX}{json.dumps(job)}"
        else:
            return
        stream = sys.stdout if self.common_settings.stdout else sys.stderr
        # one write, starting a line of its own: the default handler may have written a message without its newline
        stream.write(f"\n{line}\n")
        stream.flush()

    @property
    def writes_to_stream(self) -> bool:
        return False  # beside Snakemake's own stream handler, which stays

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True  # emit() keeps only RUN_INFO and JOB_INFO records

    @property
    def has_formatter(self) -> bool:
        return True  # emit() formats its line itself

    @property
    def needs_rulegraph(self) -> bool:
        return False

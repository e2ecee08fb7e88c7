"""Job logs: a user's error (a malformed input) stops a workflow script with its one-line message and no traceback,
and the run's last screen lines repeat it with the job's log (the Snakefile's ``onerror``)."""

from __future__ import annotations

import logging

import pytest

from curricula.plumbing.errors import InputFormatError
from curricula.plumbing.logs import failed_job_errors, logged


def test_a_users_error_exits_with_its_message_logged_and_a_bug_keeps_its_traceback(tmp_path):
    log = tmp_path / "logs" / "ingest.log"
    with pytest.raises(SystemExit) as stop:
        with logged(log):
            raise InputFormatError("qrels.txt", 5, "expected 4 whitespace-separated fields, got 3")
    assert stop.value.code == 1
    assert "ERROR curricula: InputFormatError: qrels.txt:5: expected 4 whitespace-separated fields, got 3" in (
        log.read_text())
    with pytest.raises(KeyError):  # not the user's to fix: the traceback stays
        with logged(tmp_path / "other.log"):
            raise KeyError("x")
    logging.getLogger().handlers.clear()


def test_failed_job_errors_reads_each_failed_rules_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "ingest.log").write_text(
        "2026-11-29 03:52:56 INFO curricula: reading\n"
        "2026-11-29 03:52:56 ERROR curricula: InputFormatError: qrels.txt:5: rel must be an integer, got 'yes'\n")
    (tmp_path / "logs" / "train.log").write_text("2026-11-29 03:52:56 ERROR curricula: KeyError: 'x'\n")
    main = tmp_path / "run.snakemake.log"
    main.write_text(
        "Error in rule ingest:\n    message: None\n    jobid: 1\n"
        "    log: logs/ingest.log (check log file(s) for error details)\n"
        "Error in rule train:\n    jobid: 2\n    log: logs/train.log (check log file(s) for error details)\n"
        "Shutting down, this might take some time.\n")
    assert failed_job_errors([main]) == [
        "ingest: qrels.txt:5: rel must be an integer, got 'yes' (log: logs/ingest.log)"]
    assert failed_job_errors(tmp_path / "missing.log") == []

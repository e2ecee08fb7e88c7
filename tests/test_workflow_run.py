"""tests/workflow_run.py: ``jobs_of`` reads a run's planned jobs from the line the job-stats logger plugin
(tests/snakemake_plugins) writes, not from Snakemake's human-readable table."""

from __future__ import annotations

import re

import pytest

from tests.workflow_run import JOB_STATS, TINY_PRECOMPUTE, jobs_of, snakemake


def test_jobs_of_reads_the_last_job_stats_line_and_leaves_out_the_total():
    first = JOB_STATS + '{"ingest": 1, "bm25_index": 1, "total": 2}'
    last = JOB_STATS + '{"train": 2, "evaluate": 0, "all": 1, "total": 3}'
    assert jobs_of(f"Building DAG of jobs...\n{first}\nlocalrule ingest:\n{last}\ndone\n") == {"train", "all"}
    assert jobs_of(f"rule x:\n    jobid: 1\n{first}") == {"ingest", "bm25_index"}
    assert jobs_of("Nothing to be done (all requested files are present and up to date).\n") == set()
    # the table Snakemake prints for people is not read
    assert jobs_of("Job stats:\njob      count\n-------  -------\ningest         1\ntotal          1\n") == set()


@pytest.mark.slow
def test_a_dry_run_plans_the_jobs_it_lists(tiny_plans, tmp_path):
    """A dry run of the tiny config in an empty folder (the session's, ``tiny_plans``; it exited 0)."""
    planned = tiny_plans["tiny"]
    listed = set(re.findall(r"^(?:local)?rule (\w+):$", planned, flags=re.M))
    assert jobs_of(planned) == listed and {"ingest", "teacher_train", "train", "all"} <= listed
    until = snakemake(tmp_path, "-n", "--until", "ingest", config=TINY_PRECOMPUTE)
    assert until.returncode == 0 and jobs_of(until.stdout) == {"ingest"}, until.stderr[-3000:]
    # a target right after the helper's own options stays a target
    target = snakemake(tmp_path, "results/tiny/bm25/index", "-n", config=TINY_PRECOMPUTE)
    assert target.returncode == 0 and jobs_of(target.stdout) == {"ingest", "bm25_index"}, target.stderr[-3000:]

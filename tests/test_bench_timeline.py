"""bench/timeline.py reads job times and threads from Snakemake's own log format (a progress bar without a newline
may precede a time stamp)."""

from __future__ import annotations

from tests.conftest import script_module

LOG = """
[Thu Nov 26 04:54:17 2026]
localrule ingest:
    output: results/chitchat/data/queries.parquet
    log: logs/chitchat/ingest.log
    jobid: 3
    resources: tmpdir=/tmp
[Thu Nov 26 04:54:18 2026]
Finished jobid: 3 (Rule: ingest)
1 of 4 steps (25%) done

[Thu Nov 26 04:54:18 2026]
localrule teacher_train:
    jobid: 2
    threads: 2
    resources: tmpdir=/tmp
[Thu Nov 26 04:54:28 2026]
Finished jobid: 2 (Rule: teacher_train)

[Thu Nov 26 04:54:28 2026]
localrule train:
    jobid: 1
    wildcards: experiment=baseline, seed=1
[Thu Nov 26 04:54:28 2026]
localrule train:
    jobid: 5
    wildcards: experiment=baseline, seed=2
train: 100%|##########| 40/40 [00:05<00:00, 8.00step/s][Thu Nov 26 04:54:33 2026]
Finished jobid: 5 (Rule: train)
[Thu Nov 26 04:54:38 2026]
Finished jobid: 1 (Rule: train)
[Thu Nov 26 04:54:38 2026]
localrule all:
    jobid: 0
"""


def test_timeline_counts_threads_and_idle_core_seconds():
    timeline = script_module("bench/timeline")
    jobs = timeline.parse_jobs(LOG)
    assert [(j.rule, j.wildcards, j.threads) for j in jobs] == [
        ("ingest", "", 1), ("teacher_train", "", 2), ("train", "experiment=baseline, seed=1", 1),
        ("train", "experiment=baseline, seed=2", 1)]  # the unfinished `all` is left out
    u = timeline.utilisation(jobs, cores=2)
    # 21 s: ingest 1 s on one core, the teacher 10 s on two, two trainings 5 s together, then one alone for 5 s
    assert u["wall_s"] == 21 and u["core_s"] == 1 + 20 + 10 + 5
    assert u["seconds_a_core_idle"] == 1 + 5

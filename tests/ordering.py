"""The order the suite's tests are collected in, so that pytest-xdist's ``worksteal`` scheduler keeps its workers
busy to the end.

``worksteal`` gives each worker a contiguous share of the collection (the first ``n // workers`` tests to the first,
and so on) and lets a worker that runs dry take the second half of the longest queue, from its end. In file order the
longest tests (whole Snakemake runs, most of them in ``test_workflow.py``, late in the alphabet) fell into one
share and ran last: one worker went on alone for minutes after the other had finished. :func:`balanced_order`
deals the known long tests out longest first (each to the share with the least long-test time so far) and starts
each share with its own, so a worker's last tests are short ones, the kind the other can take over.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

#: seconds a worker spends on each of the suite's longest tests (their test function's name; every parametrisation
#: counts as that long), from ``--durations`` with two workers on a 2-core AMD EPYC (avx512_bf16, no amx), a study's
#: training beside them at nice 19, 2026-12-03. Only the order depends on them: a renamed test runs in file order.
LONGEST: dict[str, float] = {
    "test_a_second_run_from_scratch_with_every_stage_sharded_gives_identical_bytes": 245,
    "test_slurm_profile_run_equals_local_run": 200,
    "test_downstream_stages_rerun_only_what_a_knob_touches": 164,
    "test_the_walkthrough_runs_as_written": 162,
    "test_a_study_runs_every_dataset_and_adding_one_schedules_only_its_jobs": 152,
    "test_a_sequential_study_trains_the_next_round_only_for_undecided_cells": 135,
    "test_a_studys_jobs_get_their_gpus_through_slurm": 133,
    "test_g_rank_prints_the_same_ranks_before_and_after_for_one_run": 119,
    "test_active_learning_dag_writes_curves_table_and_figure": 101,
    "test_smoke_passes_on_the_cpu_and_fails_on_a_wrong_value": 75,
    "test_sigkill_mid_job_then_rerun_equals_uninterrupted": 60,
    "test_a_tuned_list_trains_each_value_and_adding_one_schedules_only_its_jobs": 52,
    "test_pip_resolves_each_file_to_exactly_its_pins": 48,
    "test_the_replication_config_lists_exactly_the_cells_the_committed_rounds_decided": 38,
    "test_the_package_type_checks": 32,
    "test_precompute_stages_run_and_rerun_only_what_a_knob_touches": 29,
    "test_a_dry_run_plans_a_grid_of_plugin_extensions": 29,
}


def worksteal_shares(count: int, workers: int) -> list[int]:
    """How many of ``count`` tests ``worksteal`` first hands each of ``workers`` workers: the first gets
    ``count // workers``, each next one an equal part of what is left (its ``check_schedule``)."""
    shares, left = [], count
    for remaining in range(workers, 0, -1):
        shares.append(left // remaining)
        left -= shares[-1]
    return shares


def balanced_order(names: Sequence[str], seconds: Mapping[str, float], workers: int,
                   waits: Collection[int] = ()) -> list[int]:
    """Indices of ``names`` (the collected tests' function names, in file order) in the order to run them on
    ``workers`` workers: the long tests (those ``seconds`` names) go longest first to the share whose long tests add
    up to least, as long as it has room; each share runs its long tests first, longest first, then short tests in file
    order. ``waits`` are the indices of tests that wait for an artefact the session builds once (the shared tiny run):
    the first share starts with its own longest test, the others with their longest that does not wait, so that one
    worker builds the artefact while the others work."""
    shares = worksteal_shares(len(names), workers)
    long = sorted((i for i, name in enumerate(names) if name in seconds), key=lambda i: (-seconds[names[i]], i))
    dealt: list[list[int]] = [[] for _ in shares]
    load = [0.0] * len(shares)
    for i in long:
        share = min((s for s in range(len(shares)) if len(dealt[s]) < shares[s]), key=lambda s: (load[s], s))
        dealt[share].append(i)
        load[share] += seconds[names[i]]
    short = iter(i for i, name in enumerate(names) if name not in seconds)
    order: list[int] = []
    for share, own in enumerate(dealt):
        if share and own:  # start with the longest that does not wait for the shared artefact, if any
            first = next((i for i in own if i not in waits), own[0])
            own = [first, *(i for i in own if i != first)]
        order += own + [next(short) for _ in range(shares[share] - len(own))]
    return order


__all__ = ["LONGEST", "balanced_order", "worksteal_shares"]

"""The tiny end-to-end workflow and a tiny study through a real SLURM cluster (profiles/slurm): what SLURM allocated
each job (the pretend GPU for the GPU rules only), and the files equal to a local --cores run.

Skipped with a message when slurm-wlm and munge are not installed or the test does not run as root (CI installs
them from Debian when it can: `.ci/run`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from curricula.pipeline.devices import GPU_RULES as DEVICE_RULES
from curricula.plumbing.layout import Layout
from tests.slurm_cluster import Cluster, missing_tools
from tests.workflow_run import REPO, TINY, TINY_PRECOMPUTE, copy_run, on_auto_devices, snakemake

pytestmark = pytest.mark.slow  # Snakemake runs of the tiny workflow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = missing_tools()
    if missing:
        pytest.skip(f"no SLURM here: {', '.join(missing)} not installed (apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("the single-node SLURM cluster needs root (munged, slurmctld and slurmd)")
    if Cluster.existing_configuration():
        pytest.skip(f"{Cluster.existing_configuration()} exists: this machine has its own SLURM set-up, which the "
                    "test will not replace")
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
    except Exception:
        c.stop()
        raise
    yield c
    c.stop()


def compared_files(root: Path) -> list[Path]:
    res = root / "results"
    files = [*res.rglob("*.parquet"), *res.rglob("*.run"), *res.rglob("*.trec"), *res.rglob("*.safetensors"),
             *res.rglob("table_*.md")]
    return sorted(p.relative_to(root) for p in files)


#: the rules whose jobs ask SLURM for the GPU (the neighbour search is a CPU job in the default CUDA 13 environment)
GPU_RULES = set(DEVICE_RULES) - {"dense_neighbors_shard"}
#: the pretend GPU cannot run anything: a job planned with it runs on the CPU with a warning instead of stopping
ON_PRETEND_GPU = {"gpus": {"missing": "cpu"}}


def through_slurm(cluster, workdir: Path, *targets: str, config: dict) -> tuple[str, list[dict]]:
    """Run the workflow in ``workdir`` through profiles/slurm on the test cluster; (its output, what SLURM allocated
    each of its jobs: rule, partition, gpus) once every job finished."""
    out = snakemake(workdir, "--profile", str(REPO / "profiles" / "slurm"), "--jobs", "4",
                    "--slurm-status-command", "squeue",  # no slurmdbd here, so no sacct
                    "--slurm-init-seconds-before-status-checks", "2", "--slurm-no-account",
                    "--slurm-logdir", str(workdir / "slurm-logs"), *targets, config=config)
    log_tail = (cluster.folder / "slurmctld.log").read_text()[-2000:] if out.returncode else ""
    assert out.returncode == 0, out.stderr[-4000:] + log_tail
    ids = [int(i) for i in re.findall(r"submitted with SLURM jobid (\d+)", out.stdout + out.stderr)]
    allocated = cluster.allocations()
    assert ids and set(ids) <= set(allocated), (ids, sorted(allocated))
    return out.stdout + out.stderr, [allocated[i] for i in ids]


def assert_gpu_jobs_got_the_gpu(jobs: list[dict], gpu_rules: set[str]) -> None:
    """Every job of a GPU rule was allocated the pretend GPU on the GPU partition; no other job got a card."""
    wrong = [job for job in jobs if (job["gpus"], job["partition"]) != ((1, "gpu") if job["rule"] in gpu_rules
                                                                        else (0, "cpu"))]
    assert not wrong, wrong
    assert {job["rule"] for job in jobs} & gpu_rules, jobs


def test_slurm_profile_run_equals_local_run(cluster, tiny_run, tmp_path):
    """The tiny DAG up to the baseline's test metrics and the teacher's scores (ingest, BM25, the teacher, the
    curriculum, training, evaluation: 11 jobs, four of them GPU rules) through the SLURM profile equals the local
    run's files byte for byte. SLURM itself (its controller's allocations) shows every job of a GPU rule allocated
    the pretend GPU on the GPU partition and no other job a card; a GPU job logs that it was planned with a card and
    saw none (``gpus.missing: cpu``, as the pretend card cannot run anything)."""
    local, slurm = tiny_run, tmp_path / "slurm"
    slurm.mkdir()
    layout = Layout("results", "tiny")
    targets = [layout.evaluate("baseline", 1)["metrics"], layout.teacher()["scores"]]
    output, jobs = through_slurm(cluster, slurm, *targets, config={**on_auto_devices(TINY_PRECOMPUTE), **ON_PRETEND_GPU})
    completed = (cluster.folder / "slurmctld.log").read_text().count("WEXITSTATUS 0")
    assert len(jobs) >= 10 and completed >= len(jobs), (len(jobs), completed)
    assert_gpu_jobs_got_the_gpu(jobs, set(GPU_RULES))
    assert {"train", "evaluate", "teacher_train", "teacher_score_shard"} <= {job["rule"] for job in jobs}
    train_log = (slurm / layout.log("train/baseline/seed=1")).read_text()
    assert "this job was planned with a GPU (resource gpu=1) but sees none usable" in train_log
    files = compared_files(slurm)
    assert set(files) <= set(compared_files(local)) and len(files) >= 10, files
    for rel in files:
        assert (local / rel).read_bytes() == (slurm / rel).read_bytes(), rel


def test_a_studys_jobs_get_their_gpus_through_slurm(cluster, tiny_run, tmp_path):
    """A one-dataset tiny study through the SLURM profile, on a copy of the session's tiny run (its data, BM25 and
    curriculum reused; the training runs again, as ``device: auto`` is a new param of it): its renamed rules
    (``tiny_train``, ``tiny_evaluate``) get the profile's GPU entries, allocated by SLURM like the single run's; its
    CPU rules (the ledger entry, the findings page) no card. (The single run's test above has the CPU stages before
    training, ingest first, run through SLURM from an empty folder.)"""
    claims = {"additivity": {"paper": "Yang et al. 2019", "claim": "interpolating BM25 helps",
                             "experiment": "baseline+bm25", "against": "baseline", "expect": "better",
                             "factors": ["additivity"]}}
    study = {**{k: v for k, v in on_auto_devices(TINY_PRECOMPUTE).items() if k not in ("dataset", "difficulty")},
             **ON_PRETEND_GPU, "study": {"datasets": {"tiny": {"dataset": TINY["dataset"]}}, "claims": claims}}
    wd = copy_run(tiny_run, tmp_path / "run")
    _, jobs = through_slurm(cluster, wd, config=study)
    assert_gpu_jobs_got_the_gpu(jobs, {f"tiny_{rule}" for rule in GPU_RULES})
    assert {job["rule"] for job in jobs} == {"tiny_train", "tiny_evaluate", "study_ledger_entry", "report_study"}
    assert (wd / "results" / "report" / "study" / "findings.md").is_file()

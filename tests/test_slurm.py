"""The tiny end-to-end workflow through a real SLURM cluster (profiles/slurm) equals a local --cores run.

Skipped with a message when slurm-wlm and munge are not installed or the test does not run as root (CI installs
them from Debian when it can: `.ci/run`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from curricula.plumbing.layout import Layout
from tests.slurm_cluster import Cluster, missing_tools
from tests.workflow_run import REPO, TINY_PRECOMPUTE, on_auto_devices, snakemake

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


def test_slurm_profile_run_equals_local_run(cluster, tiny_run, tmp_path):
    """The tiny DAG up to the baseline's test metrics and the teacher's scores (ingest, BM25, the teacher, the
    curriculum, training, evaluation: 11 jobs, four of them GPU rules) through the SLURM profile equals the local
    run's files byte for byte. GPU rules ask the cluster for the pretend GPU (``device: auto``: the profile gives
    those rules a GPU, which the run refuses for jobs pinned to the CPU)."""
    local, slurm = tiny_run, tmp_path / "slurm"
    slurm.mkdir()
    layout = Layout("results", "tiny")
    targets = [layout.evaluate("baseline", 1)["metrics"], layout.teacher()["scores"]]
    out = snakemake(slurm, "--profile", str(REPO / "profiles" / "slurm"), "--jobs", "4",
                    "--slurm-status-command", "squeue",  # no slurmdbd here, so no sacct
                    "--slurm-init-seconds-before-status-checks", "2", "--slurm-no-account",
                    "--slurm-logdir", str(slurm / "slurm-logs"), *targets, config=on_auto_devices(TINY_PRECOMPUTE))
    log_tail = (cluster.folder / "slurmctld.log").read_text()[-2000:] if out.returncode else ""
    assert out.returncode == 0, out.stderr[-4000:] + log_tail
    # every job went through sbatch and finished in the cluster, the GPU rules' on the GPU partition
    submitted = (out.stdout + out.stderr).count("submitted with SLURM jobid")
    completed = (cluster.folder / "slurmctld.log").read_text().count("WEXITSTATUS 0")
    assert submitted >= 10 and completed == submitted, (submitted, completed)
    files = compared_files(slurm)
    assert set(files) <= set(compared_files(local)) and len(files) >= 10, files
    for rel in files:
        assert (local / rel).read_bytes() == (slurm / rel).read_bytes(), rel

"""A real single-node SLURM cluster on localhost (Debian's slurm-wlm + munge), for tests/test_slurm.py.

Starts munged (if it is not running), then slurmctld and slurmd with a slurm.conf written into a scratch folder
(state, spool, pid and log files all live there), with two partitions named like the ones in profiles/slurm
(`cpu` and `gpu`) and one pretend GPU (a gres backed by /dev/null), so GPU requests are scheduled for real. The
gres has ``Flags=no_gpu_env``: SLURM does not set CUDA_VISIBLE_DEVICES for it, so the jobs run on the CPU (a job
that is told it has a GPU and cannot use it stops, by design: curricula.models.device). Needs root (munged runs as
the munge user, the daemons as root).

What each job was allocated is read from SLURM itself (:meth:`Cluster.allocations`): the controller logs every GRES
allocation (``DebugFlags=Gres``) and every job's partition, and keeps finished jobs' records (``MinJobAge``) where
``scontrol show job`` reads the rule Snakemake's plugin wrote into the job's comment.

The configuration goes to SLURM's default path ``/etc/slurm/slurm.conf`` (and ``gres.conf``), written only when no
configuration is there and removed by :meth:`Cluster.stop`: the job-step side of Snakemake's SLURM plugin drops
every inherited ``SLURM_*`` variable before its nested ``srun``, ``SLURM_CONF`` included, so a configuration
elsewhere is not found inside the jobs ("srun: fatal: Could not establish a configuration source").
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

ETC = Path("/etc/slurm")
NEEDED = ("slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "munged", "munge", "unmunge")


def missing_tools() -> list[str]:
    """The SLURM and munge programs this machine lacks (``apt-get install slurm-wlm munge`` provides them)."""
    sbin = "/usr/sbin:/sbin:" + os.environ.get("PATH", "")
    return [t for t in NEEDED if shutil.which(t, path=sbin) is None]


def _which(tool: str) -> str:
    return shutil.which(tool, path="/usr/sbin:/sbin:" + os.environ.get("PATH", "")) or tool


def _munge_works() -> bool:
    try:
        cred = subprocess.run([_which("munge"), "-n"], capture_output=True, timeout=10)
        if cred.returncode:
            return False
        return subprocess.run([_which("unmunge")], input=cred.stdout, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def start_munge() -> None:
    """A munge key owned by the munge user and a running munged (left running: other users may share it)."""
    if _munge_works():
        return
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        subprocess.run([_which("mungekey"), "--create", "--keyfile", str(key)], check=True)
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    for folder in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, "munge", "munge")
    subprocess.run(["runuser", "-u", "munge", "--", _which("munged")], check=True)
    for _ in range(50):
        if _munge_works():
            return
        time.sleep(0.2)
    raise RuntimeError("munged started but `munge -n | unmunge` still fails")


def slurm_conf(folder: Path, host: str, cpus: int, memory_mb: int) -> str:
    return f"""ClusterName=curricula
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
MailProg=/bin/true
MinJobAge=3600
SchedulerParameters=sched_interval=2
EnforcePartLimits=ALL
GresTypes=gpu
DebugFlags=Gres
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} Gres=gpu:a100:1 State=UNKNOWN
PartitionName=cpu Nodes={host} Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes={host} MaxTime=INFINITE State=UP
"""


class Cluster:
    """slurmctld + slurmd on localhost; ``env`` points SLURM clients (sbatch, squeue) at its slurm.conf."""

    def __init__(self, folder: Path, cpus: int = 4, memory_mb: int = 22000):
        self.folder = Path(folder)
        self.host = socket.gethostname().split(".")[0]
        self.conf = ETC / "slurm.conf"
        self.gres = ETC / "gres.conf"
        self.cpus, self.memory_mb = cpus, memory_mb
        self.env = dict(os.environ)
        self.written: list[Path] = []

    @staticmethod
    def existing_configuration() -> Path | None:
        """A SLURM configuration this machine already has (then the test must not start its own cluster)."""
        for path in (ETC / "slurm.conf", ETC / "gres.conf"):
            if path.exists():
                return path
        return None

    def start(self, timeout: float = 60) -> None:
        for sub in ("state", "spool"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        if self.existing_configuration():
            raise RuntimeError(f"{self.existing_configuration()} exists: not replacing a real SLURM configuration")
        ETC.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(slurm_conf(self.folder, self.host, self.cpus, self.memory_mb))
        self.gres.write_text("Name=gpu Type=a100 File=/dev/null Count=1 Flags=no_gpu_env\n")
        self.written = [self.conf, self.gres]
        start_munge()
        subprocess.run([_which("slurmctld"), "-c"], env=self.env, check=True)  # -c: clean state
        subprocess.run([_which("slurmd")], env=self.env, check=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = subprocess.run([_which("sinfo"), "-h", "-o", "%t"], env=self.env, capture_output=True, text=True)
            if state.returncode == 0 and state.stdout.split() and all(s == "idle" for s in state.stdout.split()):
                return
            time.sleep(1)
        raise RuntimeError(f"the node never became idle; see {self.folder}/slurmctld.log and slurmd.log")

    def stop(self) -> None:
        for name in ("slurmd", "slurmctld"):
            pid_file = self.folder / f"{name}.pid"
            if pid_file.exists():
                try:
                    os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
                except (ValueError, ProcessLookupError):
                    pass
        time.sleep(1)
        for path in self.written:
            path.unlink(missing_ok=True)
        self.written = []

    def allocations(self) -> dict[int, dict[str, object]]:
        """{job id: {"rule", "partition", "gpus"}} of every job the cluster ran, from SLURM itself: ``scontrol show
        job`` gives the partition and the rule Snakemake's plugin wrote into the job's comment
        (``rule_<name>_wildcards_...``); the controller's log the GPUs allocated (the ``gres_job_state`` block of a
        GRES allocation, logged with ``DebugFlags=Gres``)."""
        shown = subprocess.run([_which("scontrol"), "show", "job", "-o"], env=self.env, capture_output=True, text=True,
                               check=True).stdout
        jobs: dict[int, dict[str, object]] = {}
        for line in shown.splitlines():
            job = re.search(r"JobId=(\d+) ", line)
            rule = re.search(r" Comment=rule_(\w+?)(?:_wildcards_\S*)? ", line)
            partition = re.search(r" Partition=(\S+) ", line)
            if job:
                jobs[int(job.group(1))] = {"rule": rule and rule.group(1), "partition": partition and partition.group(1),
                                           "gpus": 0}
        log = (self.folder / "slurmctld.log").read_text()
        for job, count in re.findall(r"gres_job_state gres:gpu\S* type:\S+ job:(\d+) flags:.*\n(?:.*\n){0,3}?"
                                     r".*gres_cnt_node_alloc\[0\]:(\d+)", log):
            if int(job) in jobs:
                jobs[int(job)]["gpus"] = int(count)
        return jobs

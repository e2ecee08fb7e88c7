"""Device choice without a GPU: card counting, one card per job, a GPU a job was given and cannot use, the ``gpu``
resource of the rules, and a profile that gives a GPU to CPU jobs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from curricula.experiments.spec import TrainSpec, parse_train_spec
from curricula.models import device as device_mod
from curricula.models.device import describe, device_record, select_device
from curricula.pipeline.devices import GPU_RULES as DEVICE_RULES
from curricula.pipeline.devices import gpus, local_gpu_cap, profile_gpu_conflicts, rule_devices, study_overwrites
from curricula.plumbing.errors import DeviceError
from curricula.plumbing import gpus as gpus_mod
from curricula.plumbing.gpus import (JobGpus, claim_gpu, gpu_was_given, lock_folder, lock_name, planned_job,
                                     visible_entries, visible_gpu_count)
from curricula.plumbing.logs import logged
from tests.conftest import REPO


def test_visible_cards_follow_cuda_visible_devices_then_the_driver(tmp_path):
    proc = tmp_path / "gpus"
    proc.mkdir()
    for bus in ("0000:01:00.0", "0000:02:00.0", "0000:03:00.0"):
        (proc / bus).mkdir()
    assert visible_gpu_count({}, proc) == 3  # unset: the driver's cards
    assert visible_gpu_count({}, tmp_path / "absent") == 0  # no driver
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "1,2"}, proc) == 2
    for hidden in ("", "-1", "NoDevFiles", " "):
        assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": hidden}, proc) == 0
    assert visible_entries({"CUDA_VISIBLE_DEVICES": "GPU-8f6c, GPU-11aa"}) == ["GPU-8f6c", "GPU-11aa"]
    assert visible_entries({}) is None
    assert gpu_was_given({"CUDA_VISIBLE_DEVICES": "0"}) and not gpu_was_given({"CUDA_VISIBLE_DEVICES": ""})
    assert not gpu_was_given({})


CARDS = ["GPU-8f6c0e2a-0000", "GPU-11aa93b7-0001", "GPU-5d0c1e44-0002"]


def hold(folder, cards, slots=1):
    """Another job's process holding a claim until its stdin gets a line; its claimed index."""
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys
            from pathlib import Path
            from curricula.plumbing.gpus import claim_gpu
            print(claim_gpu({cards!r}, {slots}, Path({str(folder)!r})), flush=True)
            sys.stdin.readline()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return holder, int(holder.stdout.readline())


def test_each_job_claims_a_slot_of_a_card_by_its_uuid(tmp_path):
    holder, index = hold(tmp_path, CARDS)
    try:
        assert index == 0 and (tmp_path / "GPU-8f6c0e2a-0000.slot0.lock").exists()
        assert claim_gpu(CARDS, folder=tmp_path) == 1  # another job holds card 0
        assert claim_gpu(CARDS, folder=tmp_path) == 2  # a second claim (another open file) in this process
        with pytest.raises(TimeoutError, match=r"all 1 slot\(s\) of the 3 visible GPU\(s\) are held .*gpus.slots"):
            claim_gpu(CARDS, folder=tmp_path, wait_s=0.01, timeout_s=0.05)
        # a run that sees the same card under another index (CUDA_VISIBLE_DEVICES=2,0) finds it held: the lock is the
        # card's UUID, not its index among the visible cards
        with pytest.raises(TimeoutError):
            claim_gpu([CARDS[2], CARDS[0]], folder=tmp_path, wait_s=0.01, timeout_s=0.05)
    finally:
        holder.communicate("\n", timeout=30)
    assert claim_gpu(CARDS[:1], folder=tmp_path, timeout_s=0) == 0  # released when the holder exited


def test_slots_spread_jobs_over_the_cards_before_doubling_up(tmp_path):
    holder, index = hold(tmp_path, CARDS[:2], slots=2)
    try:
        assert index == 0
        assert claim_gpu(CARDS[:2], 2, tmp_path) == 1  # slot 0 of card 1 before slot 1 of card 0
        assert claim_gpu(CARDS[:2], 2, tmp_path) == 0  # then the second slot of card 0
        assert claim_gpu(CARDS[:2], 2, tmp_path) == 1
        with pytest.raises(TimeoutError, match=r"all 2 slot\(s\) of the 2 visible"):
            claim_gpu(CARDS[:2], 2, tmp_path, wait_s=0.01, timeout_s=0.05)
    finally:
        holder.communicate("\n", timeout=30)


def test_the_lock_folder_is_one_for_the_host_and_open_to_every_user(tmp_path, monkeypatch):
    monkeypatch.delenv("CURRICULA_GPU_LOCKS", raising=False)
    monkeypatch.setattr(gpus_mod, "LOCK_FOLDER", tmp_path / "locks")
    folder = lock_folder()
    assert folder == tmp_path / "locks" and folder.stat().st_mode & 0o7777 == 0o1777
    claim_gpu(["GPU-a"], folder=folder)
    assert (folder / "GPU-a.slot0.lock").stat().st_mode & 0o777 == 0o666
    assert lock_name("GPU-1/x y", 3) == "GPU-1_x_y.slot3.lock"


def test_a_claimed_card_becomes_the_current_device(monkeypatch, tmp_path):
    """After the claim a job calls torch.cuda.set_device on its card; the lock is the card's UUID; a SLURM job claims
    nothing (its allocation is its card)."""
    current = []
    props = {i: type("Props", (), {"uuid": f"8f6c-{i}"})() for i in range(2)}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    monkeypatch.setattr(torch.cuda, "set_device", current.append)
    monkeypatch.setenv("CURRICULA_GPU_LOCKS", str(tmp_path))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setattr(device_mod, "_claimed", None)
    assert select_device("auto") == torch.device("cuda", 0) and current == [0]
    assert (tmp_path / "GPU-8f6c-0.slot0.lock").exists()
    assert select_device("cuda:1") == torch.device("cuda", 1) and current == [0, 1]
    monkeypatch.setattr(device_mod, "_claimed", None)
    monkeypatch.setenv("SLURM_JOB_ID", "17")
    assert select_device("cuda") == torch.device("cuda", 0) and current[-1] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["GPU-8f6c-0.slot0.lock"]  # no new claim under SLURM


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_a_gpu_the_job_cannot_use_is_an_error_not_a_silent_cpu_run(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert select_device("auto") == torch.device("cpu") == select_device(torch.device("cpu"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert select_device("auto") == torch.device("cpu")  # every card hidden on purpose: the CPU, silently
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    build = "CPU-only build" if torch.version.cuda is None else "cannot start CUDA|sees no GPU"
    with pytest.raises(DeviceError, match=rf"given a GPU \(CUDA_VISIBLE_DEVICES=0\) but torch .*({build})"):
        select_device("auto")
    for asked in ("cuda", "cuda:1"):
        with pytest.raises(DeviceError, match=rf"device '{asked}' asked for, but torch .*set device: cpu or auto"):
            select_device(asked)
    with pytest.raises(ValueError, match="expected 'auto', 'cpu', 'cuda' or 'cuda:N'"):
        select_device("gpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_a_job_planned_with_a_gpu_that_sees_none_stops_with_one_line(monkeypatch, caplog):
    """A job whose plan gave it a card (resource gpu=1: a cluster profile, a workstation) and that sees no usable one
    stops with one line naming what it saw; gpus.missing: cpu runs it on the CPU with a warning."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with planned_job({"gpu": 1, "mem_mb": 8000}, {"gpus": {"slots": 1, "missing": "stop"}}) as job:
        assert job == JobGpus(planned=1)
        with pytest.raises(DeviceError) as err:
            select_device("auto")
    line = str(err.value)
    assert "\n" not in line and line.startswith(
        "this job was planned with a GPU (resource gpu=1) but sees none usable (CUDA_VISIBLE_DEVICES unset; torch ")
    assert line.endswith("or set gpus.missing: cpu to run such jobs on the CPU")
    assert select_device("auto") == torch.device("cpu")  # the job ended: nothing planned any more
    with planned_job({"gpu": 1}, {"gpus": {"missing": "cpu"}}), caplog.at_level("WARNING"):
        assert select_device("auto") == torch.device("cpu")
    assert "running on the CPU (gpus.missing: cpu)" in caplog.text
    with planned_job({"gpu": 0}, {}):  # planned without a card: the CPU, silently
        assert select_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match="gpus.missing 'maybe'"):
        JobGpus.of_job(1, {"missing": "maybe"})


def test_the_gpu_job_scripts_record_what_the_plan_gave_them():
    from curricula.pipeline.devices import GPU_RULES

    for rule in GPU_RULES:
        script = (REPO / "workflow_scripts" / f"{rule}.py").read_text()
        assert "planned_job(snakemake.resources, snakemake.config)" in script, rule


def test_a_device_error_stops_a_job_with_its_line_and_no_traceback(tmp_path):
    log_file = tmp_path / "job.log"
    with pytest.raises(SystemExit):
        with logged(log_file):
            raise DeviceError("device 'cuda' asked for, but torch sees no GPU; set device: cpu or auto")
    assert "ERROR curricula: DeviceError: device 'cuda' asked for" in log_file.read_text()


def test_the_record_names_the_device_used_never_auto(monkeypatch):
    record = device_record(torch.device("cpu"), None)
    assert record["device"] == "cpu" and record["dtype"] == "fp32" and record["gpu"] is None
    assert describe(record) == f"cpu, fp32; torch {torch.__version__}" + (
        f", CUDA {torch.version.cuda} (NVIDIA driver >= " if torch.version.cuda else "")
    # a CUDA device's record, with the card's properties as torch reports them
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"NVIDIA A100 #{index}")
    record = device_record(torch.device("cuda", 1), torch.bfloat16)
    assert (record["device"], record["gpu"], record["capability"], record["dtype"], record["head"]) == (
        "cuda:1", "NVIDIA A100 #1", "8.0", "bf16", "fp32")
    assert "head" not in device_record(torch.device("cpu"), None)  # no autocast: the record as before
    assert describe(record).startswith("cuda:1 (NVIDIA A100 #1, compute 8.0), bf16 autocast; torch ")
    # the start-up line names the driver the environment's CUDA build needs
    assert describe({**record, "cuda": "13.0"}).endswith(", CUDA 13.0 (NVIDIA driver >= 580.65.06)")
    assert describe({**record, "cuda": "12.6"}).endswith(", CUDA 12.6 (NVIDIA driver >= 525.60.13)")
    assert device_mod.dtype_name(torch.float16) == "fp16"


def test_gpu_rules_ask_for_a_card_when_they_will_use_one():
    assert gpus("cuda") == gpus("cuda:3") == 1
    assert gpus("auto", visible=1) == 1 and gpus("auto", visible=0) == 0
    assert gpus("cpu", visible=4) == 0


def run_on(device: str) -> TrainSpec:
    """A training run's typed spec with ``device`` (every other knob the default)."""
    return parse_train_spec({"device": device})


def test_a_profile_giving_cpu_jobs_a_gpu_is_refused():
    config = {"teacher": {"device": "auto"}, "dense": {"device": "cpu"}}
    devices = rule_devices(config, {"a": run_on("cpu"), "b": run_on("cpu")}, None)
    overwrite = {"train": {"gpu": 1, "mem_mb": 4000}, "teacher_train": {"gpu": 1}, "dense_encode_shard": {"gpu": 1},
                 "ingest": {"mem_mb": 10}, "evaluate": {"gpu": 0}}
    lines = profile_gpu_conflicts(devices, overwrite)
    assert lines == [
        "rule dense_encode_shard: the profile asks for a GPU (set-resources dense_encode_shard: gpu: 1) but its jobs "
        "run with device: cpu; drop its gpu and GPU partition lines, or set device: auto",
        "rule train: the profile asks for a GPU (set-resources train: gpu: 1) but its jobs run with device: cpu; "
        "drop its gpu and GPU partition lines, or set device: auto"]
    mixed = rule_devices(config, {"a": run_on("cpu"), "b": run_on("auto")}, run_on("cpu"))
    assert profile_gpu_conflicts(mixed, {"train": {"gpu": 1}, "active": {"gpu": 1}}) == [
        "rule active: the profile asks for a GPU (set-resources active: gpu: 1) but its jobs run with device: cpu; "
        "drop its gpu and GPU partition lines, or set device: auto"]


def test_a_studys_copies_of_the_rules_get_the_profiles_entries_and_its_checks():
    """A study renames each dataset's rules (<dataset>_train); the profile's bare-name entries apply to every copy,
    an entry naming a copy wins for it, and a GPU given to a copy whose jobs run on the CPU is refused."""
    overwrite = {"train": {"gpu": 1, "runtime": 720}, "ingest": {"mem_mb": 2500}, "wikiqa_train": {"gpu": 0},
                 "report_study": {"mem_mb": 2000}}
    copies = study_overwrites(overwrite, ["wikiqa", "chitchat"])
    assert copies["chitchat_train"] == {"gpu": 1, "runtime": 720} and copies["wikiqa_ingest"] == {"mem_mb": 2500}
    assert "wikiqa_train" not in copies  # the profile's own entry for that copy stays
    assert not [name for name in copies if name.startswith(("wikiqa_wikiqa", "chitchat_wikiqa"))]
    devices = rule_devices({"teacher": {"device": "auto"}, "dense": {"device": "auto"}}, {"a": run_on("cpu")}, None)
    assert profile_gpu_conflicts(devices, {"wikiqa_train": {"gpu": 1}}) == []  # bare names only
    assert profile_gpu_conflicts(devices, {"wikiqa_train": {"gpu": 1}}, "wikiqa_") == [
        "rule wikiqa_train: the profile asks for a GPU (set-resources wikiqa_train: gpu: 1) but its jobs run with "
        "device: cpu; drop its gpu and GPU partition lines, or set device: auto"]


def test_the_local_gpu_total_binds_only_local_runs():
    """The run's gpu total is the visible cards x slots when jobs run here, and no limit under a cluster executor,
    inside a cluster job or in a dry run (decided when the jobs are planned, not when the Snakefile is read)."""
    workflow = type("Workflow", (), {"local_exec": True, "dryrun": False, "remote_exec": False})()
    cap = local_gpu_cap(workflow, 4)
    assert cap.name == "gpu" and cap.value == 4
    workflow.dryrun = True
    assert cap.value is None
    workflow.dryrun, workflow.local_exec = False, False
    assert cap.value is None
    workflow.local_exec, workflow.remote_exec = True, True  # a cluster job running its rule on its node
    assert cap.value is None


# ----------------------------------------------------------------------------------------------- the workflow
#: the rules whose tiny jobs ask for a GPU: no active learning in the tiny grid, and the neighbour search runs on the
#: CPU in the default CUDA 13 environment (its FAISS is the CPU build)
GPU_RULES = set(DEVICE_RULES) - {"active", "dense_neighbors_shard"}


@pytest.mark.slow
def test_workstation_dry_run_gives_every_gpu_job_one_card(tmp_path):
    from tests.workflow_run import REPO, TINY_PRECOMPUTE, job_resources, on_auto_devices, snakemake

    # device auto, the default grid: every GPU rule has jobs
    config = on_auto_devices({k: v for k, v in TINY_PRECOMPUTE.items() if k != "experiments"})
    two_cards = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles" / "workstation"), config=config,
                          env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert two_cards.returncode == 0, two_cards.stderr[-3000:]
    jobs = job_resources(two_cards.stdout)
    assert {job["rule"] for job in jobs} >= GPU_RULES
    assert {job["rule"] for job in jobs if job["resources"].get("gpu") == 1} == GPU_RULES
    no_card = snakemake(tmp_path, "-n", config=config, env={"CUDA_VISIBLE_DEVICES": ""})
    assert no_card.returncode == 0, no_card.stderr[-3000:]
    assert not [job for job in job_resources(no_card.stdout) if job["resources"].get("gpu")]


@pytest.mark.slow
def test_slurm_profile_with_cpu_jobs_stops_before_any_job(tmp_path):
    from tests.workflow_run import REPO, TINY_PRECOMPUTE, snakemake

    config = {**TINY_PRECOMPUTE, "train": {**TINY_PRECOMPUTE["train"], "device": "cpu"}}
    out = snakemake(tmp_path, "-n", "--profile", str(REPO / "profiles" / "slurm"), config=config)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1] == (
        "profile: rule train: the profile asks for a GPU (set-resources train: gpu: 1) but its jobs run with device: "
        "cpu; drop its gpu and GPU partition lines, or set device: auto")


@pytest.mark.slow
def test_slurm_dry_runs_from_a_host_without_a_gpu_plan_a_card_for_every_gpu_rule(tmp_path):
    """On a login node (no card) the SLURM profile's GPU rules still ask for one card, on its GPU partition: the
    planning host's card count binds local runs only. A study's renamed copies of the rules (``<dataset>_train``) get
    the profile's entries too. CPU rules ask for no card."""
    from tests.workflow_run import REPO, TINY, TINY_PRECOMPUTE, job_resources, on_auto_devices, snakemake

    config = on_auto_devices({k: v for k, v in TINY_PRECOMPUTE.items() if k != "experiments"})
    arms = {"penha": {"scoring": "bert_pred", "pacing": {"name": "root_2"}},  # the teacher's rules
            "hcl_cc": {"scoring": "hcl_corpus", "pacing": {"name": "hcl", "r0": 0.4, "T0": 0.05, "T": 0.5}}}  # G's
    claims = {arm: {"paper": "p", "claim": "c", "experiment": arm, "against": "baseline", "expect": "better",
                    "factors": ["scoring", "pacing"]} for arm in arms}
    study = {**{k: v for k, v in config.items() if k != "dataset"}, "experiments": arms,
             "study": {"datasets": {"tiny": {"dataset": TINY["dataset"]}}, "claims": claims}}
    for overlay, prefix in ((config, ""), (study, "tiny_")):
        workdir = tmp_path / ("study" if prefix else "one")
        workdir.mkdir()
        out = snakemake(workdir, "-n", "--profile", str(REPO / "profiles" / "slurm"), config=overlay,
                        env={"CUDA_VISIBLE_DEVICES": ""})
        assert out.returncode == 0, out.stderr[-3000:]
        jobs = [job for job in job_resources(out.stdout) if job["rule"].startswith(prefix)]
        gpu_rules = {prefix + rule for rule in GPU_RULES}
        assert {job["rule"] for job in jobs} >= gpu_rules
        for job in jobs:
            asks = (job["resources"].get("gpu", 0), job["resources"].get("slurm_partition"))
            assert asks == ((1, "gpu") if job["rule"] in gpu_rules else (0, "cpu")), job
        if prefix:
            assert {job["rule"] for job in job_resources(out.stdout)} >= {"study_ledger_entry", "report_study"}


@pytest.mark.slow
def test_a_gpu_job_that_gets_no_card_stops_the_run_with_one_line(tmp_path):
    """A local run told it has a card (``--resources gpu=1``) whose GPU job was given one by the profile's resources
    but sees none usable (this CPU-only torch, or every card hidden) stops that job with one line at the end of the
    screen, naming what the job saw and what to change."""
    from tests.workflow_run import TINY_PRECOMPUTE, on_auto_devices, snakemake

    out = snakemake(tmp_path, "--until", "teacher_train", "--resources", "gpu=1", "--set-resources",
                    "teacher_train:gpu=1", config=on_auto_devices(TINY_PRECOMPUTE), env={"CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error in rule teacher_train: this job was planned with a GPU (resource gpu=1) but sees "
                           "none usable (CUDA_VISIBLE_DEVICES=''; "), last
    assert "or set gpus.missing: cpu to run such jobs on the CPU (log: logs/tiny/teacher_train.log)" in last
    assert not (tmp_path / "results" / "tiny" / "teacher" / "model").exists()

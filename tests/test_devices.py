"""Device choice without a GPU: card counting, one card per job, a GPU a job was given and cannot use, the ``gpu``
resource of the rules, and a profile that gives a GPU to CPU jobs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from curricula.models import device as device_mod
from curricula.models.device import describe, device_record, select_device
from curricula.pipeline.devices import GPU_RULES as DEVICE_RULES
from curricula.pipeline.devices import gpus, profile_gpu_conflicts, rule_devices
from curricula.plumbing.errors import DeviceError
from curricula.plumbing.gpus import claim_gpu, gpu_was_given, visible_entries, visible_gpu_count
from curricula.plumbing.logs import logged


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


def test_each_job_claims_a_card_of_its_own(tmp_path):
    assert claim_gpu(1, tmp_path) == 0  # one card: nothing to choose, no lock
    assert not list(tmp_path.iterdir())
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from curricula.plumbing.gpus import claim_gpu
            print(claim_gpu(3, Path({str(tmp_path)!r})), flush=True)
            sys.stdin.readline()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "0"  # another job holds card 0
        assert claim_gpu(3, tmp_path) == 1
        assert claim_gpu(3, tmp_path) == 2  # a second claim (another open file) in this process: the next card
        with pytest.raises(TimeoutError, match=r"all 3 GPUs are held .*--resources gpu=3"):
            claim_gpu(3, tmp_path, wait_s=0.01, timeout_s=0.05)
    finally:
        holder.communicate("\n", timeout=30)
    assert claim_gpu(3, tmp_path, timeout_s=0) == 0  # released when the holder exited


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
        f", CUDA {torch.version.cuda}" if torch.version.cuda else "")
    # a CUDA device's record, with the card's properties as torch reports them
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: f"NVIDIA A100 #{index}")
    record = device_record(torch.device("cuda", 1), torch.bfloat16)
    assert (record["device"], record["gpu"], record["capability"], record["dtype"]) == (
        "cuda:1", "NVIDIA A100 #1", "8.0", "bf16")
    assert describe(record).startswith("cuda:1 (NVIDIA A100 #1, compute 8.0), bf16 autocast; torch ")
    assert device_mod.dtype_name(torch.float16) == "fp16"


def test_gpu_rules_ask_for_a_card_when_they_will_use_one():
    assert gpus("cuda") == gpus("cuda:3") == 1
    assert gpus("auto", visible=1) == 1 and gpus("auto", visible=0) == 0
    assert gpus("cpu", visible=4) == 0


def test_a_profile_giving_cpu_jobs_a_gpu_is_refused():
    config = {"teacher": {"device": "auto"}, "dense": {"device": "cpu"}}
    devices = rule_devices(config, {"a": {"device": "cpu"}, "b": {"device": "cpu"}}, None)
    overwrite = {"train": {"gpu": 1, "mem_mb": 4000}, "teacher_train": {"gpu": 1}, "dense_encode_shard": {"gpu": 1},
                 "ingest": {"mem_mb": 10}, "evaluate": {"gpu": 0}}
    lines = profile_gpu_conflicts(devices, overwrite)
    assert lines == [
        "rule dense_encode_shard: the profile asks for a GPU (set-resources dense_encode_shard: gpu: 1) but its jobs "
        "run with device: cpu; drop its gpu and GPU partition lines, or set device: auto",
        "rule train: the profile asks for a GPU (set-resources train: gpu: 1) but its jobs run with device: cpu; "
        "drop its gpu and GPU partition lines, or set device: auto"]
    mixed = rule_devices(config, {"a": {"device": "cpu"}, "b": {"device": "auto"}}, {"device": "cpu"})
    assert profile_gpu_conflicts(mixed, {"train": {"gpu": 1}, "active": {"gpu": 1}}) == [
        "rule active: the profile asks for a GPU (set-resources active: gpu: 1) but its jobs run with device: cpu; "
        "drop its gpu and GPU partition lines, or set device: auto"]


# ----------------------------------------------------------------------------------------------- the workflow
GPU_RULES = set(DEVICE_RULES) - {"active"}  # the tiny default grid runs no active learning


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

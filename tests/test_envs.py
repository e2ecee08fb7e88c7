"""The conda environment files: every pin inline, made by their command from requirements.lock, one CUDA stack each,
resolvable by pip to exactly their pins as Snakemake hands them to conda; and the minimum driver of a CUDA runtime."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from curricula.plumbing import locks as env_files
from curricula.plumbing.drivers import driver_needed, driver_supports
from curricula.plumbing.locks import VARIANTS
from tools import locks
from tools.locks import (CPU_LOCK, asked, committed_extra, cuda_majors, env_yaml, extra_pins, normalise, pins, pip_list,
                         runtime_lines, stale_envs)

REPO = Path(__file__).resolve().parents[1]
COMMITTED = [v for v in VARIANTS.values() if v.path.exists()]

#: what torch 2.11.0+cu126's Linux wheel brings beside itself (its METADATA: cuda-toolkit[...]==12.6.3 and direct
#: pins, as an install script reading that METADATA lists them; nvidia-*-cu12 versions as in PyTorch's cu126 build
#: workflow): a stand-in for torch 2.13.0+cu126's report, which this machine cannot fetch
CU126_STACK = {
    "cuda-toolkit": "12.6.3", "cuda-bindings": "12.9.4", "cuda-pathfinder": "1.3.3", "triton": "3.6.0",
    "nvidia-cublas-cu12": "12.6.4.1", "nvidia-cuda-cupti-cu12": "12.6.80", "nvidia-cuda-nvrtc-cu12": "12.6.85",
    "nvidia-cuda-runtime-cu12": "12.6.77", "nvidia-cudnn-cu12": "9.10.2.21", "nvidia-cufft-cu12": "11.3.0.4",
    "nvidia-cufile-cu12": "1.11.1.6", "nvidia-curand-cu12": "10.3.7.77", "nvidia-cusolver-cu12": "11.7.1.2",
    "nvidia-cusparse-cu12": "12.5.4.2", "nvidia-cusparselt-cu12": "0.7.1", "nvidia-nccl-cu12": "2.28.9",
    "nvidia-nvjitlink-cu12": "12.6.85", "nvidia-nvshmem-cu12": "3.4.5", "nvidia-nvtx-cu12": "12.6.77",
}


def report_of(packages: dict[str, str]) -> dict:
    """A ``pip install --dry-run --report`` holding ``packages`` ({name: version})."""
    return {"install": [{"metadata": {"name": n, "version": v}} for n, v in packages.items()]}


def pinned(lines: list[str]) -> dict[str, str]:
    """``{normalised name: version}`` of a pip list's ``name==version`` lines."""
    return {normalise(m.group(1)): m.group(2) for m in map(locks.PIN.match, lines) if m}


# ------------------------------------------------------------------------------------------ the committed files
@pytest.mark.parametrize("variant", COMMITTED, ids=lambda v: f"{v.name}.yaml")
def test_every_pin_is_inline(variant):
    """No `-r`, `-e` or path: conda reads the file where Snakemake copied it. Options are PyTorch's index only."""
    lines = pip_list(variant.path.read_text())
    options = [line for line in lines if line.startswith("-")]
    assert options == ([f"--extra-index-url {variant.index}"] if variant.index else [])
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.+!-]+", line) for line in lines if not line.startswith("-"))
    assert len(pinned(lines)) == len(lines) - len(options)  # one pin per package


def test_committed_files_follow_requirements_lock():
    """Regenerating each file from requirements.lock and its own extra pins gives the committed file."""
    stale = stale_envs(CPU_LOCK.read_text())
    assert not stale, f"stale: {stale}; run `{locks.COMMAND} refresh` after editing requirements.lock"
    assert {v.name for v in COMMITTED} >= {"cpu", "gpu"}


def test_cpu_and_cuda13_files_carry_their_builds():
    cpu_lock = CPU_LOCK.read_text()
    runtime = {normalise(locks.PIN.match(line).group(1)): locks.PIN.match(line).group(2)
               for line in runtime_lines(cpu_lock)}
    cpu, gpu = (pinned(pip_list(VARIANTS[n].path.read_text())) for n in ("cpu", "gpu"))
    assert cpu["torch"] == f"{runtime['torch']}+cpu" and gpu["torch"] == runtime["torch"]
    assert set(cpu) == set(runtime) and not cuda_majors(cpu)  # nothing beside the lock: no CUDA package
    assert {n: gpu[n] for n in runtime if n != "torch"} == {n: v for n, v in runtime.items() if n != "torch"}
    assert cuda_majors(gpu) == {"13"} and {"cuda-toolkit", "nvidia-cudnn-cu13", "triton"} <= set(gpu)
    assert gpu["faiss-cpu"] == runtime["faiss-cpu"] and not [n for n in gpu if n.startswith("faiss-gpu")]
    assert set(gpu) - set(runtime) == set(committed_extra(VARIANTS["gpu"], cpu_lock, VARIANTS["gpu"].path.read_text()))


# ------------------------------------------------------------------------------------------------ the generator
def test_generator_writes_the_cuda12_file_from_a_report(tmp_path, monkeypatch):
    """From a pip report of the cu126 list: PyTorch's index inline, torch's cu126 build, faiss-gpu in faiss-cpu's
    place at its version, the CUDA 12 stack pinned, one CUDA major, the header saying how it was made."""
    cpu_lock, variant = CPU_LOCK.read_text(), VARIANTS["gpu-cuda12"]
    report = tmp_path / "cu126.json"
    report.write_text(json.dumps(report_of({**asked(variant, cpu_lock), **CU126_STACK})))
    monkeypatch.setattr(env_files, "ENVS", tmp_path)
    locks.main(["env", "gpu-cuda12", "--report", str(report)])
    text = (tmp_path / "gpu-cuda12.yaml").read_text()
    lines, pins_ = pip_list(text), pinned(pip_list(text))
    faiss_version = pins(cpu_lock)["faiss-cpu"][0]
    assert lines[0] == "--extra-index-url https://download.pytorch.org/whl/cu126"
    assert pins_["torch"].endswith("+cu126") and pins_["faiss-gpu"] == faiss_version and "faiss-cpu" not in pins_
    assert cuda_majors(pins_) == {"12"} and {normalise(n): v for n, v in CU126_STACK.items()}.items() <= pins_.items()
    assert f"{locks.COMMAND} env gpu-cuda12 --resolve" in text and "name: curricula-gpu-cuda12" in text
    assert committed_extra(variant, cpu_lock, text) == CU126_STACK


def test_generator_refuses_two_cuda_majors_another_version_or_no_report(tmp_path, monkeypatch):
    cpu_lock, variant = CPU_LOCK.read_text(), VARIANTS["gpu-cuda12"]
    wanted = asked(variant, cpu_lock)
    mixed = report_of({**wanted, **CU126_STACK, "nvidia-nccl-cu13": "2.29.7"})
    with pytest.raises(ValueError, match=r"CUDA \['12', '13'\], expected \['12'\]"):
        env_yaml(variant, cpu_lock, extra_pins(mixed, variant, cpu_lock))
    moved = report_of({**wanted, **CU126_STACK, "numpy": "1.0.0"})
    with pytest.raises(ValueError, match="numpy 1.0.0"):
        extra_pins(moved, variant, cpu_lock)
    monkeypatch.setattr(env_files, "ENVS", tmp_path)
    with pytest.raises(SystemExit, match="needs its CUDA packages: add --resolve"):
        locks.main(["env", "gpu-cuda12"])
    with pytest.raises(ValueError, match="CUDA none, expected"):  # a CPU report for the CUDA 13 file
        env_yaml(VARIANTS["gpu"], cpu_lock, {})


def test_cuda_majors():
    mixed = {"torch": "2.13.0", "cuda-toolkit": "13.0.3.0", "faiss-gpu-cu12": "1.14.1.post1"}
    assert cuda_majors(mixed) == {"12", "13"}
    assert cuda_majors({"numpy": "2.0", "nvidia-cufft": "12.0.0.61"}) == set()  # cuFFT's own version, not CUDA's
    assert cuda_majors({"nvidia-cuda-runtime": "13.0.96", "nvidia-cudnn-cu13": "9.20.0.48"}) == {"13"}


def test_conda_envs_follow_gpus_cuda(tmp_path, monkeypatch):
    assert env_files.COMMAND == f"python -m {locks.__name__}"  # a missing file's message names the generator
    assert env_files.conda_envs("13") == {"cpu": "../envs/cpu.yaml", "gpu": "../envs/gpu.yaml"}
    assert env_files.conda_envs("12")["gpu"] == "../envs/gpu-cuda12.yaml"  # without conda the file is not read
    monkeypatch.setattr(env_files, "ENVS", tmp_path)
    with pytest.raises(SystemExit, match=r"envs/gpu-cuda12.yaml does not exist .* env gpu-cuda12 --resolve"):
        env_files.conda_envs("12", {"CONDA"})
    with pytest.raises(SystemExit, match="gpus.cuda '11'"):
        env_files.conda_envs("11")


# ---------------------------------------------------------------------------------------------------- drivers
def test_driver_needed_for_cuda_runtimes():
    assert driver_needed("12.6") == driver_needed("12") == "525.60.13"
    assert driver_needed("13.0") == "580.65.06"
    assert driver_supports("535.104.05", "12.6") and driver_supports("570.86.15", "12.8")
    assert not driver_supports("570.86.15", "13.0") and driver_supports("580.65.06", "13.0")
    assert not driver_supports("525.60.12", "12.0") and driver_supports("525.60.13", "12.0")
    with pytest.raises(ValueError, match="CUDA 11.8: the minimum driver is known here for CUDA 12.x and 13.x"):
        driver_needed("11.8")
    with pytest.raises(ValueError, match="version 'cu126'"):
        driver_needed("cu126")


# ----------------------------------------------------------------------------- what conda would ask pip for (network)
def reachable(url: str, timeout: float = 5.0) -> bool:
    """Whether ``url``'s host answers on port 443 (PyTorch's index is out of reach on some machines, PyPI is not)."""
    host = re.match(r"https://([^/]+)", url).group(1)
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def local_wheel_folder(pattern: str) -> str | None:
    """A local wheel folder of this machine's pip (``PIP_FIND_LINKS``, its configuration's ``find-links``) holding a
    wheel named like ``pattern``, or None."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    configured = re.findall(r"find-links='([^']*)'", listed)
    for folder in " ".join([os.environ.get("PIP_FIND_LINKS", ""), *configured]).split():
        if Path(folder).is_dir() and any(Path(folder).glob(pattern)):
            return folder
    return None


def lines_to_resolve(variant, lines: list[str]) -> list[str]:
    """The pip list as conda hands it to pip; where PyTorch's index is out of reach here, the same build of torch
    from a local wheel folder instead (skips the test when there is none)."""
    if not variant.index or reachable(variant.index):
        return lines
    torch = pinned(lines)["torch"]
    folder = local_wheel_folder(f"torch-{torch}-cp311-cp311-*linux*x86_64.whl")
    if folder is None:
        pytest.skip(f"{variant.index} is out of reach here and no local wheel of torch {torch} was found")
    return [f"--find-links {folder}" if line == f"--extra-index-url {variant.index}" else line for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("variant", COMMITTED, ids=lambda v: f"{v.name}.yaml")
def test_pip_resolves_each_file_to_exactly_its_pins(variant, tmp_path):
    """The file as Snakemake hands it over (copied elsewhere), its pip list resolved by pip without this machine's
    pip configuration (PyPI, PyTorch's index): the resolved set is the pinned set, nothing unpinned, one CUDA stack."""
    if not (sys.platform == "linux" and os.uname().machine == "x86_64" and sys.version_info[:2] == (3, 11)):
        pytest.skip("the pins are Linux x86-64, Python 3.11 wheels")
    handed = tmp_path / "conda" / "4f1c2d.yaml"  # Snakemake's copy, named by hash, away from the repository
    handed.parent.mkdir()
    shutil.copy(variant.path, handed)
    lines = pip_list(handed.read_text())
    report = locks.resolve(lines_to_resolve(variant, lines), handed.parent)
    got = {normalise(n): v for n, v in locks.resolved(report).items()}
    want = pinned(lines)
    assert {n: v for n, v in got.items() if want.get(n) != v} == {}, "resolved but not pinned (or another version)"
    assert set(want) - set(got) == set(), "pinned but not resolved"
    assert cuda_majors(got) == ({variant.cuda} if variant.cuda else set())


@pytest.mark.slow
def test_workflow_scripts_import_the_package_from_the_workflow_folder(tmp_path):
    """Why the files need no `-e ..`: a workflow script run by another Python than Snakemake's (as in a conda
    environment; here through env-modules with a stand-in `module` command) imports a package that sits beside the
    Snakefile, through the sys.path of Snakemake's script preamble. That Python has neither curricula nor
    Snakemake installed."""
    foreign = Path(getattr(sys, "_base_executable", "")) if sys.prefix != sys.base_prefix else None
    probe = "import importlib.util as u, sys; sys.exit(bool(u.find_spec('curricula') or u.find_spec('snakemake')))"
    if foreign is None or not foreign.exists() or subprocess.run([foreign, "-c", probe], cwd=tmp_path).returncode:
        pytest.skip("needs this virtual environment's base Python without curricula and snakemake")
    workflow, work, bin_ = tmp_path / "workflow", tmp_path / "work", tmp_path / "bin"
    for folder in (workflow / "rules", workflow / "scripts", work, bin_):
        folder.mkdir(parents=True)
    (workflow / "curricula").symlink_to(REPO / "curricula", target_is_directory=True)
    (workflow / "Snakefile").write_text('include: "rules/probe.smk"\n')
    (workflow / "rules" / "probe.smk").write_text(
        'rule probe:\n    output: "probe.txt"\n    envmodules: "foreign-python"\n    script: "../scripts/probe.py"\n')
    (workflow / "scripts" / "probe.py").write_text(
        "import sys\nfrom curricula.plumbing.drivers import driver_needed\n"
        "open(snakemake.output[0], 'w').write(f'{sys.executable} {driver_needed(\"12.6\")}')\n")
    (bin_ / "python").symlink_to(foreign)
    (bin_ / "module").write_text("#!/bin/sh\nexit 0\n")
    (bin_ / "module").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}
    cmd = [str(Path(sys.executable).parent / "snakemake"), "-s", str(workflow / "Snakefile"), "--cores", "1",
           "--software-deployment-method", "env-modules", "--", "probe.txt"]
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (work / "probe.txt").read_text() == f"{bin_ / 'python'} 525.60.13"

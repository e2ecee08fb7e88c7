"""Which conda environment file each rule runs in (``envs/*.yaml``): :func:`conda_envs`, read by ``rules/common.smk``
while Snakemake parses the workflow, and the variants (:data:`VARIANTS`) those files are.

The files themselves are made from ``requirements.lock`` by ``python -m tools.locks`` (``tools/locks.py``, which
says why every pin is inline); only what the workflow needs at run time lives here, so the installed package carries
no generator.

Variants:

* ``cpu``: torch's CPU build and faiss-cpu, for the rules that run on the CPU.
* ``gpu``: PyPI's torch wheel, CUDA 13, with its CUDA packages pinned; faiss-cpu.
* ``gpu-cuda12``: torch's CUDA 12.6 build from PyTorch's cu126 index (drivers 525-579, Volta) and faiss-gpu.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENVS = REPO / "envs"
#: the command that makes the files (named in the message of a missing one)
COMMAND = "python -m tools.locks"
#: the PyTorch wheel index a variant's torch build comes from
PYTORCH_INDEX = "https://download.pytorch.org/whl/{tag}"


@dataclass(frozen=True)
class Variant:
    """One environment file: ``envs/<name>.yaml``.

    ``torch_tag`` is the local version label of its torch build (``cpu``, ``cu126``; empty: PyPI's own wheel), which is
    also the PyTorch index it comes from; ``faiss`` the FAISS distribution; ``cuda`` the CUDA major of its stack
    (empty: none); ``notes`` the header lines saying what it runs on."""

    name: str
    torch_tag: str
    faiss: str
    cuda: str
    notes: tuple[str, ...]

    @property
    def path(self) -> Path:
        return ENVS / f"{self.name}.yaml"

    @property
    def index(self) -> str | None:
        return PYTORCH_INDEX.format(tag=self.torch_tag) if self.torch_tag else None


VARIANTS = {v.name: v for v in (
    Variant("cpu", "cpu", "faiss-cpu", "", (
        "CPU nodes: torch's CPU build (PyTorch's CPU index, the build requirements.lock installs), FAISS's CPU",
        "build, no CUDA package (PyPI's Linux torch wheel of the same number is the CUDA 13 build).")),
    Variant("gpu", "", "faiss-cpu", "13", (
        "GPU nodes, CUDA 13: PyPI's torch wheel and its CUDA 13 packages; needs an NVIDIA driver >= 580.65.06 and a",
        "GPU of compute capability >= 7.5 (Turing or newer; CUDA 13 dropped Volta, e.g. the V100). FAISS stays the",
        "CPU build: no FAISS GPU wheel for CUDA 13 and Python 3.11 matches torch's CUDA pins (docs/cluster.md).")),
    Variant("gpu-cuda12", "cu126", "faiss-gpu", "12", (
        "GPU nodes, CUDA 12 (config gpus.cuda: \"12\"): torch's CUDA 12.6 build (PyTorch's cu126 index) and its CUDA",
        "packages, faiss-gpu on the same CUDA 12 runtime; needs an NVIDIA driver >= 525.60.13 (CUDA minor-version",
        "compatibility) and a GPU of compute capability 5.0-9.0 (Maxwell to Hopper, the V100 included).")),
)}


def conda_envs(cuda: str, deployment: Iterable[object] = ()) -> dict[str, str]:
    """The rules' environment files (paths relative to ``rules/``): ``cpu`` and, for ``gpu``, the CUDA 13 or CUDA 12
    variant by config ``gpus.cuda`` ("13" or "12"). Under ``--software-deployment-method conda`` (``deployment``:
    Snakemake's deployment methods) a missing file stops the run with one line saying how to make it."""
    name = {"13": "gpu", "12": "gpu-cuda12"}.get(str(cuda))
    if name is None:
        raise SystemExit(f"config: gpus.cuda '{cuda}': expected \"13\" or \"12\"")
    methods = {str(getattr(m, "name", m)).lower() for m in deployment}
    if "conda" in methods and not VARIANTS[name].path.exists():
        raise SystemExit(f"envs/{name}.yaml does not exist (gpus.cuda: \"{cuda}\"): make it with `{COMMAND} env "
                         f"{name} --resolve` on a Linux x86-64 machine that reaches {VARIANTS[name].index}")
    return {"cpu": "../envs/cpu.yaml", "gpu": f"../envs/{name}.yaml"}

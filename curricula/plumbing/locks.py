"""The GPU environment's pinned package set (``envs/gpu-requirements.lock``), made from the CPU one.

The GPU lock is ``requirements.lock`` without its test-only packages, plus the CUDA packages that PyPI's torch wheel
depends on, pinned at the versions pip resolved: one CUDA stack (torch's), and the same FAISS build as on the CPU
(``faiss-cpu``: the neighbour search runs on CPU nodes), so both environments order ties alike. Regenerate after
changing either:

    pip install --dry-run --ignore-installed --report torch.json torch==<the pinned version>
    python -m curricula.plumbing.locks --torch-report torch.json

(on a machine whose pip resolves PyPI's Linux x86-64 wheels; the report lists torch's CUDA packages).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CPU_LOCK, GPU_LOCK = REPO / "requirements.lock", REPO / "envs" / "gpu-requirements.lock"
HEADER = ("# The GPU environment (envs/gpu.yaml): requirements.lock without its test-only packages, plus the CUDA\n"
          "# packages of PyPI's torch wheel. Made by `python -m curricula.plumbing.locks --torch-report <pip report>`\n"
          "# (see curricula/plumbing/locks.py); tests/test_envs.py checks that it follows requirements.lock.\n")
#: package names (normalised) of the CUDA stack that torch's wheel brings
CUDA_PACKAGE = re.compile(r"^(nvidia-|cuda-|triton$)")


def normalise(name: str) -> str:
    """A distribution name as pip compares them (PEP 503: lower case, runs of ``-_.`` as one ``-``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, tuple[str, str]]:
    """``{normalised name: (version, line)}`` of a lock's ``name==version`` lines (comments kept in ``line``)."""
    out = {}
    for line in text.splitlines():
        found = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#;]+)", line)
        if found:
            out[normalise(found.group(1))] = (found.group(2), line)
    return out


def runtime_lines(cpu_lock: str) -> list[str]:
    """The CPU lock's pins that are not test-only (marked ``# test-only`` there)."""
    return [line for _, line in pins(cpu_lock).values() if "# test-only" not in line]


def gpu_lock(cpu_lock: str, cuda_pins: dict[str, str]) -> str:
    """The GPU lock's text: the CPU lock's runtime pins and ``cuda_pins`` ({name: version}), sorted by name."""
    lines = {normalise(re.split(r"[=\s]", line)[0]): line for line in runtime_lines(cpu_lock)}
    lines.update({normalise(name): f"{name}=={version}" for name, version in cuda_pins.items()})
    return HEADER + "".join(lines[name] + "\n" for name in sorted(lines))


def cuda_pins_of(report: dict, cpu_lock: str) -> dict[str, str]:
    """The CUDA packages a ``pip install --dry-run --report`` of torch resolved ({name: version}), those the CPU
    lock does not already pin."""
    have = pins(cpu_lock)
    found = {item["metadata"]["name"]: item["metadata"]["version"] for item in report["install"]}
    return {name: version for name, version in found.items()
            if CUDA_PACKAGE.match(normalise(name)) and normalise(name) not in have}


def cuda_majors(lock: str) -> set[str]:
    """The CUDA major versions a lock's packages are built for: a ``-cuNN`` suffix, else the major of an unsuffixed
    ``nvidia-cuda-runtime`` or ``cuda-toolkit``. More than one means two CUDA runtimes in one environment."""
    majors = set()
    for name, (version, _) in pins(lock).items():
        suffix = re.search(r"-cu(\d+)(?:-|$)", name)
        if suffix:
            majors.add(suffix.group(1))
        elif name in ("nvidia-cuda-runtime", "cuda-toolkit"):
            majors.add(version.split(".")[0])
    return majors


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write envs/gpu-requirements.lock from requirements.lock and a pip "
                                                 "report of torch's CUDA packages.")
    parser.add_argument("--torch-report", required=True, type=Path, help="pip install --dry-run --report output")
    args = parser.parse_args(argv)
    cpu = CPU_LOCK.read_text()
    text = gpu_lock(cpu, cuda_pins_of(json.loads(args.torch_report.read_text()), cpu))
    if len(cuda_majors(text)) != 1:
        raise SystemExit(f"the resolved set mixes CUDA majors {sorted(cuda_majors(text))}; pin one")
    GPU_LOCK.write_text(text)
    print(f"wrote {GPU_LOCK} (CUDA {cuda_majors(text).pop()})")


if __name__ == "__main__":
    main()

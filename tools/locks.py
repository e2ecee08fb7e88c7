"""The conda environment files ``envs/*.yaml``, made from ``requirements.lock`` with every pip pin inline.

Snakemake copies an environment file into ``.snakemake/conda/`` before conda reads it, so a pip section that says
``-r ../requirements.lock`` or ``-e ..`` (paths relative to the yaml) cannot be created, and Snakemake names the
environment by the hash of the yaml's text, so a pin outside it would not make a new environment. Each file therefore
lists the whole resolved set: ``requirements.lock`` without its test-only packages, torch's build for the variant,
and the packages pip resolved beside them (the CUDA stack), each ``name==version``.

Variants (:data:`curricula.plumbing.locks.VARIANTS`, beside :func:`curricula.plumbing.locks.conda_envs`,
which the rules read at run time and so stays in the package):

* ``cpu``: torch's CPU build (``torch==<v>+cpu`` from PyTorch's CPU index, the build ``requirements.lock`` installs
  here; PyPI's Linux wheel of the same number is the CUDA 13 build and would bring the CUDA packages) and faiss-cpu.
* ``gpu``: PyPI's torch wheel, CUDA 13, with its CUDA packages pinned; faiss-cpu (no FAISS GPU build for CUDA 13
  and Python 3.11 matches torch's cuda-toolkit pin).
* ``gpu-cuda12``: torch's CUDA 12.6 build from PyTorch's cu126 index (drivers 525-579, Volta) and faiss-gpu, the same
  FAISS version as faiss-cpu, built for CUDA 12 (its runtime and cuBLAS are torch's).

The workflow's scripts import ``curricula`` without installing it: Snakemake inserts the Snakefile's folder into its
own ``sys.path`` and its script preamble appends that ``sys.path`` to the script's (``snakemake/script/__init__.py``,
``get_snakemake_searchpaths``), also when the script runs on a conda environment's Python.

Make or renew a file (pip runs without this machine's pip configuration: PyPI plus the variant's index)::

    python -m tools.locks env gpu --resolve      # resolve with pip here and write envs/gpu.yaml
    python -m tools.locks requirements gpu-cuda12 > asked.txt   # elsewhere: what to resolve, then
    pip install --dry-run --ignore-installed --quiet --report cu12.json -r asked.txt
    python -m tools.locks env gpu-cuda12 --report cu12.json
    python -m tools.locks refresh               # after editing requirements.lock: every committed file

Resolve on Linux x86-64 with Python 3.11 (the pins are that platform's). ``tests/test_envs.py`` checks that the
committed files follow ``requirements.lock`` and, with the network, that pip resolves each to exactly its pins.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from curricula.plumbing.locks import COMMAND, VARIANTS, Variant

REPO = Path(__file__).resolve().parents[1]
CPU_LOCK = REPO / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s#;]+)")


def normalise(name: str) -> str:
    """A distribution name as pip compares them (PEP 503: lower case, runs of ``-_.`` as one ``-``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, tuple[str, str]]:
    """``{normalised name: (version, line)}`` of a lock's ``name==version`` lines (comments kept in ``line``)."""
    out = {}
    for line in text.splitlines():
        found = PIN.match(line.strip())
        if found:
            out[normalise(found.group(1))] = (found.group(2), line)
    return out


def runtime_lines(cpu_lock: str) -> list[str]:
    """The CPU lock's pins that are not test-only (marked ``# test-only`` there)."""
    return [line for _, line in pins(cpu_lock).values() if "# test-only" not in line]


def asked(variant: Variant, cpu_lock: str) -> dict[str, str]:
    """What a variant asks pip for, ``{name: version}`` in the CPU lock's spelling: the lock's runtime pins with
    torch's build label (``2.13.0+cu126``) and, for ``faiss-gpu``, faiss-gpu at faiss-cpu's version in its place."""
    out = {}
    for line in runtime_lines(cpu_lock):
        name, version = PIN.match(line.strip()).groups()
        if normalise(name) == "torch" and variant.torch_tag:
            version = f"{version.split('+')[0]}+{variant.torch_tag}"
        if normalise(name) == "faiss-cpu" and variant.faiss != "faiss-cpu":
            name = variant.faiss
        out[name] = version
    return out


def requirement_lines(variant: Variant, cpu_lock: str, extra: Mapping[str, str] | None = None) -> list[str]:
    """A variant's pip list: the index option (if any), then every pin (asked and ``extra``) sorted by name."""
    merged = {normalise(n): f"{n}=={v}" for n, v in {**asked(variant, cpu_lock), **(extra or {})}.items()}
    options = [f"--extra-index-url {variant.index}"] if variant.index else []
    return options + [merged[name] for name in sorted(merged)]


def resolved(report: Mapping) -> dict[str, str]:
    """``{name: version}`` of a ``pip install --dry-run --report`` (what pip would install)."""
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in report["install"]}


def extra_pins(report: Mapping, variant: Variant, cpu_lock: str) -> dict[str, str]:
    """The packages pip resolved beside what ``variant`` asks for (its CUDA stack), ``{name: version}``; raises
    ValueError when pip chose another version of an asked package (the report is of another list)."""
    wanted = {normalise(n): v for n, v in asked(variant, cpu_lock).items()}
    extra, moved = {}, []
    for name, version in resolved(report).items():
        if normalise(name) not in wanted:
            extra[name] = version
        elif wanted[normalise(name)] != version:
            moved.append(f"{name} {version} (asked {wanted[normalise(name)]})")
    if moved:
        raise ValueError(f"the pip report resolved other versions than envs/{variant.name}.yaml asks for: "
                         f"{', '.join(moved)}; resolve `{COMMAND} requirements {variant.name}`")
    return extra


def cuda_majors(pinned: Mapping[str, str]) -> set[str]:
    """The CUDA majors a pin set's packages are built for: a ``-cuNN`` suffix, else the major of an unsuffixed
    ``nvidia-cuda-runtime`` or ``cuda-toolkit``. More than one means two CUDA runtimes in one environment."""
    majors = set()
    for name, version in pinned.items():
        name = normalise(name)
        suffix = re.search(r"-cu(\d+)(?:-|$)", name)
        if suffix:
            majors.add(suffix.group(1))
        elif name in ("nvidia-cuda-runtime", "cuda-toolkit"):
            majors.add(version.split(".")[0])
    return majors


def check_stack(variant: Variant, pinned: Mapping[str, str]) -> None:
    """Raise ValueError unless the pins carry exactly the variant's CUDA stack: one major, the variant's (none for
    ``cpu``)."""
    majors = cuda_majors(pinned)
    expected = {variant.cuda} if variant.cuda else set()
    if majors != expected:
        raise ValueError(f"envs/{variant.name}.yaml would carry CUDA {sorted(majors) or 'none'}, expected "
                         f"{sorted(expected) or 'none'}; resolve the variant's own list (`{COMMAND} requirements "
                         f"{variant.name}`)")


def env_yaml(variant: Variant, cpu_lock: str, extra: Mapping[str, str] | None = None) -> str:
    """The text of ``envs/<variant>.yaml``: a header saying how it was made, conda's Python 3.11 and pip, and the
    pip list of :func:`requirement_lines`. Raises ValueError when the set mixes CUDA majors (:func:`check_stack`)."""
    lines = requirement_lines(variant, cpu_lock, extra)
    check_stack(variant, {m.group(1): m.group(2) for m in map(PIN.match, lines) if m})
    header = [f"# envs/{variant.name}.yaml, for --software-deployment-method conda.",
              *(f"# {note}" for note in variant.notes),
              f"# Made by `{COMMAND} env {variant.name} --resolve` (tools/locks.py):",
              "# requirements.lock without its test-only packages, plus what pip resolved beside them (a GPU file's",
              "# CUDA stack). Do not edit: tests/test_envs.py checks that it follows requirements.lock. The",
              "# workflow's scripts import curricula from the workflow's folder (Snakemake's script preamble puts",
              "# it on sys.path), so the package itself is not installed here."]
    body = [f"name: curricula-{variant.name}", "channels:", "  - conda-forge", "dependencies:", "  - python=3.11",
            "  - pip", "  - pip:", *(f"      - {line}" for line in lines)]
    return "\n".join(header + body) + "\n"


def pip_list(env_text: str) -> list[str]:
    """The pip section of an environment file's text (options and requirements, as conda hands them to pip)."""
    for item in yaml.safe_load(env_text)["dependencies"]:
        if isinstance(item, dict) and "pip" in item:
            return [str(line) for line in item["pip"]]
    return []


def committed_extra(variant: Variant, cpu_lock: str, env_text: str) -> dict[str, str]:
    """The pins of an environment file's text that the variant does not ask for (what pip resolved beside them)."""
    wanted = {normalise(n) for n in asked(variant, cpu_lock)}
    found = (PIN.match(line) for line in pip_list(env_text))
    return {m.group(1): m.group(2) for m in found if m and normalise(m.group(1)) not in wanted}


def pip_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment pip resolves in: this process's without pip's own settings (``PIP_*``) and with no pip
    configuration file, so that no local index, wheel folder or constraint changes what a cluster would get."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def resolve(lines: Iterable[str], folder: Path, timeout: float = 900.0) -> dict:
    """The report of ``pip install --dry-run --ignore-installed`` for a pip list (written to ``folder`` as conda
    writes it, and resolved from there), in :func:`pip_environment`. Raises RuntimeError with pip's last line."""
    requirements = Path(folder) / "condaenv.requirements.txt"
    requirements.write_text("".join(f"{line}\n" for line in lines))
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-",
           "-r", requirements.name]
    done = subprocess.run(cmd, cwd=folder, env=pip_environment(), capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"pip could not resolve {requirements}: {last}")
    return json.loads(done.stdout)


def write_env(variant: Variant, cpu_lock: str, extra: Mapping[str, str]) -> Path:
    """Write ``envs/<variant>.yaml`` (:func:`env_yaml`); returns its path."""
    variant.path.write_text(env_yaml(variant, cpu_lock, extra))
    return variant.path


def stale_envs(cpu_lock: str) -> list[str]:
    """The committed environment files that differ from what their committed extra pins and ``cpu_lock`` give."""
    return [v.name for v in VARIANTS.values() if v.path.exists()
            and env_yaml(v, cpu_lock, committed_extra(v, cpu_lock, v.path.read_text())) != v.path.read_text()]


def _extra_for(args: argparse.Namespace, variant: Variant, cpu_lock: str) -> dict[str, str]:
    """The extra pins the ``env`` command writes: from ``--report``, from a pip run (``--resolve``), or none."""
    if args.report:
        return extra_pins(json.loads(Path(args.report).read_text()), variant, cpu_lock)
    if args.resolve:
        with tempfile.TemporaryDirectory() as folder:
            return extra_pins(resolve(requirement_lines(variant, cpu_lock), Path(folder)), variant, cpu_lock)
    if variant.cuda:
        raise ValueError(f"envs/{variant.name}.yaml needs its CUDA packages: add --resolve (pip, on Linux x86-64 "
                         f"with Python 3.11, reaching PyPI and {variant.index}) or --report <pip report>")
    return {}


def main(argv: list[str] | None = None) -> None:
    """The command line: print a variant's pip list, write one file, or refresh every committed one."""
    parser = argparse.ArgumentParser(prog=COMMAND, description="The conda environment files envs/*.yaml.")
    sub = parser.add_subparsers(dest="command", required=True)
    req = sub.add_parser("requirements", help="print what a variant asks pip for (to resolve elsewhere)")
    req.add_argument("variant", choices=sorted(VARIANTS))
    env = sub.add_parser("env", help="write envs/<variant>.yaml")
    env.add_argument("variant", choices=sorted(VARIANTS))
    how = env.add_mutually_exclusive_group()
    how.add_argument("--report", type=Path, help="pip install --dry-run --report of the `requirements` list")
    how.add_argument("--resolve", action="store_true", help="run that pip resolution here (PyPI and PyTorch's index)")
    sub.add_parser("refresh", help="rewrite every committed file from requirements.lock and its own extra pins")
    args = parser.parse_args(argv)
    cpu = CPU_LOCK.read_text()
    try:
        if args.command == "requirements":
            print("\n".join(requirement_lines(VARIANTS[args.variant], cpu)))
        elif args.command == "env":
            variant = VARIANTS[args.variant]
            print(f"wrote {write_env(variant, cpu, _extra_for(args, variant, cpu))}")
        else:
            for variant in (v for v in VARIANTS.values() if v.path.exists()):
                write_env(variant, cpu, committed_extra(variant, cpu, variant.path.read_text()))
                print(f"wrote {variant.path}")
    except (ValueError, RuntimeError) as err:
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()

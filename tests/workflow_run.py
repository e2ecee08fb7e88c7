"""Running the Snakemake workflow in a temporary working directory, as a user would: the tiny configurations and
the helpers the end-to-end tests share (the session's one full tiny run is the ``tiny_run`` fixture in conftest)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.snakemake_plugins.snakemake_logger_plugin_job_stats import JOB_PREFIX
from tests.snakemake_plugins.snakemake_logger_plugin_job_stats import PREFIX as JOB_STATS

REPO = Path(__file__).resolve().parents[1]
#: the folder of the Snakemake logger plugin that writes a run's job statistics (snakemake_logger_plugin_job_stats)
PLUGINS = Path(__file__).resolve().parent / "snakemake_plugins"
#: G's fine-tuning at tiny scale: the default grid's HCL arm makes the pipeline fine-tune G (dense.finetune.enabled
#: null), 500 steps of 32 pairs unless a test says otherwise
TINY_FINETUNE = {"steps": 4, "batch_size": 8, "max_length": 32}
#: the device of every stage that can use a GPU: the CPU, so that a GPU host runs the same tests (the outputs the
#: tests compare are the CPU's; conftest hides the GPUs from tests not marked ``gpu`` as well)
CPU = {"device": "cpu"}
TINY = {"dataset": {"name": "tiny", "format": "chitchat",
                    "options": {"max_instances": {"train": 40, "dev": 10, "test": 10}, "max_context_turns": 4}},
        "dense": {"finetune": TINY_FINETUNE, **CPU}, "teacher": CPU, "train": CPU}


TINY_PRECOMPUTE = {
    **TINY,
    "bm25": {"k": 20, "heap": "1g"},
    # batches of 8: encoding has several length-sorted batches to split between shards
    "dense": {"layers": 1, "max_length": 32, "batch_size": 8, "neighbors_k": 30, "finetune": TINY_FINETUNE, **CPU},
    "teacher": {"layers": 1, "max_length": 32, "steps": 6, "batch_size": 8, **CPU},
    # every difficulty function joined into the diagnostic table, so that the baseline-only run still exercises each
    # one and, through hcl_corpus, the dense stages (null would compute only the baseline's random order)
    "difficulty": {"functions": "all"},
    # a fixed 4-step budget (the default's early stopping would make the tiny runs as long as patience allows)
    "train": {"layers": 1, "max_length": 32, "steps": 4, "max_steps": None, "patience": None, "batch_size": 4,
              "eval_every": 2, "checkpoint_every": 2, **CPU},
    "seeds": [1],
    "experiments": {},  # the baseline alone (an overlay's experiments replace the default grid)
}


#: TINY_PRECOMPUTE with G's fine-tuning switched on (dense.finetune.enabled), its other fine-tuning knobs the default's
TINY_FINETUNED = {**TINY_PRECOMPUTE, "dense": {**TINY_PRECOMPUTE["dense"], "finetune": {"enabled": True}}}
#: the configs whose dry run in an empty folder the ``tiny_plans`` fixture (conftest) makes once per session
PLANNED = {"tiny": TINY_PRECOMPUTE, "finetuned": TINY_FINETUNED}


def snakemake(workdir: Path, *args: str, config: dict | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Snakemake on the repository's workflow in ``workdir``, its output captured; with the job-stats logger, so that
    :func:`jobs_of` reads the run's planned jobs from its output. ``env`` adds to (or replaces) environment
    variables."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", "--logger=job-stats", *args]
    if config is not None:  # last: --configfile takes every following word as a file
        path = workdir / "config.test.yaml"
        path.write_text(yaml.safe_dump(config))
        cmd += ["--configfile", str(path)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(PLUGINS), os.environ.get("PYTHONPATH")])), **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)


def jobs_of(dry_run_output: str) -> set[str]:
    """Rule names of the jobs a (dry) run plans, from the job statistics the job-stats logger writes into a
    :func:`snakemake` run's output (the last such line: none when the run had nothing to do)."""
    stats = [json.loads(line.removeprefix(JOB_STATS)) for line in dry_run_output.splitlines()
             if line.startswith(JOB_STATS)]
    return {rule for rule, count in stats[-1].items() if rule != "total" and count} if stats else set()


def on_auto_devices(config: dict) -> dict:
    """``config`` with ``device: auto`` where the tiny configs pin the CPU (train, teacher, dense): for the tests of
    which jobs ask for a GPU. On a machine without one they still run on the CPU."""
    return {**config, **{key: {**config[key], "device": "auto"} for key in ("train", "teacher", "dense")}}


def job_resources(dry_run_output: str) -> list[dict]:
    """``{"rule": name, "resources": {...}}`` of every job a (dry) run plans, in the order Snakemake logs them."""
    return [json.loads(line.removeprefix(JOB_PREFIX)) for line in dry_run_output.splitlines()
            if line.startswith(JOB_PREFIX)]


def dry_jobs(workdir: Path, config: dict) -> set[str]:
    out = snakemake(workdir, "-n", config=config)
    assert out.returncode == 0, out.stderr[-3000:]
    return jobs_of(out.stdout)


def copy_run(source: Path, target: Path) -> Path:
    """A copy of a finished workflow directory (results, logs, benchmarks and Snakemake's metadata, modification
    times kept), for a test that changes a knob without touching the shared run."""
    shutil.copytree(source, target, symlinks=True)
    return target


#: the tables of the sharded precompute stages (BM25 search and scoring, encoding, neighbours, teacher scoring)
PRECOMPUTED = ("bm25/run.parquet", "bm25/run.trec", "bm25/candidate_scores.parquet", "dense/queries.parquet",
               "dense/docs.parquet", "dense/neighbors.parquet", "teacher/scores.parquet")

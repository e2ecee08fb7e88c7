"""What Snakemake imports while it parses the workflow stays light: resolving the config never imports torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.workflow_run import PLUGINS, REPO, TINY_PRECOMPUTE, jobs_of, snakemake

PARSE = f"""
import sys, yaml
from snakemake.utils import validate
from curricula.difficulty import check_names, function_knobs, needed_inputs
from curricula.experiments.spec import parse_train_spec, spec_params
from curricula.experiments.specs import active_spec, experiment_runs, needed_tables, tuned_values
from curricula.experiments.specs import finetune_dense_model
from curricula.retrieval.precompute import dense_max_length

config = yaml.safe_load(open({str(REPO / "config.yaml")!r}))
schema = yaml.safe_load(open({str(REPO / "schemas" / "config.schema.yaml")!r}))
config["active"] = {{"enabled": True}}
validate(config, {str(REPO / "schemas" / "config.schema.yaml")!r})  # fills the defaults, as the Snakefile does
runs = experiment_runs(config, schema)
tuned_values(config)
active_spec(config, schema)
check_names(["kde", "bert_pred"], "difficulty.functions")
needed_inputs(["kde", "hcl_corpus"], "run")
dense_max_length(config, finetune_dense_model(config, {{r: s for v in runs.values() for r, s in v.items()}}))
from curricula.pipeline.plan import dataset_plan  # what rules/common.smk builds once at parse time
from curricula.pipeline.study import study_plan  # and rules/study_common.smk
import curricula.pipeline.targets
dataset_plan(config, schema)
heavy = sorted(m for m in ("torch", "transformers", "faiss", "jnius") if m in sys.modules)
print(len(runs), sum(len(r) for r in runs.values()), heavy)
"""


@pytest.mark.slow  # a fresh interpreter
def test_resolving_the_config_imports_no_heavy_library():
    out = subprocess.run([sys.executable, "-c", PARSE], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "4 5 []", out.stdout  # 4 experiments, 5 training runs (m tuned over 2 values)


#: a ``sitecustomize`` module that, when the interpreter exits, writes which of the listed libraries it had imported
EXIT_REPORT = """import atexit, os, sys
def _report():
    with open(os.environ["IMPORTS_REPORT"], "w") as out:
        out.write(" ".join(sorted(m for m in ("scipy", "torch", "transformers", "pandas") if m in sys.modules)))
atexit.register(_report)
"""


@pytest.mark.slow  # a Snakemake dry run
def test_planning_a_single_run_imports_no_scipy(tmp_path):
    """A dry run of a single dataset's grid (the start-up checks, the plan, the DAG) imports neither scipy nor torch
    in the Snakemake process: every Snakemake invocation (a dry run, a SLURM job's own start, a re-run) pays an
    import at start-up, about a second of CPU for scipy.stats; the statistics are imported by the jobs that judge.
    (pandas comes with Snakemake's SLURM executor plugin, not with this workflow, and is not checked.)"""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(EXIT_REPORT)
    report, work = tmp_path / "imports.txt", tmp_path / "run"
    work.mkdir()
    paths = [str(hook), str(PLUGINS), *filter(None, [os.environ.get("PYTHONPATH")])]
    out = snakemake(work, "-n", config=TINY_PRECOMPUTE,
                    env={"IMPORTS_REPORT": str(report), "PYTHONPATH": os.pathsep.join(paths)})
    assert out.returncode == 0 and "train" in jobs_of(out.stdout), out.stderr[-2000:]
    assert set(report.read_text().split()) <= {"pandas"}, report.read_text()


#: the stage modules of the jobs a study run or a tuned experiment repeats (the ledger entry, the training and the
#: tuned selection, the evaluation), and the run summary every successful Snakemake run prints (``curricula.cli``,
#: the Snakefile's ``onsuccess``): importing one must not import :data:`HEAVY`, which costs CPU-seconds at every
#: job start or run end (torch and transformers about 3, scipy.stats about 1); what needs them imports them inside
LIGHT_STAGES = ("curricula.stages.evaluate", "curricula.stages.study", "curricula.stages.train", "curricula.cli")
HEAVY = ("torch", "transformers", "scipy.stats")


@pytest.mark.slow  # fresh interpreters
@pytest.mark.parametrize("module", LIGHT_STAGES)
def test_a_repeated_job_imports_only_what_its_stage_needs(module):
    """Importing the stage module of the ledger entry, of the training and tuned selection, or of the evaluation, or
    the run summary's module, imports no torch, transformers or scipy.stats: the training imports torch inside its
    entry point, the judging functions their statistics at first use, so the jobs that need neither start without
    them and a finished run's summary does not load scipy.stats to print its tables."""
    code = (f"import sys, {module}; "
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"{module} imports {out.stdout.strip()}"

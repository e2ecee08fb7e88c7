# The dataset's plan (curricula.pipeline.plan: the config checked and resolved once), its paths
# (curricula.plumbing.layout), and the one-line input functions and wildcard constraints every rule file uses.
import os
import sys

from curricula.active.acquisition import METHODS
from curricula.pipeline import targets
from curricula.pipeline.devices import gpus, profile_gpu_conflicts, rule_devices
from curricula.pipeline.plan import dataset_plan, one_of
from curricula.plumbing.config import read_yaml
from curricula.plumbing.locks import conda_envs

# Environments for --software-deployment-method conda: rules that can use a GPU get the CUDA build, CUDA 13 or 12
# by gpus.cuda (envs/gpu.yaml or envs/gpu-cuda12.yaml; a missing file stops a conda run saying how to make it)
CONDA_ENVS = conda_envs(config.get("gpus", {}).get("cuda", "13"), workflow.deployment_settings.deployment_method)

try:  # a bad spec stops the run before any job, naming the key
    PLAN = dataset_plan(config, read_yaml(os.path.join(workflow.basedir, "schemas", "config.schema.yaml")))
except ValueError as err:
    sys.exit(f"config: {err}")
# A profile that gives a GPU to jobs set to run on the CPU stops the run here (the card would sit idle)
GPU_CONFLICTS = profile_gpu_conflicts(rule_devices(config, PLAN.runs, PLAN.active),
                                      workflow.resource_settings.overwrite_resources)
if GPU_CONFLICTS:
    sys.exit("\n".join(f"profile: {line}" for line in GPU_CONFLICTS))
LAYOUT = PLAN.layout  # results/<dataset>; logs/<dataset>, or logs/<results>/<dataset> for another results folder


wildcard_constraints:
    dataset=r"[A-Za-z0-9_.-]+",
    kind=r"queries|docs",
    function=r"[a-z0-9_]+",
    scoring=r"[a-z0-9_]+",
    experiment=r"[A-Za-z0-9_.@=+-]+",
    seed=r"-?[0-9]+",
    reference=r"bm25|bm25_tuned|teacher",
    method=one_of(METHODS),
    scatteritem=r"[0-9]+-of-[0-9]+",


# ------------------------------------------------------------------- input functions (wildcards -> paths/params)
def dataset_files(wildcards):
    return targets.dataset_files(PLAN)


def biencoder_input(wildcards):
    return targets.biencoder_input(PLAN)


def difficulty_function_inputs(wildcards):
    return targets.difficulty_function_inputs(PLAN, wildcards.function)


def difficulty_function_knobs(wildcards):
    return PLAN.difficulty_knobs(wildcards.function)


def train_inputs(wildcards):
    return targets.train_inputs(PLAN, wildcards.experiment)


def train_params(wildcards):
    return PLAN.train_params(wildcards.experiment)


def tuned_inputs(wildcards):
    return targets.tuned_inputs(PLAN, wildcards.experiment, wildcards.seed)


def tuned_params(wildcards):
    return PLAN.tuned[wildcards.experiment]  # in the tuning grid's order (what breaks ties)


def experiment_threads(wildcards):
    """A per-experiment job's threads (a runtime knob, not a param, so it never re-runs a job)."""
    return PLAN.spec_of(wildcards.experiment).runtime.threads


def experiment_gpus(wildcards):
    return PLAN.experiment_gpus(wildcards.experiment)


def evaluate_knobs(wildcards):
    return PLAN.evaluate_knobs(wildcards.experiment)


def additivity_params(wildcards):
    return PLAN.additivity_params()


def reference_scores(wildcards):
    return targets.reference_scores(PLAN, wildcards.reference)


def active_inputs(wildcards):
    return targets.active_inputs(PLAN, wildcards.method)


def active_params(wildcards):
    return PLAN.active_params()  # a function: PLAN.active is None when active learning is disabled


def active_threads(wildcards):
    return PLAN.active.runtime.threads


def active_gpus(wildcards):
    return gpus(PLAN.active.runtime.device)


def all_outputs():
    """The final targets of `rule all`."""
    return targets.all_outputs(PLAN)

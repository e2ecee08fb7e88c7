# A study's plan (curricula.pipeline.study: every dataset's config and plan, the claims and the looks of seeds in
# rounds, checked and resolved once) and the one-line input functions of its rules (rules/study.smk).
import os
import sys

from curricula.pipeline.devices import profile_gpu_conflicts, rule_devices, study_overwrites
from curricula.pipeline.ledger import entry_inputs, entry_params
from curricula.pipeline.plan import one_of
from curricula.pipeline.study import study_plan
from curricula.plumbing.config import read_yaml

# DEFAULT_CONFIG is config.yaml as the Snakefile read it; each dataset's config is built from it and the overlays
try:  # a bad study, or a dataset config it builds, stops the run before any job, naming the key
    STUDY_PLAN = study_plan(DEFAULT_CONFIG, workflow.config_settings.overwrite_config, config,
                            read_yaml(os.path.join(workflow.basedir, "schemas", "config.schema.yaml")))
except ValueError as err:
    sys.exit(f"config: {err}")
# the study's own outputs (round records, findings page, their logs): a study.only selection has its own folder
STUDY_LAYOUT = STUDY_PLAN.layout
STUDY_SETTINGS = config["study"]
CONDA_ENVS_STUDY = {"cpu": "../envs/cpu.yaml"}


def study_module(dataset):
    """The name of a dataset's module (its rules are named ``<dataset>_<rule>``)."""
    return f"dataset_{dataset}"


def study_outputs():
    """The final targets of a study: the findings page (only the runs the ledger lacks are trained)."""
    return STUDY_PLAN.outputs()


def study_round_path(round_):
    """The record of one round, waiting for its checkpoint (Snakemake re-evaluates the caller once it exists)."""
    return checkpoints.study_round.get(round=round_).output[0]


def study_round_inputs(wildcards):
    return STUDY_PLAN.round_inputs(int(wildcards.round), study_round_path)


def study_report_inputs(wildcards):
    return STUDY_PLAN.report_inputs(study_round_path)


def study_entry_inputs(wildcards):
    return entry_inputs(STUDY_PLAN.plan_of(wildcards.dataset), wildcards.arm, wildcards.seed)


def study_entry_params(wildcards):
    return entry_params(STUDY_PLAN.plan_of(wildcards.dataset), wildcards.arm)

# Curriculum learning for neural rankers: the whole pipeline.
# `snakemake --cores 2` runs it on config.yaml; `--configfile other.yaml` overlays another config.
# A config with a `study` section runs the same grid on several datasets in one invocation (rules/study.smk).
import os
import sys

from snakemake.utils import min_version

from curricula.pipeline.devices import local_gpu_cap
from curricula.plumbing.config import apply_overlays, config_layers, read_yaml, validate_config
from curricula.plumbing.gpus import visible_gpu_count
from curricula.plumbing.logs import failed_job_errors
from curricula.plugins import load_plugins

min_version("9.0")


# The repo default is always loaded first (even with --directory); --configfile overlays it.
configfile: os.path.join(workflow.basedir, "config.yaml")


# config.yaml as written, read once: the overlay below and a study's per-dataset configs (rules/study_common.smk)
# both start from it.
DEFAULT_CONFIG = read_yaml(os.path.join(workflow.basedir, "config.yaml"))


# An overlay naming another dataset replaces the dataset section instead of merging into it
# (curricula.plumbing.config.merge).
if not workflow.config_settings.replace_workflow_config:
    apply_overlays(config, DEFAULT_CONFIG, workflow.config_settings.overwrite_config)


# Checked against schemas/config.schema.yaml (defaults filled in): one line per error, naming the key and the file
# that set it, then stop (no traceback).
try:
    validate_config(config, config_layers(DEFAULT_CONFIG, workflow.config_settings.configfiles,
                                          workflow.config_settings.config_args or (),
                                          workflow.config_settings.overwrite_config))
except ValueError as err:
    sys.exit(f"config: {err}".replace("\n", "\nconfig: "))


# Difficulty functions, pacing functions and rankers registered outside the package (docs/extending.md#plugins): the
# modules config `plugins` names are imported before anything is planned, and again in every job (curricula.plugins).
try:
    load_plugins(config["plugins"])
except ValueError as err:
    sys.exit(f"config: {err}")


# A local run queues `gpus.slots` GPU jobs per visible card (each job claims a slot of a card: curricula.plumbing.gpus);
# --resources gpu=N overrides the count. A cluster executor leaves it to the profile, and a dry run caps nothing (the
# executor is known only once the jobs are planned: curricula.pipeline.devices.local_gpu_cap).
if "gpu" not in workflow.global_resources:
    workflow.global_resources["gpu"] = local_gpu_cap(workflow, visible_gpu_count() * config["gpus"]["slots"])


report: "report/workflow.rst"


# A finished run ends with where its outputs are, each ranker's best dev value and why it stopped, and the result
# table (`python -m curricula.cli outputs <config files>` prints the same at any time).
onsuccess:
    from curricula.cli import run_summary

    run_summary(config)


# A job that stopped on a user's error (a malformed input file: path:line: problem) ends the screen with it.
# (printed, then exit: Snakemake's own closing lines would follow it otherwise; its full log stays in .snakemake/log)
onerror:
    USER_ERRORS = failed_job_errors(log)
    if USER_ERRORS:
        print("\n".join(f"error in rule {line}" for line in USER_ERRORS), file=sys.stderr, flush=True)
        sys.exit(1)


if config.get("study"):

    include: "rules/study.smk"

else:

    include: "rules/pipeline.smk"


rule all:
    input:
        study_outputs() if config.get("study") else all_outputs(),
    default_target: True

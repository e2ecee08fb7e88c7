# Curriculum learning for neural rankers: the whole pipeline.
# `snakemake --cores 2` runs it on config.yaml; `--configfile other.yaml` overlays another config.
# A config with a `study` section runs the same grid on several datasets in one invocation (rules/study.smk).
import os

from snakemake.utils import min_version

from curricula.plumbing.config import apply_overlays, read_yaml

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


report: "report/workflow.rst"


if config.get("study"):

    include: "rules/study.smk"

else:

    include: "rules/pipeline.smk"


rule all:
    input:
        study_outputs() if config.get("study") else all_outputs(),
    default_target: True

# Curriculum learning for neural rankers: the whole pipeline.
# `snakemake --cores 2` runs it on config.yaml; `--configfile other.yaml` overlays another config.
import os

from snakemake.utils import min_version, validate

from curricula.config import apply_overlays

min_version("9.0")


# The repo default is always loaded first (even with --directory); --configfile overlays it.
configfile: os.path.join(workflow.basedir, "config.yaml")


# An overlay naming another dataset replaces the dataset section instead of merging into it (curricula.config.merge).
if not workflow.config_settings.replace_workflow_config:
    apply_overlays(config, os.path.join(workflow.basedir, "config.yaml"), workflow.config_settings.overwrite_config)

validate(config, os.path.join(workflow.basedir, "schemas", "config.schema.yaml"))


report: "report/workflow.rst"


# Shard counts of the expensive precompute stages (config `shards`; `--set-scatter bm25=8` overrides per run).
scattergather:
    bm25=config["shards"]["bm25"],
    encode=config["shards"]["encode"],
    neighbors=config["shards"]["neighbors"],
    teacher=config["shards"]["teacher"],


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/bm25.smk"
include: "rules/dense.smk"
include: "rules/teacher.smk"
include: "rules/difficulty.smk"
include: "rules/curriculum.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/report.smk"
include: "rules/active.smk"


rule all:
    input:
        all_outputs(),
    default_target: True

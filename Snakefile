# Curriculum learning for neural rankers: the whole pipeline.
# `snakemake --cores 2` runs it on config.yaml; `--configfile other.yaml` overlays another config.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


validate(config, "schemas/config.schema.yaml")


include: "rules/common.smk"
include: "rules/data.smk"


rule all:
    input:
        all_outputs(),
    default_target: True

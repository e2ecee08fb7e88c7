# One dataset's pipeline: every stage from ingest to the report, on this file's `config`; its final targets are
# `all_outputs()` (the Snakefile's `rule all`).
# The Snakefile includes it directly for a one-dataset run; a study (rules/study.smk) loads it once per dataset as
# a Snakemake module with that dataset's config, so each module has its own plan and
# paths (results, logs and benchmarks; rules/common.smk). Its config was checked before: by the Snakefile, or for a
# study's dataset by curricula.pipeline.study.study_plan.

# Shard counts of the expensive precompute stages (config `shards`; `--set-scatter bm25=8` overrides per run).
# Snakemake keeps one scatter table per workflow, so every dataset of a study shares the study's counts.
scattergather:
    bm25=config["shards"]["bm25"],
    encode=config["shards"]["encode"],
    neighbors=config["shards"]["neighbors"],
    teacher=config["shards"]["teacher"],


include: "common.smk"
include: "data.smk"
include: "bm25.smk"
include: "dense.smk"
include: "teacher.smk"
include: "difficulty.smk"
include: "curriculum.smk"
include: "train.smk"
include: "evaluate.smk"
include: "report.smk"
include: "active.smk"

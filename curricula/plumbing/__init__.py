"""The pipeline's plumbing: what every stage shares and no stage computes.

The config and its schema check (:mod:`~curricula.plumbing.config`), the one layout of the results tree
(:mod:`~curricula.plumbing.layout`), the Parquet contracts checked on write and on read
(:mod:`~curricula.plumbing.contracts`; large query-keyed tables in row groups, :mod:`~curricula.plumbing.row_groups`),
atomic writes (:mod:`~curricula.plumbing.atomic`), shards for Snakemake's scatter/gather, the workflow scripts'
logs, the errors that name file and line, and the generated config reference and docs link check. Lowest layer: it
imports no other sub-package of ``curricula`` and never imports torch.
"""

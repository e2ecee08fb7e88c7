"""The stage layer: the entry point of every rule that runs a script, file in, file out.

One module per ``rules/<name>.smk`` file with ``script:`` rules, named after it (``stages/bm25.py`` holds the
entry points of ``rules/bm25.smk``); :mod:`curricula.stages.common` holds the generic shard gather that several
files' rules share. Each function is one script's whole job: it takes the rule's input and output files (the
mappings Snakemake passes, or plain dicts) and its params and wildcards as plain arguments, reads the input tables,
calls the library, and writes the outputs. The scripts under ``workflow_scripts/`` are one call each, inside their
log (:class:`curricula.plumbing.logs.logged`) and GPU (:func:`curricula.plumbing.gpus.planned_job`) contexts.

Stages may import any library layer; nothing under ``curricula/`` but the CLI imports them (``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: A rule's named input or output files: a Snakemake ``Namedlist`` (``snakemake.input``, ``snakemake.output``) or a
#: plain dict, name -> path (or a list of paths for a named list, such as a gather's ``shards``).
Files = Mapping[str, Any]

"""Tooling of the repository, not part of the installed ``curricula`` package: the GPU smoke check
(:mod:`tools.smoke`), the generator of the conda environment files (:mod:`tools.locks`), the generated config
reference page (:mod:`tools.config_reference`) and the reference checker of the documentation and the code's
docstrings (:mod:`tools.doc_links`, resolving names with :mod:`tools.code_refs`).

Run from the repository root as ``python -m tools.<name>``. These modules import ``curricula``; nothing under
``curricula/`` imports them (``tests/test_layers.py``).
"""

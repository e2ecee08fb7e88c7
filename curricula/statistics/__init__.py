"""Statistics behind every mark, verdict and plan: paired tests, the seed-aware test, equivalence,
multiplicity, power and seed planning (:mod:`~curricula.statistics.stats`), and the group-sequential designs that add
seeds in rounds (:mod:`~curricula.statistics.sequential`). Pure numpy/scipy on arrays and polars frames: it imports
only :mod:`curricula.plumbing` and never imports torch.
"""

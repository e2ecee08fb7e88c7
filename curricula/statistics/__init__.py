"""Statistics behind every mark, verdict and plan. Pure numpy/scipy functions on arrays and numbers (writing tables
and pages is :mod:`curricula.report.tables`'s and :mod:`curricula.study.grid`'s); the package imports only
:mod:`curricula.plumbing` and never imports torch. Its modules, lowest first:

- :mod:`~curricula.statistics.paired`: per-query paired tests (t-test, randomization, Wilcoxon), the confidence
  interval of a mean difference, and the Pitman-Morgan test of two paired variances;
- :mod:`~curricula.statistics.seed_aware`: the seed-aware test (crossed random effects of seeds and queries, variance
  components, Satterthwaite df) and its simulation by mean squares;
- :mod:`~curricula.statistics.power`: power, the minimum detectable effect and the seed-and-query planner;
- :mod:`~curricula.statistics.verdicts`: equivalence (two one-sided tests) and the verdict words of a claim;
- :mod:`~curricula.statistics.multiplicity`: Holm (with Shaffer's count) and Benjamini-Hochberg adjustment;
- :mod:`~curricula.statistics.group_sequential`: group-sequential designs that add seeds in rounds (information
  fractions, alpha spending, normal and Student boundaries);
- :mod:`~curricula.statistics.sequential_verdicts`: a cell's verdict at its looks and the sequential Holm procedure
  over a family of cells.

The simulations of the sequential rule, per cell and per family, are analysis code beside the scripts that run them
(:mod:`analyses.sequential_simulation`); the pipeline never runs them.
"""

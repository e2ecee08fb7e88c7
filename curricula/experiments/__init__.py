"""Experiments: the config resolved into one spec per (experiment, run) composing every curriculum axis
(:mod:`~curricula.experiments.specs`), knobs tuned on dev (:mod:`~curricula.experiments.tuning`), and the ranker's
training stage, one (experiment, seed) per job (:mod:`~curricula.experiments.train`).
"""

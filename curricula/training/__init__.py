"""The one training core every model goes through (stage 6, and the teacher, G and each active-learning fit):
a step budget, dev evaluation every ``eval_every`` steps, patience, rollback to the best dev model, checkpoints and
resume (:mod:`~curricula.training.core`), and the per-instance ranking losses (:mod:`~curricula.training.losses`).
It knows no ranker class and no curriculum: a model and a batch source are handed to it.
"""

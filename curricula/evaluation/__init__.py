"""Evaluation (stage 7): ranking metrics with trec_eval semantics (:mod:`~curricula.evaluation.metrics`), test
re-ranking into TREC runs and per-query metrics (:mod:`~curricula.evaluation.rerank`), and which runs are compared
with which, per query (:mod:`~curricula.evaluation.comparisons`).
"""

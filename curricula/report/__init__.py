"""The report (stage 8): the papers' tables with paired-test marks (:mod:`~curricula.report.tables`), the power
table (:mod:`~curricula.report.power`), figures (:mod:`~curricula.report.figures`), the tuning table
(:mod:`~curricula.report.tuning`) and the active-learning curves (:mod:`~curricula.report.active`).
"""

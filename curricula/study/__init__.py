"""Studies: one grid over several datasets (:mod:`~curricula.study.grid`), its seeds in rounds
(:mod:`~curricula.study.rounds`), the findings page per paper claim and dataset (:mod:`~curricula.study.findings`),
what it cost (:mod:`~curricula.study.costs`), and the selection-noise analysis (:mod:`~curricula.study.selection_noise`).
"""

"""Studies: one grid over several datasets (:mod:`~curricula.study.grid`), its seeds in rounds
(:mod:`~curricula.study.rounds`), the findings per paper claim and dataset (:mod:`~curricula.study.findings`,
written as a page by :mod:`~curricula.study.findings_page`, each verdict cell and the comparison with an earlier
study by :mod:`~curricula.study.verdicts`), and what it cost (:mod:`~curricula.study.costs`). The selection-noise
analysis that replays model-selection rules on a finished grid is analysis code (:mod:`analyses.selection_noise_lib`).
"""

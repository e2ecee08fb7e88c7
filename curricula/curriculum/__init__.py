"""The curriculum axes applied during training (stage 5-6): pacing functions (Penha & Hauff 2020, Su et al. 2021;
:mod:`~curricula.curriculum.pacing`), MacAvaney et al.'s loss weights (:mod:`~curricula.curriculum.weighting`),
negatives including HCL's instance level (:mod:`~curricula.curriculum.negatives`), and the training instances sorted
easy to hard, sharded (:mod:`~curricula.curriculum.ordering`).
"""

"""Active learning (Wang et al. 2020, DASL): the acquisition functions (:mod:`~curricula.active.acquisition`) and
the loop of Algorithm 2 with self-paced pseudo-labels (:mod:`~curricula.active.loop`).
"""

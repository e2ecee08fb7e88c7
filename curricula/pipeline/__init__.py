"""The run plan of the Snakemake workflow, computed once when it is parsed: the config checks that go beyond the
schema (:mod:`~curricula.pipeline.checks`, each a ValueError naming the key), one dataset's plan (its experiments
resolved into training runs, tuned arms, the dense model's and the active-learning ranker's settings, and the params
each rule passes, :mod:`~curricula.pipeline.plan`), that plan's rule inputs and final targets over the results tree
(:mod:`~curricula.pipeline.targets`, paths from :class:`curricula.plumbing.layout.Layout`), and a study's plan
(every dataset's plan, claims, looks of seeds in rounds and the metrics each claim reads,
:mod:`~curricula.pipeline.study`). The rule files hold the rules and one-line input functions over these objects."""

"""The pipeline's outputs where researchers already work: PyTerrier and sentence-transformers.

* :mod:`~curricula.ecosystem.frames`: a dataset's topics, qrels, candidates and BM25 run as PyTerrier frames
  (pandas, PyTerrier's column names), and their export to files that pandas and ``pt.io`` read;
* :mod:`~curricula.ecosystem.pyterrier`: any model folder this pipeline saves as a PyTerrier re-ranker
  (``pt.Transformer``), and :func:`~curricula.ecosystem.pyterrier.from_results`;
* :mod:`~curricula.ecosystem.curriculum_data`: a run's curriculum read back from a results tree, and the training
  instances with their negatives (HCL's guarded ones included) as a ``datasets.Dataset``;
* :mod:`~curricula.ecosystem.sentence_transformers`: the curriculum's batch sampler and MacAvaney's loss weights as
  components of sentence-transformers' ``CrossEncoderTrainer``.

This package is the top layer: nothing in the pipeline imports it (``tests/test_layers.py``), so PyTerrier (an
optional extra, ``pip install -e '.[pyterrier]'``) is imported only by a user's code and the tests.
"""

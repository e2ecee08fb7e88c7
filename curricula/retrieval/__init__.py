"""First-stage retrieval (stages 2-3): Lucene BM25 through Pyserini (:mod:`~curricula.retrieval.lucene`,
:mod:`~curricula.retrieval.bm25`, k1/b tuned on dev by :mod:`~curricula.retrieval.bm25_tuning`), the dense MiniLM
encoder and FAISS neighbours (:mod:`~curricula.retrieval.dense`), similarities of the stored vectors such as HCL's
G(c, r+) (:mod:`~curricula.retrieval.similarity`, no torch), HCL's fine-tuned bi-encoder G
(:mod:`~curricula.retrieval.biencoder`), and the first-stage precomputation file to file
(:mod:`~curricula.retrieval.precompute`), which the rules reach through :mod:`curricula.stages`.
"""

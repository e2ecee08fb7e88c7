"""First-stage retrieval (stages 2-3): Lucene BM25 through Pyserini (:mod:`~curricula.retrieval.lucene`,
:mod:`~curricula.retrieval.bm25`), the dense MiniLM encoder and FAISS neighbours (:mod:`~curricula.retrieval.dense`),
HCL's fine-tuned bi-encoder G (:mod:`~curricula.retrieval.biencoder`), and the file-to-file stage functions the rules
call (:mod:`~curricula.retrieval.stages`).
"""

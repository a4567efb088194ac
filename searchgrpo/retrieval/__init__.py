"""Retrieval: BM25 search over the corpus (a sparse-matrix index and the rank-bm25 reference)."""

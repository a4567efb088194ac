"""The configured retriever (`retrieval.backend`): BM25 over the corpus, or your HTTP search API.

Training (the reward), evaluation, `collect`, the episodes and `searchgrpo check` all search
through `open_retriever`, so that what the reward optimises is what production retrieves.
"""

from __future__ import annotations

from searchgrpo.config import Config, cache_root
from searchgrpo.data.corpus import Corpus
from searchgrpo.retrieval.search import Retriever, search_for_corpus


def open_retriever(cfg: Config, corpus: Corpus) -> Retriever:
    """`http`: the search API at retrieval.url (documents outside `corpus` come with the reply);
    `bm25`: BM25 over `corpus` (env.search_backend's implementation, its index cached on disk)."""
    if cfg.retrieval.backend == "http":
        from searchgrpo.retrieval.http_search import HttpSearch

        return HttpSearch.from_config(cfg.retrieval, corpus)
    return search_for_corpus(corpus, cfg.env.search_backend, cache_root(cfg) / "indexes")

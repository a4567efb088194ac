"""BM25 search over a corpus: the SearchOrchestrator's retriever.

`BM25Search` wraps rank-bm25 (the reference implementation, BM25Okapi with its defaults
k1=1.5, b=0.75, epsilon=0.25) over title + text with a lowercase alphanumeric tokeniser.
Searches are deterministic: ties in score are broken by corpus order, and documents that match no
query term are never returned. The index is built once per corpus file and process
(`search_for_corpus`), and query results are memoised.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from searchgrpo.corpus import Corpus, Document

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric tokens: the tokeniser used for documents and clues alike."""
    return _TOKEN.findall(text.lower())


@dataclass(frozen=True)
class Hit:
    """One retrieved document for one clue."""

    docid: str
    score: float
    rank: int


class Retriever(Protocol):
    """Anything that maps a clue to its top-k documents."""

    corpus: Corpus

    def search(self, query: str, k: int) -> list[Hit]: ...


class BM25Search:
    """rank-bm25's BM25Okapi over a Corpus, with a bounded result cache."""

    def __init__(self, corpus: Corpus, cache_size: int = 50_000) -> None:
        from rank_bm25 import BM25Okapi

        self.corpus = corpus
        self._bm25 = BM25Okapi([tokenize(document_text(d)) for d in corpus])
        self._cache: OrderedDict[tuple[str, int], list[Hit]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def scores(self, query: str) -> np.ndarray:
        tokens = tokenize(query)
        if not tokens:
            return np.zeros(len(self.corpus))
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float64)

    def search(self, query: str, k: int) -> list[Hit]:
        key = (query, k)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        hits = top_k_hits(self.corpus, self.scores(query), k)
        with self._lock:
            self._cache[key] = hits
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return hits

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]


def document_text(doc: Document) -> str:
    """What is indexed for a document: its title, then its text."""
    return f"{doc.title}\n{doc.text}"


def top_k_hits(corpus: Corpus, scores: np.ndarray, k: int) -> list[Hit]:
    """The k best-scoring documents with score > 0; ties go to the earlier document."""
    positive = np.flatnonzero(scores > 0)
    if positive.size == 0:
        return []
    order = positive[np.lexsort((positive, -scores[positive]))][:k]
    return [Hit(corpus.documents[i].docid, float(scores[i]), rank) for rank, i in enumerate(order)]


_INDEXES: dict[tuple[str, int, int], BM25Search] = {}
_INDEX_LOCK = threading.Lock()


def search_for_corpus(corpus: Corpus) -> BM25Search:
    """The process-wide BM25 index of a corpus loaded from a file (built on first use)."""
    import os

    try:
        st = os.stat(corpus.source)
        key = (os.path.realpath(corpus.source), st.st_size, st.st_mtime_ns)
    except OSError:
        return BM25Search(corpus)
    with _INDEX_LOCK:
        index = _INDEXES.get(key)
        if index is None or len(index.corpus) != len(corpus):
            index = _INDEXES[key] = BM25Search(corpus)
        return index

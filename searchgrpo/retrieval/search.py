"""BM25 search over a corpus: the SearchOrchestrator's retriever.

Two backends give the same results. `BM25Search` wraps rank-bm25 (the reference implementation,
BM25Okapi with its defaults k1=1.5, b=0.75, epsilon=0.25); `SparseBM25Search` computes the same
scores, to the last bit, from a sparse matrix of precomputed weights (see `bm25_index`) and is
hundreds of times faster on large corpora. Both index title + text with a lowercase alphanumeric
tokeniser. Searches are deterministic: ties in score are broken by corpus order, and documents
with a score of zero or less are never returned. Query results are memoised.

`search_for_corpus` builds the index once per corpus file and process; the sparse index is also
kept on disk (under the cache root's `indexes/`) and reused by later processes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import threading
import typing
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from searchgrpo.data.corpus import Corpus, Document
from searchgrpo.fileio import atomic_write_with
from searchgrpo.retrieval.bm25_index import (
    INDEX_FORMAT,
    BM25Params,
    IndexFileError,
    SparseIndex,
    build_index,
    load_index,
    save_index,
    top_k_indices,
)

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
    """Anything that maps a clue to its top-k documents: the one interface training, eval, collect
    and episodes search through (`retrieval.backends.open_retriever` makes the configured one).
    `corpus.get(docid)` gives every document a search returned (title and text for the checker)."""

    @property
    def corpus(self) -> Corpus: ...  # read-only: HttpSearch's is a SearchedCorpus

    def search(self, query: str, k: int) -> list[Hit]: ...

    def describe(self) -> str:
        """The retriever in a few words, for `searchgrpo check` and logs."""
        ...


class CachedSearch:
    """A retriever over a Corpus with a bounded, thread-safe cache of results."""

    def __init__(self, corpus: Corpus, cache_size: int) -> None:
        self.corpus = corpus
        self._cache: OrderedDict[tuple[str, int], list[Hit]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def _search(self, query: str, k: int) -> list[Hit]:
        raise NotImplementedError

    def search(self, query: str, k: int) -> list[Hit]:
        key = (query, k)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        hits = self._search(query, k)
        with self._lock:
            self._cache[key] = hits
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return hits

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def describe(self) -> str:
        return f"BM25 over {len(self.corpus)} documents"


class BM25Search(CachedSearch):
    """rank-bm25's BM25Okapi over a Corpus: the reference backend."""

    def __init__(self, corpus: Corpus, cache_size: int = 50_000) -> None:
        from rank_bm25 import BM25Okapi

        super().__init__(corpus, cache_size)
        # A generator: rank-bm25 keeps its own counts, not the token lists.
        self._bm25 = BM25Okapi(tokenize(document_text(d)) for d in corpus) if len(corpus) else None

    def scores(self, query: str) -> np.ndarray:
        tokens = tokenize(query)
        if not tokens or self._bm25 is None:
            return np.zeros(len(self.corpus))
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float64)

    def _search(self, query: str, k: int) -> list[Hit]:
        return top_k_hits(self.corpus, self.scores(query), k)


class SparseBM25Search(CachedSearch):
    """BM25Okapi's exact scores from a sparse weight matrix: the fast backend."""

    def __init__(self, corpus: Corpus, index: SparseIndex | None = None, cache_size: int = 50_000) -> None:
        super().__init__(corpus, cache_size)
        self.index = index if index is not None else build_corpus_index(corpus)
        if self.index.n_docs != len(corpus):
            raise ValueError(f"index of {self.index.n_docs} documents for a corpus of {len(corpus)}")

    def scores(self, query: str) -> np.ndarray:
        return self.index.scores(tokenize(query))

    def _search(self, query: str, k: int) -> list[Hit]:
        scores = self.scores(query)
        docs = self.corpus.documents
        return [Hit(docs[i].docid, float(scores[i]), rank) for rank, i in enumerate(top_k_indices(scores, k).tolist())]


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


# --------------------------------------------------------------------------- indexes per corpus


Backend = Literal["sparse", "rank_bm25"]  # as EnvConfig.search_backend
BACKENDS: tuple[str, ...] = typing.get_args(Backend)
PARAMS = BM25Params()


def build_corpus_index(corpus: Corpus) -> SparseIndex:
    return build_index((tokenize(document_text(d)) for d in corpus), PARAMS)


def index_meta(corpus: Corpus) -> dict[str, Any]:
    """What an index file must have been built from to be reused for `corpus` (loaded from a file)."""
    st = os.stat(corpus.source)
    docids = hashlib.sha256(json.dumps([d.docid for d in corpus]).encode("utf-8")).hexdigest()
    return {
        "format": INDEX_FORMAT,
        "tokenizer": _TOKEN.pattern + " lowercase",
        "params": dataclasses.asdict(PARAMS),
        "source": os.path.realpath(corpus.source),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "n_docs": len(corpus),
        "docids_sha256": docids,
    }


def index_path(index_dir: Path, corpus: Corpus) -> Path:
    """One file per corpus path and parameters: a changed corpus file replaces its old index."""
    name = json.dumps([os.path.realpath(corpus.source), dataclasses.asdict(PARAMS)])
    return Path(index_dir) / f"bm25-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:16]}.npz"


def load_or_build_index(corpus: Corpus, index_dir: Path) -> tuple[SparseIndex, str]:
    """The sparse index of a corpus file from `index_dir`, built and stored there if missing or unsound.

    Returns the index and how it was obtained: "loaded", "built", or "rebuilt (<why>)".
    """
    path = index_path(index_dir, corpus)
    meta = index_meta(corpus)
    try:
        return load_index(path, meta), "loaded"
    except FileNotFoundError:
        how = "built"
    except IndexFileError as exc:
        how = f"rebuilt ({exc})"
    index = build_corpus_index(corpus)
    try:
        atomic_write_with(path, lambda fh: save_index(fh, index, meta))
    except OSError as exc:  # a read-only or full cache costs only the next process's rebuild
        how += f"; not stored ({exc.strerror or exc})"
    return index, how


def make_search(corpus: Corpus, backend: Backend = "sparse", index_dir: Path | None = None) -> CachedSearch:
    """A retriever of the given backend; the sparse index is cached in `index_dir` when given."""
    if backend == "rank_bm25":
        return BM25Search(corpus)
    if backend != "sparse":
        raise ValueError(f"unknown search backend {backend!r} (expected one of: {', '.join(BACKENDS)})")
    if index_dir is None:
        return SparseBM25Search(corpus)
    return SparseBM25Search(corpus, load_or_build_index(corpus, index_dir)[0])


_INDEXES: dict[tuple[str, int, int, str], CachedSearch] = {}
_INDEX_LOCK = threading.Lock()


def search_for_corpus(corpus: Corpus, backend: Backend = "sparse", index_dir: Path | None = None) -> CachedSearch:
    """The process-wide retriever of a corpus loaded from a file (built, or loaded from disk, on first use)."""
    try:
        st = os.stat(corpus.source)
        key = (os.path.realpath(corpus.source), st.st_size, st.st_mtime_ns, backend)
    except OSError:
        return make_search(corpus, backend)
    with _INDEX_LOCK:
        index = _INDEXES.get(key)
        if index is None or len(index.corpus) != len(corpus):
            index = _INDEXES[key] = make_search(corpus, backend, index_dir)
        return index

"""BM25 as a sparse term-document matrix of precomputed weights: rank-bm25's scores, bit for bit.

`build_index` computes, for every (term, document) pair, the weight that rank-bm25's `BM25Okapi`
adds to the document's score for one occurrence of the term in a query:

    idf(t) * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)))

with the same floating-point operations in the same order (idf by `math.log`, the epsilon floor
on negative idf from the sequentially summed average idf, `avgdl` as an integer division), so
each weight is the identical float. A query's score vector is then the rows of its tokens added
one token at a time, in query order (a repeated token is added twice): the exact sequence of
additions rank-bm25 performs, so the scores are equal to the last bit and so are the rankings,
ties included.

The index is a CSR matrix (terms x documents) kept as three plain arrays plus the vocabulary. It
is stored with `np.savez` and read back with `allow_pickle=False`; `load_index` checks every
array before use and raises `IndexFileError` for anything that is not a complete, consistent
index.
"""

from __future__ import annotations

import json
import math
from array import array
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

# Bump when the weights or the file layout change: old index files are then rebuilt.
INDEX_FORMAT = 1


@dataclass(frozen=True)
class BM25Params:
    """BM25Okapi's parameters (rank-bm25's defaults)."""

    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25


class IndexFileError(ValueError):
    """An index file that cannot be used: unreadable, truncated, inconsistent or out of date."""


@dataclass(frozen=True)
class SparseIndex:
    """Per-(term, document) BM25 weights as CSR rows by term."""

    vocab: dict[str, int]
    indptr: np.ndarray  # int64, len(vocab) + 1
    indices: np.ndarray  # int32 document numbers, ascending within a row
    data: np.ndarray  # float64 weights
    n_docs: int
    dense: dict[int, np.ndarray] = field(init=False, repr=False, compare=False)
    """Rows of terms in more than a quarter of the documents, also kept dense: adding a dense
    vector is several times faster than scattering that many entries."""

    def __post_init__(self) -> None:
        dense = {}
        for row in np.flatnonzero(np.diff(self.indptr) > self.n_docs // 4).tolist():
            lo, hi = self.indptr[row], self.indptr[row + 1]
            dense[row] = np.zeros(self.n_docs)
            dense[row][self.indices[lo:hi]] = self.data[lo:hi]
        object.__setattr__(self, "dense", dense)

    def scores(self, tokens: Iterable[str]) -> np.ndarray:
        """Every document's BM25 score for a tokenised query (zeros when nothing matches)."""
        out = np.zeros(self.n_docs)
        for token in tokens:
            row = self.vocab.get(token)
            if row is None:
                continue
            # rank-bm25 adds 0.0 to the documents without the term, which changes no sum; both
            # paths add the same nonzero weights in query order, so the sums are its to the bit.
            dense = self.dense.get(row)
            if dense is not None:
                out += dense
            else:
                lo, hi = self.indptr[row], self.indptr[row + 1]
                np.add.at(out, self.indices[lo:hi], self.data[lo:hi])
        return out


# Block size of the top-k bound: large enough that the block maxima are few, small enough that
# few scores reach the bound.
_BLOCK = 1024


def kth_largest(values: np.ndarray, k: int) -> float:
    return float(np.partition(values, values.size - k)[values.size - k])


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Numbers of the k highest positive scores, best first; equal scores go to the lower number.

    Only a few candidates are ever sorted: every score at or above the k-th largest (all of the
    top k, with all their ties). On a large array the k-th largest of the blocks' maxima bounds
    that from below (k distinct scores, one per block, reach it), which is much cheaper to find
    than the k-th largest score itself.
    """
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    bound = 0.0
    n_blocks = -(-scores.size // _BLOCK)
    if n_blocks >= k:
        full = scores.size - scores.size % _BLOCK
        maxima = scores[:full].reshape(-1, _BLOCK).max(axis=1)
        if full < scores.size:
            maxima = np.append(maxima, scores[full:].max())
        bound = kth_largest(maxima, k)
    candidates = np.flatnonzero(scores >= bound) if bound > 0 else np.flatnonzero(scores > 0)
    if candidates.size > 4 * k:
        values = scores[candidates]
        candidates = candidates[values >= kth_largest(values, k)]
    # flatnonzero is ascending, so a stable sort by descending score breaks ties by number.
    return candidates[np.argsort(-scores[candidates], kind="stable")[:k]]


def term_rows(term_ids: np.ndarray, lengths: np.ndarray, n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The corpus's tokens (term numbers, documents one after another, `lengths` tokens each) as
    CSR rows by term: (indptr, document numbers ascending within a row, each term's count there)."""
    n_docs = len(lengths)
    # One int64 key per token, term-major: sorted, equal (term, document) pairs sit together and
    # each run's length is the term's count in that document. A plain sort of the keys (SIMD in
    # numpy) is about 3x faster than a stable argsort of the terms.
    keys = term_ids.astype(np.int64) * n_docs
    keys += np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    keys.sort()
    starts = np.flatnonzero(np.diff(keys, prepend=-1))
    tf = np.diff(starts, append=len(keys)).astype(np.float64)
    terms, docs = np.divmod(keys[starts], n_docs)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms), out=indptr[1:])
    return indptr, docs.astype(np.int32), tf


def build_index(documents: Iterable[list[str]], params: BM25Params = BM25Params()) -> SparseIndex:
    """Index tokenised documents (in corpus order) exactly as `BM25Okapi(documents, **params)`."""
    # Term numbers in order of first occurrence: the order in which rank-bm25 fills its
    # document-frequency dict, which fixes the order of the average-idf sum.
    vocab: defaultdict[str, int] = defaultdict()
    vocab.default_factory = vocab.__len__
    term_ids = array("i")
    doc_len = array("q")
    for tokens in documents:
        doc_len.append(len(tokens))
        term_ids.extend(map(vocab.__getitem__, tokens))
    n_docs, n_terms = len(doc_len), len(vocab)
    if n_docs == 0:
        return SparseIndex({}, np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0), 0)

    lengths = np.frombuffer(doc_len, dtype=np.int64)
    indptr, indices, tf = term_rows(np.frombuffer(term_ids, dtype=np.intc), lengths, n_terms)
    doc_freq = np.diff(indptr)

    idf = np.empty(n_terms)
    idf_sum = 0.0
    for term, freq in enumerate(doc_freq.tolist()):
        # math.log, not np.log: numpy's vectorised log may differ from libm in the last bit.
        value = math.log(n_docs - freq + 0.5) - math.log(freq + 0.5)
        idf[term] = value
        idf_sum += value  # a plain running sum, as rank-bm25's (not fsum, not pairwise)
    average_idf = idf_sum / n_terms if n_terms else 0.0
    idf[idf < 0] = params.epsilon * average_idf

    k1, b = params.k1, params.b
    avgdl = int(lengths.sum()) / n_docs
    length_norm = k1 * (1 - b + b * lengths / avgdl)  # rank-bm25's grouping: (1 - b) + ((b * dl) / avgdl)
    data = np.repeat(idf, doc_freq) * (tf * (k1 + 1) / (tf + length_norm[indices]))
    return SparseIndex(dict(vocab), indptr, indices, data, n_docs)


# --------------------------------------------------------------------------- files


def save_index(fh: BinaryIO, index: SparseIndex, meta: dict[str, Any]) -> None:
    """Write the index and a JSON-able `meta` record (checked by `load_index`) as one .npz."""
    # Tokens never hold a newline (the tokeniser is alphanumeric), so one joined string is the vocabulary.
    vocab = "\n".join(index.vocab).encode("utf-8")
    np.savez(
        fh,
        meta=np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8),
        vocab=np.frombuffer(vocab, dtype=np.uint8),
        n_docs=np.array(index.n_docs, dtype=np.int64),
        indptr=index.indptr,
        indices=index.indices,
        data=index.data,
    )


def load_index(path: Path, meta: dict[str, Any]) -> SparseIndex:
    """Read an index written by `save_index` with the same `meta`; IndexFileError if it is not sound."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in ("meta", "vocab", "n_docs", "indptr", "indices", "data")}
    except FileNotFoundError:
        raise
    except Exception as exc:  # a damaged zip can fail in many ways; none of them is usable
        raise IndexFileError(f"unreadable ({type(exc).__name__}: {exc})") from None
    expected = {
        "meta": np.uint8,
        "vocab": np.uint8,
        "n_docs": np.int64,
        "indptr": np.int64,
        "indices": np.int32,
        "data": np.float64,
    }
    for name, dtype in expected.items():
        if arrays[name].dtype != dtype:
            raise IndexFileError(f"{name} has dtype {arrays[name].dtype}, expected {np.dtype(dtype)}")
    try:
        stored_meta = json.loads(arrays["meta"].tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise IndexFileError("meta is not JSON") from None
    if stored_meta != json.loads(json.dumps(meta)):
        raise IndexFileError("built for another corpus, tokeniser or parameters")

    if arrays["n_docs"].shape != () or any(arrays[name].ndim != 1 for name in expected if name != "n_docs"):
        raise IndexFileError("arrays have the wrong shape")
    n_docs = int(arrays["n_docs"])
    indptr, indices, data = arrays["indptr"], arrays["indices"], arrays["data"]
    try:
        tokens = arrays["vocab"].tobytes().decode("utf-8").split("\n") if arrays["vocab"].size else []
    except UnicodeDecodeError:
        raise IndexFileError("vocabulary is not UTF-8") from None
    vocab = {token: i for i, token in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise IndexFileError("vocabulary repeats a token")
    if indptr.shape != (len(tokens) + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise IndexFileError("row pointers do not match the vocabulary")
    if indices.shape != data.shape or indices.shape != (indptr[-1],):
        raise IndexFileError("row pointers do not match the entries")
    if indices.size and (indices.min() < 0 or indices.max() >= n_docs):
        raise IndexFileError("document numbers out of range")
    if not np.all(np.isfinite(data)):
        raise IndexFileError("weights are not finite")
    return SparseIndex(vocab, indptr, indices, data, n_docs)

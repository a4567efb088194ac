"""Searching a clue set: each distinct clue's top-k, fused round-robin into one list of documents.

The fused list takes every clue's best hit, then every clue's second-best, and so on, keeping
each document at its first place. It is the order in which a fixed budget of B documents is
spent (the first B of the list go to the checker), so every consumer of a clue set's results,
the training environment, the metrics and the multi-agent episode alike, uses this one order.

>>> from dataclasses import dataclass
>>> @dataclass
... class Hit:
...     docid: str
...     rank: int
...     score: float = 1.0
>>> class Toy:
...     def search(self, query, k):
...         table = {"a": ["d1", "d2", "d3"], "b": ["d4", "d1", "d5"]}
...         return [Hit(d, r) for r, d in enumerate(table.get(query, [])[:k])]
>>> found = search_clues(Toy(), ["a", "b", "A", "zzz"], 3)
>>> [h.docid for h in found.hits], found.duplicates, found.empty, found.redundant
(['d1', 'd4', 'd2', 'd3', 'd5'], 1, 1, 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def normalise_clue(clue: str) -> str:
    """The form in which two clues count as duplicates: their distinct lowercase words, sorted. BM25
    ignores word order, and repeating a clue's only word changes no ranking, so "Mexia Mexia",
    "mexia" and "Guam Manila" / "Manila Guam" are the same search.

    >>> normalise_clue("Manila  Guam") == normalise_clue("guam manila"), normalise_clue("Mexia Mexia")
    (True, 'mexia')
    """
    return " ".join(sorted(set(clue.lower().split())))


@dataclass(frozen=True)
class ClueHit:
    """One distinct document of a clue set's results, at its first place in the fused list."""

    docid: str
    clue_index: int
    """The clue (its index in the clue set) that put it there."""
    rank: int
    """Its rank under that clue (0 = best)."""
    score: float


@dataclass(frozen=True)
class ClueSearch:
    """What a clue set retrieved."""

    hits: tuple[ClueHit, ...]
    """Distinct documents in fused (round-robin) order."""
    duplicates: int
    """Clues that repeat an earlier clue of the set (not searched again)."""
    empty: int
    """Distinct clues whose search returned nothing."""
    redundant: int = 0
    """Distinct clues whose results hold no document that the clues before them had not found."""
    clue_docids: tuple[tuple[str, ...], ...] = ()
    """Each clue's own top-k, by the clue's index in the set (a duplicate clue: the list of the
    clue it repeats), so that what the set finds without one clue can be told without searching
    again (`searchgrpo.env.clue_credit`)."""

    def docids(self, budget: int | None = None) -> list[str]:
        """The first `budget` documents of the fused list (all of them when None)."""
        hits = self.hits if budget is None else self.hits[:budget]
        return [h.docid for h in hits]


def search_clues(retriever: Any, clues: Sequence[str], top_k: int) -> ClueSearch:
    """Search each distinct clue (top `top_k`) and fuse the lists round-robin."""
    lists: list[tuple[int, list[Any]]] = []
    seen_clues: dict[str, tuple[str, ...]] = {}
    per_clue: list[tuple[str, ...]] = []
    seen_docs: set[str] = set()
    duplicates = empty = redundant = 0
    for i, clue in enumerate(clues):
        norm = normalise_clue(clue)
        if norm in seen_clues:
            duplicates += 1
            per_clue.append(seen_clues[norm])
            continue
        hits = retriever.search(clue, top_k)
        seen_clues[norm] = tuple(h.docid for h in hits)
        per_clue.append(seen_clues[norm])
        empty += not hits
        redundant += bool(hits) and all(h.docid in seen_docs for h in hits)
        seen_docs.update(h.docid for h in hits)
        lists.append((i, hits))
    fused: dict[str, ClueHit] = {}
    for depth in range(max((len(h) for _, h in lists), default=0)):
        for clue_index, hits in lists:
            if depth < len(hits) and hits[depth].docid not in fused:
                hit = hits[depth]
                fused[hit.docid] = ClueHit(hit.docid, clue_index, depth, hit.score)
    return ClueSearch(tuple(fused.values()), duplicates, empty, redundant, tuple(per_clue))


def fused_ranking(docs: Sequence[tuple[str, int, int]]) -> list[str]:
    """Docids in round-robin order, from (docid, clue_index, rank) triples: by (rank, clue_index)."""
    return [d for d, _, _ in sorted(docs, key=lambda x: (x[2], x[1]))]

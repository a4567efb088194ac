"""Retrieval metrics of one clue set (pure functions), over its fused list of documents
(`searchgrpo.retrieval.clues`): recall at a fixed document budget, and nDCG.

>>> recall_at_budget(["a", "b", "c", "d"], {"b", "d", "z"}, 2)
0.3333333333333333
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def recall_at_budget(ranking: Sequence[str], wanted: set[str], budget: int | None) -> float:
    """Share of `wanted` among the first `budget` documents of `ranking` (all when None); 0 when
    nothing is wanted. Unlike recall of the whole union, it does not grow with the number of clues."""
    if not wanted:
        return 0.0
    shown = ranking if budget is None else ranking[:budget]
    return len(wanted.intersection(shown)) / len(wanted)


def ndcg(ranking: Sequence[str], wanted: set[str]) -> float:
    """Binary-gain nDCG of `ranking` against the `wanted` documents (0 when nothing is wanted)."""
    if not wanted:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranking) if d in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(len(wanted)))
    return dcg / ideal

"""Retrieval metrics of one clue set (pure functions): the fused ranking and nDCG."""

from __future__ import annotations

import math
from typing import Sequence


def fused_ranking(docs: Sequence[tuple[str, int, int]]) -> list[str]:
    """Docids ordered round-robin over clues: by (rank, clue_index). `docs` holds
    (docid, clue_index, rank) for each distinct document, as the environment reports them."""
    return [d for d, _, _ in sorted(docs, key=lambda x: (x[2], x[1]))]


def ndcg(ranking: Sequence[str], wanted: set[str]) -> float:
    """Binary-gain nDCG of `ranking` against the `wanted` documents (0 when nothing is wanted)."""
    if not wanted:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranking) if d in wanted)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(len(wanted)))
    return dcg / ideal

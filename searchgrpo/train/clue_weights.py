"""Per-clue advantages (`reward.per_clue`): each clue's tokens weighted by its share of the finds.

A completion's advantage says how much better its clue set did than the group's others; its
clues did not all contribute alike (`env.clue_credit`: each clue's leave-one-out share of the
set's finds). With `reward.per_clue` the advantage of every token inside clue i is multiplied by

    w_i = n * share_i                        when the advantage is positive (credit to the finders)
    w_i = n * (1 - share_i) / (n - 1)        when it is negative (blame on the others)

for a set of n >= 2 clues (w = 1 for a single clue); both average to 1 over the clues, so the
completion's total weight is unchanged, and equal shares change nothing. Tokens outside every
clue (numbering, line breaks, the end token) keep weight 1, as does every token of a completion
whose clues cannot be located in its text (`clue_credit.clue_spans`: a JSON list).

Token positions come from decoding each prefix of the completion's tokens: token j covers the
characters between the prefix lengths before and after it, and takes the weight of the first clue
span it overlaps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from searchgrpo.env.clue_credit import clue_spans


def clue_weights(shares: Sequence[float], advantage: float) -> list[float]:
    """Each clue's weight for a completion with this advantage (see the module docstring).

    >>> clue_weights([0.75, 0.25, 0.0], 1.0), clue_weights([0.75, 0.25, 0.0], -1.0)
    ([2.25, 0.75, 0.0], [0.375, 1.125, 1.5])
    """
    n = len(shares)
    if n < 2 or advantage == 0:
        return [1.0] * n
    if advantage > 0:
        return [n * s for s in shares]
    return [n * (1.0 - s) / (n - 1) for s in shares]


def token_weights(ends: Sequence[int], spans: Sequence[tuple[int, int]], weights: Sequence[float]) -> list[float]:
    """Each token's weight: token j covers characters [ends[j-1], ends[j]) (ends[-1] = 0) and takes
    the weight of the first span it overlaps, else 1.

    >>> token_weights([3, 4, 8], [(0, 3), (4, 8)], [2.0, 0.5])
    [2.0, 1.0, 0.5]
    """
    out, start = [], 0
    for end in ends:
        w = next((wt for (a, b), wt in zip(spans, weights) if start < b and a < max(end, start + 1)), 1.0)
        out.append(float(w))
        start = max(start, end)
    return out


def prefix_ends(tokenizer: Any, token_ids: Sequence[int]) -> list[int]:
    """The decoded length of each prefix of `token_ids` (as the completion's text was decoded)."""
    return [len(tokenizer.decode(list(token_ids[: j + 1]), skip_special_tokens=True)) for j in range(len(token_ids))]


def completion_token_weights(
    tokenizer: Any,
    token_ids: Sequence[int],
    text: str,
    shares: Sequence[float],
    advantage: float,
    max_clues: int,
    clue_format: str = "lines",
) -> list[float]:
    """Per-token weights of one completion (all 1 where its clues cannot be located)."""
    spans = clue_spans(text, max_clues, clue_format)
    if spans is None or len(spans) != len(shares):
        return [1.0] * len(token_ids)
    return token_weights(prefix_ends(tokenizer, token_ids), spans, clue_weights(shares, advantage))


def batch_token_weights(
    groups: Sequence[Any], adv: torch.Tensor, tokenizer: Any, max_clues: int, clue_format: str = "lines"
) -> list[list[float]]:
    """Per-token weights of every sequence of a batch (row n = group i * K + sample k), from each
    sample's `StepResult.clue_credit` and its advantage (`adv`: [G, K])."""
    out = []
    for i, grp in enumerate(groups):
        for k, (c, r) in enumerate(zip(grp.completions, grp.results)):
            out.append(
                completion_token_weights(
                    tokenizer, c.token_ids, c.text, r.clue_credit.shares, float(adv[i, k]), max_clues, clue_format
                )
            )
    return out


def row_advantages(
    seq_adv: torch.Tensor, rows: Sequence[int], weights: Sequence[Sequence[float]] | None, width: int
) -> torch.Tensor:
    """The advantages of a micro-batch's `rows`: [rows] as they are, or with per-token `weights`
    [rows, width] (padding columns weigh 1; they are masked out of the loss).

    >>> row_advantages(torch.tensor([2.0, -1.0]), [1], [[1.0], [0.5, 1.5]], 3)
    tensor([[-0.5000, -1.5000, -1.0000]])
    """
    picked = seq_adv[rows]
    if weights is None:
        return picked
    grid = torch.ones((len(rows), width), dtype=picked.dtype)
    for j, r in enumerate(rows):
        w = weights[r][:width]
        grid[j, : len(w)] = torch.tensor(w, dtype=picked.dtype)
    return picked.unsqueeze(1) * grid.to(picked.device)

"""Prompts of an exact token length from real Executor states (grpo_vs_trl.py, step_table.py)."""

from __future__ import annotations

import dataclasses
from typing import Any


def long_prompt(tokenizer: Any, state: Any, others: list[Any], n: int, cfg: Any) -> list[int]:
    """Exactly n prompt tokens from a real state: its tables extended with other states' rows until
    the rendered prompt is longer than n, then cut in the middle as `encode_prompt` cuts."""
    from searchgrpo.policy.sampling import encode_prompt

    before = state.before
    documents, context = list(before.documents), list(before.context)
    ids: list[int] = []
    for other in [None, *others]:
        if other is not None:
            documents += list(other.before.documents)
            context += list(other.before.context)
            state = dataclasses.replace(
                state, before=dataclasses.replace(before, documents=tuple(documents), context=tuple(context))
            )
        ids = encode_prompt(
            tokenizer, state, max_rows=10**6, max_tokens=10**9, min_clues=cfg.env.min_clues, max_clues=cfg.env.max_clues
        )
        if len(ids) >= n:
            break
    if len(ids) < n:
        raise ValueError(f"could not build a {n}-token prompt")
    head = n // 2
    return ids[:head] + ids[len(ids) - (n - head) :]

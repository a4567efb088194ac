"""Retrieval metrics on scored samples (pure functions).

The seed's headline metric is the IMPORTANT-document discovery rate: of the question's IMPORTANT
documents that the state had not yet discovered, the share a clue set finds.
"""

from __future__ import annotations

from typing import Iterable

from searchgrpo.checker import Label, QuestionLabels
from searchgrpo.agent_checkpoints import SearchState
from searchgrpo.env import StepResult


def undiscovered_important(state: SearchState, labels: QuestionLabels | None) -> set[str]:
    """The question's IMPORTANT docids that the state has not discovered yet."""
    if labels is None:
        return set()
    return labels.important - state.discovered


def discovery(state: SearchState, result: StepResult, labels: QuestionLabels | None) -> tuple[int, int]:
    """(IMPORTANT documents found that were still undiscovered, how many were undiscovered).

    A document the checker labels IMPORTANT but the data does not still counts as found only if
    the data marks it IMPORTANT, so the rate is measured against the data's evidence.
    """
    wanted = undiscovered_important(state, labels)
    found = {d.docid for d in result.docs if d.new and d.label is Label.IMPORTANT} & wanted
    return len(found), len(wanted)


def discovery_rate(pairs: Iterable[tuple[int, int]]) -> float:
    """Pooled rate: total found / total undiscovered (0 when nothing was left to find)."""
    found = wanted = 0
    for f, w in pairs:
        found += f
        wanted += w
    return found / wanted if wanted else 0.0

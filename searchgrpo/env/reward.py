"""The RewardCalculator: a weighted sum of named, separately reported components.

Each component is a count measured on one sample (one clue set run through search and the
checker); its weight comes from `config.reward`. Both the raw counts and the weighted values are
kept, so that the console and the event log show why a sample scored what it did.

>>> calc = RewardCalculator.from_weights({"new_important": 1.0, "already_discovered": -0.1})
>>> calc.combine({"new_important": 2, "already_discovered": 3}).total
1.7
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from searchgrpo.config import RewardConfig
from searchgrpo.data.labels import Label

COMPONENTS: tuple[str, ...] = tuple(name for name, kind in typing.get_type_hints(RewardConfig).items() if kind is float)
"""Component names, in report order: the weights among the fields of RewardConfig (its switches,
such as `per_clue` and `soft_labels`, are not components)."""

LabelProbs = tuple[float, float, float]
"""A verdict's probabilities of IMPORTANT, RELEVANT and IRRELEVANT (Label order), summing to 1."""


@dataclass(frozen=True)
class RewardBreakdown:
    """One sample's reward and where it came from."""

    counts: dict[str, float]
    """Raw component values (counts), by name."""
    weighted: dict[str, float]
    """Component value times its weight, by name."""
    total: float
    """The reward: the sum of the weighted components."""


def component_counts(
    *,
    retrieved: Iterable[tuple[Label | None, bool]],
    duplicate_clues: int,
    unparsable: bool,
    clues_written: int,
    min_clues: int,
    max_clues: int,
    long_clues: int = 0,
    question_copies: int = 0,
    empty_clues: int = 0,
    redundant_clues: int = 0,
    invented_number_clues: int = 0,
    table_copies: int = 0,
    goal_copies: int = 0,
    cut: bool = False,
    original_new_important: float | None = None,
    label_probs: Sequence[LabelProbs | None] | None = None,
) -> dict[str, float]:
    """Count every component for one sample.

    `retrieved` holds (label, already_discovered) for each distinct document the clues found (each
    one a checker call: `retrieved_doc` counts them all); `invented_number_clues` the clues with a
    number found nowhere in the state or question; `table_copies` the clues carrying the prompt's
    table syntax; `goal_copies` the clues copying the Planner's sub-goal wording; `cut` whether the
    completion hit the token limit;
    `original_new_important` is how many new IMPORTANT documents the state's original clues found
    (None: no gain is computed). `label_probs` (soft labels, `reward.soft_labels`), aligned with
    `retrieved`: a new document with probabilities counts each label's probability in that label's
    component (its expected count) instead of 1 in its label's; one with None counts its label.

    >>> c = component_counts(retrieved=[(Label.IMPORTANT, False), (Label.IRRELEVANT, True)],
    ...                      duplicate_clues=1, unparsable=False, clues_written=5, min_clues=2, max_clues=4,
    ...                      original_new_important=0)
    >>> c["new_important"], c["already_discovered"], c["duplicate_clue"], c["clue_count_out_of_bounds"]
    (1.0, 1.0, 1.0, 1.0)
    >>> c["gain_over_original"], c["retrieved_doc"]
    (1.0, 2.0)
    """
    counts = dict.fromkeys(COMPONENTS, 0.0)
    retrieved = list(retrieved)
    probs = list(label_probs) if label_probs is not None else [None] * len(retrieved)
    if len(probs) != len(retrieved):
        raise ValueError(f"{len(probs)} label probabilities for {len(retrieved)} documents")
    for (label, seen), p in zip(retrieved, probs):
        counts["retrieved_doc"] += 1
        if seen:
            counts["already_discovered"] += 1
        elif p is not None:
            counts["new_important"] += p[0]
            counts["new_relevant"] += p[1]
            counts["irrelevant"] += p[2]
        elif label is Label.IMPORTANT:
            counts["new_important"] += 1
        elif label is Label.RELEVANT:
            counts["new_relevant"] += 1
        else:
            counts["irrelevant"] += 1
    counts["duplicate_clue"] = float(duplicate_clues)
    counts["unparsable"] = 1.0 if unparsable else 0.0
    if not unparsable:  # an empty completion is already penalised once
        counts["clue_count_out_of_bounds"] = float(max(min_clues - clues_written, 0, clues_written - max_clues))
    counts["long_clue"] = float(long_clues)
    counts["question_copy"] = float(question_copies)
    counts["empty_clue"] = float(empty_clues)
    counts["redundant_clue"] = float(redundant_clues)
    counts["invented_number"] = float(invented_number_clues)
    counts["cut_clue"] = 1.0 if cut else 0.0
    counts["table_copy"] = float(table_copies)
    counts["goal_copy"] = float(goal_copies)
    if original_new_important is not None:
        counts["gain_over_original"] = counts["new_important"] - original_new_important
    return counts


def copies_question(clue_tokens: list[str], question_tokens: list[str]) -> bool:
    """A clue copies the question when it holds at least 80% of the question's distinct words and
    adds at most one of its own.

    >>> copies_question("who founded krallo systems".split(), "who founded krallo systems".split())
    True
    >>> copies_question("maren dolvik birthplace".split(), "where was the founder of krallo born".split())
    False
    """
    clue, question = set(clue_tokens), set(question_tokens)
    if not question:
        return False
    return len(clue & question) >= 0.8 * len(question) and len(clue - question) <= 1


class RewardCalculator:
    """Turns component counts into a reward with the configured weights."""

    def __init__(self, weights: RewardConfig) -> None:
        self.weights = {name: float(getattr(weights, name)) for name in COMPONENTS}
        self.soft_labels = bool(weights.soft_labels)
        """Pay the expected reward under verdicts' label probabilities (`component_counts`)."""

    @classmethod
    def from_weights(cls, weights: Mapping[str, float]) -> RewardCalculator:
        # Every component 0 but those given; RewardConfig's other field (soft_labels) keeps its default.
        fields: dict[str, typing.Any] = {
            **dict.fromkeys(COMPONENTS, 0.0),
            **weights,
        }  # keyword arguments of mixed types
        return cls(RewardConfig(**fields))

    def combine(self, counts: Mapping[str, float]) -> RewardBreakdown:
        # "+ 0.0" turns the -0.0 of a zero count times a negative weight into 0.0.
        weighted = {name: self.weights[name] * float(counts.get(name, 0.0)) + 0.0 for name in COMPONENTS}
        # Rounded so that equal outcomes give bit-equal rewards, whatever the summation order:
        # a group of equal rewards must have exactly zero variance.
        return RewardBreakdown(dict(counts), weighted, round(sum(weighted.values()), 10))

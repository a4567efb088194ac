"""Per-clue credit: what each clue of a clue set contributed to the set's finds (pure functions).

A clue set's **finds** are the reward's paid documents: each distinct document it retrieved that
the state had not discovered, worth `reward.new_important` when the checker called it IMPORTANT
and `reward.new_relevant` when RELEVANT (0 otherwise). A clue's **marginal value** is what the set
loses without it, by leave-one-clue-out replay:

    marginal_i = finds(set) - finds(set without clue i)

BM25 is deterministic, so the set without clue i retrieves exactly the union of the other clues'
top-k lists, which the search already recorded (`ClueSearch.clue_docids`), and every one of those
documents was labelled when the set was: the replay needs no search and no checker call.

Ties and zeros, precisely:

- a document that two clues both retrieve is credited to neither (either one alone suffices), and a
  duplicate clue (the same search as an earlier one) has marginal 0, as does the clue it repeats;
- **shares** normalise the marginals: share_i = marginal_i / sum(marginals) when that sum is
  positive; when it is 0 but the set found something (every find retrieved by two or more clues),
  the clues that retrieved at least one paid document share equally; when the set found nothing,
  every clue gets 1 / n. Shares always sum to 1 (an empty clue set has none).

>>> values = {"a": 1.0, "b": 0.2, "c": 0.0}
>>> credit = clue_credit((("a", "c"), ("b",), ("c",)), values)
>>> credit.marginals, [round(s, 4) for s in credit.shares]
((1.0, 0.2, 0.0), [0.8333, 0.1667, 0.0])
>>> clue_credit((("a",), ("a",)), values).shares   # both find the same: neither is needed alone
(0.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from searchgrpo.data.labels import Label
from searchgrpo.env.prompts import clue_bounds, parse_clues

ROUNDING = 10
"""Marginals are rounded to this many decimals, so that float noise never makes a tie look like a
contribution."""


@dataclass(frozen=True)
class ClueCredit:
    """Each clue's leave-one-out marginal value and its share of the set's credit, by clue index."""

    marginals: tuple[float, ...] = ()
    shares: tuple[float, ...] = ()


def doc_values(
    docs: Iterable[tuple[str, Label | None, bool]],
    new_important: float,
    new_relevant: float,
    probs: Mapping[str, Sequence[float]] | None = None,
) -> dict[str, float]:
    """Each retrieved document's paid value from (docid, label, new): the reward's weight of a new
    IMPORTANT or RELEVANT document, 0 for anything else (irrelevant, or discovered before). With
    `probs` (`reward.soft_labels`: docid -> P(IMPORTANT), P(RELEVANT), P(IRRELEVANT)), a new
    document that has them pays its expected weight, as the reward does.

    >>> doc_values([("a", Label.IMPORTANT, True), ("b", Label.IMPORTANT, False)], 1.0, 0.2)
    {'a': 1.0, 'b': 0.0}
    >>> doc_values([("a", Label.IMPORTANT, True)], 1.0, 0.2, {"a": (0.5, 0.5, 0.0)})
    {'a': 0.6}
    """
    out = {}
    for docid, label, new in docs:
        p = probs.get(docid) if probs is not None else None
        if p is not None:
            weight = p[0] * new_important + p[1] * new_relevant
        else:
            weight = new_important if label is Label.IMPORTANT else new_relevant if label is Label.RELEVANT else 0.0
        out[docid] = weight if new else 0.0
    return out


def set_value(docids: Iterable[str], values: Mapping[str, float]) -> float:
    """The finds of the union of `docids` (each distinct document counted once). A document with no
    known value is an error: the replay must never need a verdict the set did not already have."""
    return sum(values[d] for d in set(docids))


def leave_one_out(clue_docids: Sequence[Sequence[str]], values: Mapping[str, float]) -> tuple[float, ...]:
    """marginal_i = finds(every clue's documents) - finds(every clue's but clue i's)."""
    total = set_value((d for docs in clue_docids for d in docs), values)
    return tuple(
        round(total - set_value((d for j, docs in enumerate(clue_docids) if j != i for d in docs), values), ROUNDING)
        + 0.0
        for i in range(len(clue_docids))
    )


def shares_of(
    marginals: Sequence[float], clue_docids: Sequence[Sequence[str]], values: Mapping[str, float]
) -> tuple[float, ...]:
    """The marginals normalised to shares, with the module docstring's rules for ties and zeros."""
    n = len(marginals)
    if n == 0:
        return ()
    positive = [max(m, 0.0) for m in marginals]
    total = sum(positive)
    if total > 0:
        return tuple(m / total for m in positive)
    finders = [any(values.get(d, 0.0) > 0 for d in docs) for docs in clue_docids]
    if any(finders):
        return tuple((1.0 / sum(finders)) if f else 0.0 for f in finders)
    return tuple(1.0 / n for _ in range(n))


def clue_credit(clue_docids: Sequence[Sequence[str]], values: Mapping[str, float]) -> ClueCredit:
    """Marginals and shares of a clue set from each clue's retrieved docids and each document's
    paid value (`doc_values`)."""
    marginals = leave_one_out(clue_docids, values)
    return ClueCredit(marginals, shares_of(marginals, clue_docids, values))


def clue_spans(text: str, max_clues: int, clue_format: str = "lines") -> list[tuple[int, int]] | None:
    """The character span [start, end) of each clue `prompts.parse_clues` reads from a completion
    in `clue_format`, in the same order (each kept line's clue, past its bullet and quotes:
    `prompts.clue_bounds`), or None where the clues were not read line by line (a JSON list): then
    no clue can be told apart in the text.

    >>> clue_spans("1. Krallo Systems\\n\\n- Maren Dolvik\\n", 4)
    [(3, 17), (21, 33)]
    """
    if clue_format == "json":
        return None
    spans, read, at = [], [], 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
        clue = parse_clues(body, 1, clue_format).clues
        if clue:
            start, end = clue_bounds(body)
            spans.append((at + start, at + end))
            read.append(clue[0])
        at += len(line)
    return spans[:max_clues] if tuple(read[:max_clues]) == parse_clues(text, max_clues, clue_format).clues else None

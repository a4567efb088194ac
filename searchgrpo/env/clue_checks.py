"""Checks of the clue text itself: the reward hacks a metric cannot see (pure functions).

A policy learns what the reward pays for, and some of it is not search skill: facts invented
inside clues (a year in brackets, "Dai Jitao (2018)"), filler clues cut at the token limit
("3rd search clue (1"), a row of the prompt's table copied into clues ("IRRELEVANT | Suzanne
Iroche"), the Planner's sub-goal wording copied into clues ("Who or what Gravy Train leads to"),
one template stamped on every question. These functions find them; the reward penalises invented
numbers, cut clues, copied table rows and copied sub-goal wording per sample, and eval reports all
of them over a whole set.

>>> invented_numbers("Dai Jitao (2018) birthplace", numbers_in("Who was Dai Jitao? born 1891"))
['2018']
>>> clue_prefix("  3rd Search clue (1")
'3rd search'
>>> clue_template("Maren Dolvik birthplace 1950")
'N birthplace #'
>>> copies_table_row("IRRELEVANT | The Gravy Train"), copies_table_row("Gravy Train director")
(True, False)
>>> wording = planner_wording(["find the document about who or what The Gravy Train leads to"],
...                           "When did the director of film The Gravy Train die?")
>>> sorted(wording)
['about', 'document', 'find', 'leads', 'or', 'to', 'what', 'who']
>>> copies_planner_wording("Who or what Gravy Train leads to", wording)
True
>>> copies_planner_wording("Gravy Train director", wording), copies_planner_wording("Gravy Train (film)", wording)
(False, False)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from searchgrpo.data.traces import SearchState

_NUMBER = re.compile(r"\d+")
_WORD = re.compile(r"[\w'\-]+")


def numbers_in(text: str) -> set[str]:
    """The digit runs in `text`, without leading zeros ("007" and "7" are the same number)."""
    return {m.lstrip("0") or "0" for m in _NUMBER.findall(text)}


def invented_numbers(clue: str, known: set[str]) -> list[str]:
    """The numbers of `clue` that appear nowhere in `known` (the state's and question's numbers)."""
    return sorted(numbers_in(clue) - known)


_TABLE_WORDS = frozenset({"IMPORTANT", "RELEVANT", "IRRELEVANT"})
"""The verdict labels as the prompt's document table writes them (upper case)."""


def copies_table_row(clue: str) -> bool:
    """Whether a clue carries the prompt's document-table syntax: its column separator `|` or a
    verdict label in capitals. No search needs either; a policy stamps a table row on its clues
    ("IRRELEVANT | Suzanne Iroche") when the reward has nothing left to pay for."""
    return "|" in clue or not _TABLE_WORDS.isdisjoint(_WORD.findall(clue))


PLANNER_WORDS_IN_A_COPY = 3
"""Distinct Planner-only words that make a clue a copy of the sub-goals' wording: one or two can be
a real search word the question lacks ("director"); three are the instruction's phrasing."""


def planner_wording(goal_texts: Iterable[str], told: str) -> set[str]:
    """The lowercased words of the Planner's sub-goals and goals (`goal_texts`) that appear nowhere in
    the rest of what the Executor is told (`told`: question, tables, context): the instruction's own
    phrasing ("find the document about who or what X leads to"), not the names it is about."""
    elsewhere = {w.lower() for w in _WORD.findall(told)}
    return {w.lower() for text in goal_texts for w in _WORD.findall(text)} - elsewhere


def copies_planner_wording(clue: str, wording: set[str]) -> bool:
    """Whether a clue holds `PLANNER_WORDS_IN_A_COPY` or more distinct words of `wording`
    (`planner_wording`): a sub-goal rephrased as a search ("Who or what Gravy Train leads to"),
    which BM25 reads as the name it holds plus filler."""
    return len({w.lower() for w in _WORD.findall(clue)} & wording) >= PLANNER_WORDS_IN_A_COPY


def _goal_texts(state: SearchState) -> list[str]:
    """The Planner's words in a state: its sub-goals and its goals' texts."""
    return [*state.before.sub_goals, *(g.text for g in state.before.goals)]


def _told_apart_from_goals(state: SearchState) -> list[str]:
    """What the Executor is told about a state besides the Planner's goals and its earlier clues:
    the question, context, entity table, goal answers and document table."""
    b = state.before
    parts = [state.question, *b.context]
    for e in b.entities:
        parts += [e.name, e.type, *e.facts]
    parts += [g.answer or "" for g in b.goals]
    for d in b.documents:
        parts += [d.title, d.note]
    return parts


def state_planner_wording(state: SearchState) -> set[str]:
    """`planner_wording` of a state: its sub-goals and goals against everything else it shows."""
    return planner_wording(_goal_texts(state), "\n".join(_told_apart_from_goals(state)))


def state_text(state: SearchState) -> str:
    """Everything the Executor is told about a state, as one text: question, sub-goals and tables."""
    return "\n".join([*_told_apart_from_goals(state), *_goal_texts(state), *state.before.clues])


def clue_prefix(clue: str, words: int = 2) -> str:
    """The clue's first `words` words, lowercased: filler clues share it across questions."""
    return " ".join(w.lower() for w in _WORD.findall(clue)[:words])


def clue_template(clue: str) -> str:
    """The clue's shape: each run of capitalised words becomes N, each number #, other words stay
    (lowercased)."""
    out: list[str] = []
    for word in _WORD.findall(clue):
        token = "#" if word.isdigit() else "N" if word[:1].isupper() else word.lower()
        if not (token == "N" and out and out[-1] == "N"):
            out.append(token)
    return " ".join(out)


def shared_shape(clue_sets: Sequence[Iterable[str]], shape=clue_prefix) -> tuple[str, float]:
    """The most common shape (prefix or template) among the clue sets and the share of clue sets
    holding a clue of that shape; ("", 0.0) when there are no clues.

    >>> shared_shape([["a b c", "x y"], ["a b d"], ["q r"]])
    ('a b', 0.6666666666666666)
    """
    sets = [{shape(c) for c in clues} - {""} for clues in clue_sets]
    counts = Counter(s for shapes in sets for s in shapes)
    if not counts:
        return "", 0.0
    top, n = counts.most_common(1)[0]
    return top, n / len(sets)

"""Rule-based stand-ins for the multi-agent system's frozen agents, used to write traces.

The baseline pass of `collect` needs a Planner, an Executor and an EntityManager. These are simple,
documented and deterministic rules, so that checkpoints can be made offline for any question set:

- Planner: SEARCH first; EXTRACT after a search that found new IMPORTANT documents; SEARCH again
  while some sub-goal is open; ANSWER when every sub-goal is done or at the round limit. A sub-goal
  counts as done once as many IMPORTANT documents are known as sub-goals up to and including it.
  A question the data gives no sub-goals for is decomposed by `episodes.play.planned_sub_goals`: a
  goal per entity it names, and for a comparison through a bridge ("which film's director was
  born first, X or Y", `bridge_relation`) a further goal per side for the bridge (X's director).
- Executor (the baseline policy that GRPO improves on): two or three keyword clues built from the
  question, the open goal and, only sometimes, the names the EntityManager has found. It stays
  weak on purpose: the names it leaves unused are the headroom a trained policy can take.
- EntityManager: from each IMPORTANT document, an entity for its title (facts: its first
  sentences) and an entity for every capitalised name it mentions that the question does not
  (facts: the sentence that mentions it).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from searchgrpo.data.corpus import Document
from searchgrpo.data.traces import DocumentRecord, Entity, Goal, RoundState

RULES_VERSION = 4
"""Changes whenever the rules do, so that cached collects made with older rules are not reused."""

_WORD = r"(?:[A-Z]\.|[A-Z][\w'\-]*)"
_NAME = re.compile(rf"\b{_WORD}(?:\s+(?:(?:of|the|de|van|von|du|la|da|der|del)\s+)?{_WORD})*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOP_NAMES = {
    "It",
    "He",
    "She",
    "They",
    "The",
    "A",
    "An",
    "In",
    "On",
    "At",
    "His",
    "Her",
    "Its",
    "This",
    "That",
    "These",
    "Those",
    "As",
    "After",
    "Before",
    "During",
    "When",
    "While",
    "Records",
    "Local",
    "Who",
    "Whom",
    "Whose",
    "What",
    "Which",
    "Where",
    "Why",
    "How",
    "Do",
    "Does",
    "Did",
    "Are",
    "Is",
    "Was",
    "Were",
    "Has",
    "Have",
    "Had",
    "Can",
    "Could",
    "Will",
    "Would",
    "Both",
}
_QUESTION_WORDS = {
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "where",
    "when",
    "why",
    "how",
    "in",
    "is",
    "was",
    "were",
    "did",
    "does",
    "do",
    "the",
    "a",
    "an",
    "of",
    "and",
    "are",
    "same",
    "by",
}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def names_in(text: str) -> list[str]:
    """Capitalised name phrases in `text`, in order, without repeats or sentence-start words."""
    out: list[str] = []
    for m in _NAME.finditer(text):
        name = m.group(0).strip()
        words = name.split()
        while words and words[0] in _STOP_NAMES:
            words = words[1:]
        name = " ".join(words)
        if name.endswith("'s"):
            name = name[:-2]
        if len(name) >= 3 and name not in out:
            out.append(name)
    return out


_RELATION = r"(director|father|mother|composer|performer|spouse|wife|wives|husband|founder|creator|producer)s?"
_BRIDGE = re.compile(rf"\b(?:the|whose|their|its)\s+{_RELATION}\b|\b{_RELATION}\s+of\b", re.IGNORECASE)
_COMPARISON = re.compile(r"\b(?:or|both|same|share)\b", re.IGNORECASE)


def bridge_relation(question: str) -> str | None:
    """The relation a comparison asks about through a bridge, else None: "director" for "Which film
    has the director born first, X or Y?" or "Do director of film X and director of film Y share
    the same nationality?" (each side needs its film's page and then its director's), None for
    "Which director had the longer career, X or Y?" (the two people's own pages answer it)."""
    if not _COMPARISON.search(question):
        return None
    m = _BRIDGE.search(question)
    if m is None:
        return None
    word = (m.group(1) or m.group(2)).lower()
    return "wife" if word.startswith("wive") else word


def keywords(text: str) -> str:
    words = re.findall(r"[\w'\-]+", text)
    return " ".join(w for w in words if w.lower() not in _QUESTION_WORDS)


class RulePlanner:
    """Chooses the next round's strategy (see the module docstring)."""

    def __init__(self, max_rounds: int = 6) -> None:
        self.max_rounds = max_rounds

    def next_strategy(self, state: RoundState, round_no: int, last_found_important: bool) -> str:
        if round_no >= self.max_rounds or (state.goals and all(g.status == "done" for g in state.goals)):
            return "ANSWER"
        if state.strategy == "SEARCH" and last_found_important:
            return "EXTRACT"
        return "SEARCH"


class RuleExecutor:
    """The baseline clue writer (see the module docstring)."""

    def __init__(self, seed: int = 0, use_entities_p: float = 0.35) -> None:
        self.seed = seed
        self.use_entities_p = use_entities_p

    def write_clues(self, requests: Sequence[Any]) -> list[list[str]]:
        """Clues for each `ClueRequest` (question_id, question, state, round_no) of a round."""
        return [self.clues(r.question_id, r.question, r.state, r.round_no) for r in requests]

    def clues(self, question_id: str, question: str, state: RoundState, round_no: int) -> list[str]:
        rng = random.Random(f"{self.seed}:{question_id}:{round_no}")
        open_goals = [g.text for g in state.goals if g.status != "done"]
        goal = open_goals[0] if open_goals else ""
        clues = [keywords(question)]
        q_names = names_in(question)
        second = " ".join([*q_names, keywords(goal)]).strip()
        if second and second.lower() != clues[0].lower():
            clues.append(second)
        known = [e.name for e in state.entities if e.name not in q_names]
        if known and rng.random() < self.use_entities_p:
            clues.append(f"{rng.choice(known[-3:])} {keywords(goal)}".strip())
        if len(clues) < 2:
            clues.append(f"{keywords(question)} {keywords(goal)}".strip())
        return clues


class RuleEntityManager:
    """Fills the entity table from IMPORTANT documents (see the module docstring)."""

    def update(self, state: RoundState, question: str, important: list[Document]) -> tuple[Entity, ...]:
        entities = {e.name: e for e in state.entities}
        q_names = set(names_in(question))
        for doc in important:
            own = entities.get(doc.title)
            facts = tuple(s[:200] for s in sentences(doc.text)[:2])
            if own is None:
                entities[doc.title] = Entity(doc.title, "document", facts, (doc.docid,))
            elif doc.docid not in own.source_docids:
                entities[doc.title] = replace(own, source_docids=(*own.source_docids, doc.docid))
            for sentence in sentences(doc.text):
                for name in names_in(sentence):
                    if name == doc.title or name in q_names or name in entities:
                        continue
                    entities[name] = Entity(name, "mentioned", (f"in {doc.title}: {sentence[:200]}",), (doc.docid,))
        return tuple(entities.values())


def update_goals(goals: tuple[Goal, ...], important_count: int) -> tuple[Goal, ...]:
    """Goal i is done once i + 1 IMPORTANT documents are known."""
    return tuple(replace(g, status="done" if important_count >= i + 1 else "open") for i, g in enumerate(goals))


def merge_documents(known: tuple[DocumentRecord, ...], new: list[DocumentRecord]) -> tuple[DocumentRecord, ...]:
    seen = {d.docid for d in known}
    return known + tuple(d for d in new if d.docid not in seen)

"""The Planner and the EntityManager as the frozen base LLM, for `collect --planner llm` and
`--entity-manager llm`.

Both call the same OpenAI-compatible server as the LLM checker, greedily and with thinking
disabled, and constrain the reply with the server's structured-output support. Each keeps the
rule-based agent of `agents.py` as its floor, so a poor reply never derails a run; every time
the rule decides instead of the model, `fallbacks` counts it.

- `LLMPlanner`: round 1 is always SEARCH (nothing is known yet) and the last round always
  ANSWER; in between the model chooses SEARCH / EXTRACT / ANSWER from the goal and document
  tables.
- `LLMEntityManager`: for each IMPORTANT document not yet read, an entity for the document's
  title (as the rule does) plus the entities the model lists as JSON
  {"entities": [{"name", "type", "fact"}]}; names the document does not contain are dropped.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from searchgrpo.agents.chat_client import ChatClient, constrain, reply_text
from searchgrpo.agents.rules import RuleEntityManager, RulePlanner, sentences
from searchgrpo.data.corpus import Document
from searchgrpo.data.traces import Entity, RoundState

STRATEGIES = ("SEARCH", "EXTRACT", "ANSWER")
MAX_ENTITIES = 5
ENTITY_SCHEMA = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "maxItems": MAX_ENTITIES,
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "fact": {"type": "string"}},
                "required": ["name", "type", "fact"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["entities"],
    "additionalProperties": False,
}

PLANNER_PROMPT = (
    "You are the Planner of a deep-search team that answers multi-hop questions. Choose the team's "
    "next action:\nSEARCH - look for documents the team still needs;\nEXTRACT - read the IMPORTANT "
    "documents found into the entity table;\nANSWER - enough is known to answer.\nAnswer with the action only."
)
ENTITY_PROMPT = (
    "You are the EntityManager of a deep-search team. From the document, list at most "
    f"{MAX_ENTITIES} named entities (people, places, works, organisations, dates) that help answer "
    "the question, each with its type and one short fact from the document. Answer in JSON: "
    '{"entities": [{"name": ..., "type": ..., "fact": ...}]}.'
)


class _LLMAgent:
    def __init__(self, client: ChatClient, model: str, structured_output: str, max_tokens: int) -> None:
        self.client = client
        self.model = model
        self.structured_output = structured_output
        self.max_tokens = max_tokens
        self.fallbacks = 0

    def _ask(self, system: str, user: str, **constraint: Any) -> str:
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
            "chat_template_kwargs": {"enable_thinking": False},
        }
        return reply_text(self.client.chat(constrain(body, self.structured_output, **constraint)))


class LLMPlanner(_LLMAgent):
    """Chooses the next strategy with the LLM (see the module docstring)."""

    def __init__(self, client: ChatClient, model: str, structured_output: str, max_rounds: int = 6) -> None:
        super().__init__(client, model, structured_output, max_tokens=16)
        self.max_rounds = max_rounds
        self._rule = RulePlanner(max_rounds)

    def next_strategy(self, state: RoundState, round_no: int, last_found_important: bool) -> str:
        rule = self._rule.next_strategy(state, round_no, last_found_important)
        if round_no == 1 or round_no >= self.max_rounds:
            return rule
        goals = "\n".join(f"- [{g.status}] {g.text}" for g in state.goals) or "(none)"
        important = [d.title or d.docid for d in state.documents if d.verdict == "IMPORTANT"]
        user = (
            f"Round {round_no} of {self.max_rounds}. The last round was {state.strategy}.\n"
            f"Goals:\n{goals}\n"
            f"Documents found: {len(state.documents)}, IMPORTANT: {', '.join(important) or 'none'}.\n"
            f"Entities known: {len(state.entities)}.\nNext action (SEARCH, EXTRACT or ANSWER):"
        )
        text = self._ask(PLANNER_PROMPT, user, choices=STRATEGIES, name="action")
        choice = _first_word_of(text, STRATEGIES)
        if choice is None:
            self.fallbacks += 1
            return rule
        return choice


class LLMEntityManager(_LLMAgent):
    """Fills the entity table with the LLM (see the module docstring)."""

    def __init__(self, client: ChatClient, model: str, structured_output: str, max_doc_chars: int = 1200) -> None:
        super().__init__(client, model, structured_output, max_tokens=256)
        self.max_doc_chars = max_doc_chars
        self._rule = RuleEntityManager()

    def update(self, state: RoundState, question: str, important: list[Document]) -> tuple[Entity, ...]:
        entities = {e.name: e for e in state.entities}
        read = {d for e in state.entities for d in e.source_docids}
        for doc in important:
            if doc.docid in read:
                continue
            if doc.title not in entities:
                entities[doc.title] = Entity(
                    doc.title, "document", tuple(s[:200] for s in sentences(doc.text)[:2]), (doc.docid,)
                )
            found = self._extract(question, doc)
            if found is None:
                self.fallbacks += 1
                rule_state = replace(state, entities=tuple(entities.values()))
                entities = {e.name: e for e in self._rule.update(rule_state, question, [doc])}
                continue
            for e in found:
                entities.setdefault(e.name, e)
        return tuple(entities.values())

    def _extract(self, question: str, doc: Document) -> list[Entity] | None:
        text = " ".join(doc.text.split())[: self.max_doc_chars]
        reply = self._ask(
            ENTITY_PROMPT,
            f"Question: {question}\n\nDocument title: {doc.title}\nDocument text: {text}",
            schema=ENTITY_SCHEMA,
            name="entities",
        )
        try:
            data = json.loads(reply)
        except json.JSONDecodeError:
            return None
        items = data.get("entities") if isinstance(data, dict) else None
        if not isinstance(items, list):
            return None
        haystack = f"{doc.title} {doc.text}".lower()
        out = []
        for item in items[:MAX_ENTITIES]:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                continue
            name = " ".join(item["name"].split())
            if len(name) < 2 or name.lower() not in haystack:
                continue  # a name the document does not contain is the model's invention
            fact = given if isinstance(given := item.get("fact"), str) else ""
            kind = given if isinstance(given := item.get("type"), str) else ""
            out.append(Entity(name, kind[:40], (f"in {doc.title}: {fact[:200]}",) if fact else (), (doc.docid,)))
        return out


def _first_word_of(text: str, words: tuple[str, ...]) -> str | None:
    """The first of `words` in `text` (also inside JSON), case-insensitive; None if none is."""
    upper = text.upper()
    hits = [(upper.find(w), w) for w in words if w in upper]
    return min(hits)[1] if hits else None

"""The Executor's prompt (a state rendered as text) and the parser of its clues.

The prompt shows the question, the sub-goals and the entity, goal, document and context tables of
the state before the round, then asks for search clues, one per line. `PROMPT_VERSION` changes
whenever the wording does, so that caches and checkpoints can tell prompts apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from searchgrpo.data.traces import SearchState

PROMPT_VERSION = "executor-v2"

SYSTEM_PROMPT = (
    "You are the Executor of a deep-search team. You write search clues: short keyword queries "
    "for a BM25 search engine. Good clues name the specific entities the team still needs "
    "documents about, using names from the tables."
)

_VERDICT_ORDER = {"IMPORTANT": 0, "RELEVANT": 1}


def _table(title: str, rows: list[str], limit: int, hidden: str, keep_first: bool = False) -> list[str]:
    """A titled bullet list of at most `limit` rows: the last ones, or the first with keep_first."""
    if not rows:
        return [f"{title}: (none)"]
    shown = rows[:limit] if keep_first else rows[-limit:]
    out = [f"{title}:"] + [f"- {r}" for r in shown]
    if len(rows) > len(shown):
        out.append(f"- ({len(rows) - len(shown)} more {hidden} not shown)")
    return out


def _short(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def render_state(state: SearchState, max_rows: int, min_clues: int, max_clues: int) -> str:
    """The user message for one state. Tables keep their `max_rows` most recent rows; documents
    are listed most useful first (IMPORTANT, RELEVANT, then the rest, newest first)."""
    b = state.before
    lines = [f"Question: {state.question}"]
    if state.sub_goals:
        lines.append("Sub-goals:")
        lines += [f"{i}. {g}" for i, g in enumerate(state.sub_goals, 1)]
    entity_rows = [
        f"{e.name}"
        + (f" ({e.type})" if e.type else "")
        + (f": {'; '.join(_short(f) for f in e.facts[:2])}" if e.facts else "")
        for e in b.entities
    ]
    lines += _table("Entities", entity_rows, max_rows, "entities")
    goal_rows = [f"[{g.status}] {g.text}" + (f" -> {g.answer}" if g.answer else "") for g in b.goals]
    lines += _table("Goals", goal_rows, max_rows, "goals")
    # Useful documents first: a long tail of IRRELEVANT ones is what gets cut.
    docs = sorted(b.documents, key=lambda d: (_VERDICT_ORDER.get(d.verdict.upper(), 2), -d.round))
    doc_rows = [f"{d.verdict or '?'} | {d.title or d.docid}" for d in docs]
    lines += _table("Documents found", doc_rows, max_rows, "documents", keep_first=True)
    lines += _table("Context", list(b.context), max_rows, "notes")
    lines.append(
        f"Write {min_clues} to {max_clues} new search clues for the next search, one per line, "
        "with no numbering and no explanation."
    )
    return "\n".join(lines)


def build_messages(state: SearchState, max_rows: int, min_clues: int, max_clues: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": render_state(state, max_rows, min_clues, max_clues)},
    ]


# --------------------------------------------------------------------------- parsing

_BULLET = re.compile(r"^\s*(?:[-*•>]+|\(?\d+[.):]|clue\s*\d*\s*[:.-]|query\s*\d*\s*[:.-])\s*", re.IGNORECASE)
_QUOTES = "\"'`“”‘’"


@dataclass(frozen=True)
class ParsedClues:
    """Clues read from one completion."""

    clues: tuple[str, ...]
    """The clues kept (at most max_clues), in order."""
    written: int
    """How many clues the completion held before the cap."""
    unparsable: bool
    """No clue could be read at all."""


def _clean(line: str) -> str:
    line = _BULLET.sub("", line).strip().strip(_QUOTES).strip()
    return " ".join(line.split())


def clue_bounds(line: str) -> tuple[int, int]:
    """Where in `line` the clue `parse_clues` reads from it lies: [start, end), past the bullet or
    numbering and the quotes around it.

    >>> line = '2) "Maren Dolvik" '
    >>> line[slice(*clue_bounds(line))]
    'Maren Dolvik'
    """
    m = _BULLET.match(line)
    start, end = (m.end() if m else 0), len(line)
    while start < end and (line[start].isspace() or line[start] in _QUOTES):
        start += 1
    while end > start and (line[end - 1].isspace() or line[end - 1] in _QUOTES):
        end -= 1
    return start, end


def parse_clues(text: str, max_clues: int) -> ParsedClues:
    """One clue per non-empty line (bullets and numbering are stripped); a JSON list also works."""
    candidates: list[str] = []
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
            if isinstance(data, list) and all(isinstance(x, str) for x in data):
                candidates = [_clean(x) for x in data]
        except json.JSONDecodeError:
            pass
    if not candidates:
        candidates = [_clean(line) for line in text.splitlines()]
    clues = [c for c in candidates if any(ch.isalnum() for ch in c)]
    return ParsedClues(tuple(clues[:max_clues]), len(clues), not clues)

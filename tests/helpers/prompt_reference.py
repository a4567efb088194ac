"""The Executor's prompt as the Python code wrote it before prompts were templates ("executor-v2"),
kept frozen: the built-in template (`searchgrpo/env/templates/executor.jinja`) must render exactly
this, character for character (tests/unit/env/test_prompt_template.py)."""

from __future__ import annotations

from searchgrpo.data.traces import SearchState

SYSTEM_PROMPT = (
    "You are the Executor of a deep-search team. You write search clues: short keyword queries "
    "for a BM25 search engine. Good clues name the specific entities the team still needs "
    "documents about, using names from the tables."
)

_VERDICT_ORDER = {"IMPORTANT": 0, "RELEVANT": 1}


def _table(title: str, rows: list[str], limit: int, hidden: str, keep_first: bool = False) -> list[str]:
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

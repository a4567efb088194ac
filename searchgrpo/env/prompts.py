"""The Executor's prompt (a state rendered through the prompt template) and the parser of its clues.

The prompt is a Jinja2 template (`prompt.template`; `searchgrpo.env.prompt_template`): the
built-in one shows the question, the sub-goals and the entity, goal, document and context tables
of the state before the round, then asks for search clues in `prompt.clue_format`. The parser
reads clues in that same format (`parse_clues`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from searchgrpo.data.traces import RoundState, SearchState
from searchgrpo.env.prompt_template import PromptTemplate, load_template

PROMPT_VERSION = "executor-v2"
"""The built-in prompt's wording, as it was before templates (the built-in template renders it
exactly); a template's own `version` carries its digest."""


def build_messages(
    state: SearchState, max_rows: int, min_clues: int, max_clues: int, template: PromptTemplate | None = None
) -> list[dict[str, str]]:
    """The Executor's chat messages for `state`, rendered with `template` (None: the built-in one)."""
    template = template or default_template()
    return template.messages(state, max_rows=max_rows, min_clues=min_clues, max_clues=max_clues)


_DEFAULT: list[PromptTemplate] = []


def default_template() -> PromptTemplate:
    """The built-in template with the `lines` clue format (loaded once)."""
    if not _DEFAULT:
        _DEFAULT.append(load_template(None))
    return _DEFAULT[0]


def system_prompt(template: PromptTemplate | None = None) -> str:
    """The system message a template renders (the built-in one's: the Executor's role)."""
    empty = SearchState("", "", "", (), 1, RoundState(), ())
    messages = build_messages(empty, 1, 1, 1, template)
    return messages[0]["content"] if messages[0]["role"] == "system" else ""


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


_NUMBERED = re.compile(r"^\s*\(?\d+[.)]\s*(.*)$")


def _json_list(text: str) -> list[str] | None:
    """The list of strings between the text's first `[` and last `]`, or None when there is none."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except (json.JSONDecodeError, RecursionError):
        return None
    return data if isinstance(data, list) and all(isinstance(x, str) for x in data) else None


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


def parse_clues(text: str, max_clues: int, clue_format: str = "lines") -> ParsedClues:
    r"""The clues of a completion in `clue_format` (`prompt.clue_format`):

    - `lines`: one clue per non-empty line (bullets and numbering are stripped); a completion that
      is a JSON list of strings is read as one too;
    - `numbered`: only lines numbered `1.`, `2)`, `(3)` ... are clues; any other line is commentary;
    - `json`: a JSON list of strings, from the first `[` to the last `]` (a code fence or a sentence
      around it is ignored); anything else holds no clue.

    Clues are cleaned the same way in every format (quotes, bullets and extra spaces removed), and
    kept only when they hold a letter or digit.

    >>> parse_clues("1. alpha\nsee above\n2) beta", 4, "numbered").clues
    ('alpha', 'beta')
    >>> parse_clues('Here: ["alpha", "beta gamma"]', 4, "json").clues
    ('alpha', 'beta gamma')
    """
    candidates: list[str] = []
    if clue_format == "json":
        candidates = [_clean(x) for x in _json_list(text) or []]
    elif clue_format == "numbered":
        candidates = [_clean(m.group(1)) for m in map(_NUMBERED.match, text.splitlines()) if m]
    elif clue_format == "lines":
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
    else:
        raise ValueError(f"unknown clue format {clue_format!r}")
    clues = [c for c in candidates if any(ch.isalnum() for ch in c)]
    return ParsedClues(tuple(clues[:max_clues]), len(clues), not clues)

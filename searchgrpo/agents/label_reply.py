"""Reading a checker's reply: it counts only when it is exactly one label.

A frozen LLM judge that ignores structured output writes prose, negations and other labels; taking
the first label word anywhere in the reply would turn `Not important.` into IMPORTANT and
`{"label": "none", "reason": "nothing IMPORTANT here"}` into IMPORTANT too, so that the reward pays
for every document retrieved. `parse_label` accepts a reply only in these forms (labels compared
case-insensitively, surrounding whitespace ignored), and everything else is unparsable (None):

1. thinking removed first: every closed `<think>...</think>` block, and everything up to a
   `</think>` that no `<think>` opened (a chat template that opens the block in the prompt). An
   unclosed `<think>` means the reply was cut while thinking: unparsable;
2. a Markdown code fence around the whole reply (```` ``` ```` or ```` ```json ````) is removed;
3. a JSON object whose `label` field is a string equal to a label (other fields, such as a
   reason, are allowed and ignored). A JSON object with any other label, or none, is unparsable,
   whatever its other fields say; so is a JSON string, number, list or a cut object;
4. otherwise the whole reply equal to a label, allowing one trailing period (`Irrelevant.`), since
   models end sentences with one; nothing else: no quotes, bold, prefix (`Label: IMPORTANT`) or
   negation (`Not important.`, `NOT IMPORTANT`, `RELEVANT? No: IRRELEVANT`).
"""

from __future__ import annotations

import json
import re

from searchgrpo.data.labels import Label

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n?(.*?)\n?```\Z", re.DOTALL | re.IGNORECASE)


def without_thinking(text: str) -> str | None:
    """`text` without its thinking (rule 1 of the module docstring); None when thinking is left open."""
    close = _THINK_CLOSE.search(text)
    if close is not None and not _THINK_OPEN.search(text, 0, close.start()):
        text = text[close.end() :]  # the template opened the block: the reply starts inside it
    text = _THINK_BLOCK.sub("", text)
    if _THINK_OPEN.search(text) or _THINK_CLOSE.search(text):
        return None
    return text


def parse_label(text: str) -> Label | None:
    """The label a reply is exactly (see the module docstring), or None when it is unparsable.

    >>> parse_label('{"label": "RELEVANT"}'), parse_label("Irrelevant."), parse_label("Not important.")
    (<Label.RELEVANT: 'RELEVANT'>, <Label.IRRELEVANT: 'IRRELEVANT'>, None)
    """
    body = without_thinking(text)
    if body is None:
        return None
    body = body.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if body.startswith(("{", "[", '"')):
        try:
            data = json.loads(body)
        except json.JSONDecodeError:
            return None
        return Label.parse(data.get("label")) if isinstance(data, dict) else None
    return Label.parse(body.removesuffix(".")) if body.rstrip(".") == body.removesuffix(".") else None

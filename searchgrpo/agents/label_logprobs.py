"""Label probabilities from a chat completion's `logprobs` (the `llm` checker's soft labels).

The `llm` checker asks for `logprobs` with `top_logprobs` alternatives per token. The token where
the reply's label begins carries the model's choice between the labels: each alternative there is
credited to the label it starts (or spells out, closing quote and all), and the three sums are
normalised into `Verdict.probs`. Text before the label inside that token (a JSON quote) must be
matched too. Alternatives that start no label, or nothing at all, are left out.

That works only where the three labels' first tokens differ. A server whose tokenizer (or grammar,
llama.cpp's decodes constrained replies one character at a time) starts two labels with the same
token, say "I" for IMPORTANT and IRRELEVANT, cannot tell them apart at that token; the reply then
gets no probabilities, with the reason saying so (`label_probs` returns it).
"""

from __future__ import annotations

import math
from typing import Any

from searchgrpo.data.labels import Label

LABELS = tuple(label.value for label in Label)


def labels_started(rest: str) -> list[int]:
    """Indices of the labels (Label order) that the text `rest` starts, or spells out and goes on.

    >>> labels_started("IMP"), labels_started("I"), labels_started('RELEVANT"'), labels_started("Rel")
    ([0], [0, 2], [1], [1])
    >>> labels_started(""), labels_started("The")
    ([], [])
    """
    text = rest.upper()
    if not text.strip():
        return []
    return [i for i, label in enumerate(LABELS) if label.startswith(text) or text.startswith(label)]


def _label_token(content: list[dict[str, Any]], start: int) -> tuple[dict[str, Any], str] | None:
    """The logprobs entry of the token in which character `start` of the reply falls, and the
    part of that token before it."""
    at = 0
    for entry in content:
        token = entry.get("token")
        if not isinstance(token, str):
            return None
        if at <= start < at + len(token):
            return entry, token[: start - at]
        at += len(token)
    return None


def label_probs(reply: dict[str, Any], text: str, label: Label) -> tuple[tuple[float, float, float] | None, str]:
    """(probabilities of IMPORTANT, RELEVANT, IRRELEVANT, '') read at the token where `label`
    begins in the reply `text`; (None, why) when the reply has no usable logprobs."""
    try:
        content = reply["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        return None, "the server returned no logprobs"
    if not isinstance(content, list) or not all(isinstance(e, dict) for e in content):
        return None, "the server's logprobs are not a list of tokens"
    spelled = "".join(str(e.get("token", "")) for e in content)
    offset = spelled.find(text)  # 0, or where the reply starts once the server stripped its whitespace
    if offset < 0:
        return None, "the server's logprobs do not spell the reply"
    start = text.upper().find(label.value)
    found = _label_token(content, offset + start) if start >= 0 else None
    if found is None:
        return None, "the label is not in the reply's tokens"
    entry, lead = found
    options = {str(entry["token"]): entry.get("logprob")}
    for alt in entry.get("top_logprobs") or []:
        if isinstance(alt, dict) and isinstance(alt.get("token"), str):
            options.setdefault(alt["token"], alt.get("logprob"))
    mass = [0.0] * len(LABELS)
    for token, logprob in options.items():
        if not token.startswith(lead) or not isinstance(logprob, (int, float)) or not math.isfinite(logprob):
            continue
        started = labels_started(token[len(lead) :])
        if len(started) > 1:
            return None, (
                f"the labels' first tokens are not distinct on this server ({token[len(lead) :]!r} starts "
                f"{' and '.join(LABELS[i] for i in started)})"
            )
        if started:
            mass[started[0]] += math.exp(logprob)
    total = sum(mass)
    if total <= 0.0:
        return None, "no label among the alternatives at the label's first token"
    return (mass[0] / total, mass[1] / total, mass[2] / total), ""

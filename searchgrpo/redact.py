"""Secrets the process holds (the checker's API key), and blanking them out of any text.

A secret is registered once, where it is read (`ChatClient`); from then on `scrub` replaces it,
in every spelling text can carry it (as is, escaped as Python or JSON would quote it, or
URL-encoded), with `[api key]`. The event log, the terminal's sinks and the CLI's error line pass
their text through `scrub`, so a server that echoes a request, or an exception that quotes a header
value, cannot put the key into events.jsonl or onto the terminal.
"""

from __future__ import annotations

import json
import threading
from urllib.parse import quote

MASK = "[api key]"
MIN_SECRET_CHARS = 4
"""Shorter values are not treated as secrets (blanking every "a" would garble all text)."""

_lock = threading.Lock()
_forms: tuple[str, ...] = ()


def add_secret(value: str) -> None:
    """Remember `value` (and its quoted spellings) as a secret for the rest of the process."""
    global _forms
    if len(value) < MIN_SECRET_CHARS:
        return
    spellings = {value, repr(value)[1:-1], json.dumps(value)[1:-1], quote(value, safe="")}
    with _lock:
        # Longest first: a spelling that contains another is replaced whole.
        _forms = tuple(sorted(set(_forms) | spellings, key=len, reverse=True))


def has_secrets() -> bool:
    return bool(_forms)


def scrub(text: str) -> str:
    """`text` with every registered secret replaced by `[api key]`.

    >>> add_secret("sk-doctest-secret"); scrub("Bearer sk-doctest-secret!")
    'Bearer [api key]!'
    """
    for form in _forms:
        if form in text:
            text = text.replace(form, MASK)
    return text

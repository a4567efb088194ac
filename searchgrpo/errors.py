"""Errors meant for the user: each prints as one line, without a traceback.

`UserError` is the base the CLI catches. Data problems are collected as `DataIssue`s while loading
(skip and count) and raised as `DataError` under `--strict`.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from typing import Any

UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""What a terminal may act on or hide rather than show: controls (ESC starts colour and cursor
sequences, CR overwrites a line), format characters (the bidirectional overrides and isolates such
as U+202E, which reverse what follows; zero-width spaces and joiners; the soft hyphen), lone
surrogates, and the line and paragraph separators."""


def printable(text: object, *, keep: str = "") -> str:
    r"""`text` with every character of UNPRINTABLE_CATEGORIES shown as an escape (`\x1b`,
    `\u202e`) instead of acted on, except those in `keep` (the console keeps newlines in
    multi-line panes). Text from data, servers and file names is printed through this, by the CLI
    and the console alike, so it can never drive or hide part of the terminal.

    >>> printable("red\x1b[31m\rdone")
    'red\\x1b[31m\\rdone'
    >>> printable("abc\u202edef\u200b")
    'abc\\u202edef\\u200b'
    """
    s = str(text)
    if s.isascii() and s.isprintable():
        return s
    return "".join(
        repr(ch)[1:-1] if ch not in keep and unicodedata.category(ch) in UNPRINTABLE_CATEGORIES else ch for ch in s
    )


MAX_ERROR_CHARS = 800
"""Longest error line the CLI prints (the values inside are cut shorter still)."""


def debug_enabled() -> bool:
    """Whether SEARCHGRPO_DEBUG asks for tracebacks: set to anything but empty, 0, false, no or off."""
    value = os.environ.get("SEARCHGRPO_DEBUG", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


class UserError(Exception):
    """A problem with the user's input or environment, worded as one line with the fix."""


class JobCancelled(UserError):
    """A job (eval, merge, audit, collect) ended early because it was asked to stop: the console's
    `q`, Ctrl-C. The message says what was kept."""


def check_cancel(stop: Any, what: str) -> None:
    """Raise JobCancelled(`what`) when `stop` (a threading.Event, or None) is set: the one
    cooperative cancel check the long loops make between batches, states, tokens and stages."""
    if stop is not None and stop.is_set():
        raise JobCancelled(what)


def one_line(text: object, limit: int | None = None) -> str:
    """`text` on one line (runs of whitespace and newlines become one space; other control
    characters are escaped, `printable`), cut to `limit`.

    >>> one_line("Weights only load failed.\\n\\n  Please  check", 30)
    'Weights only load failed. Ple…'
    """
    flat = printable(" ".join(str(text).split()))
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


class DataError(UserError):
    """Malformed training data (a checkpoint file, a corpus line, a question record)."""


@dataclass(frozen=True)
class DataIssue:
    """One malformed input that was skipped: where it is and why."""

    path: str
    reason: str
    conflict: bool = False
    """Two inputs that cannot both be right (one id naming two questions or two documents, a round
    listed twice): the data is ambiguous, not merely damaged, and `searchgrpo check` fails on it."""

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class IssueLog:
    """Collects data issues (`record`); under `strict` the first one is raised instead."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.issues: list[DataIssue] = []

    def record(self, path: object, reason: str, *, conflict: bool = False) -> None:
        issue = DataIssue(str(path), reason, conflict)
        if self.strict:
            raise DataError(f"{issue} (--strict stops at the first malformed input)")
        self.issues.append(issue)

    def __len__(self) -> int:
        return len(self.issues)

    @property
    def conflicts(self) -> list[DataIssue]:
        return [i for i in self.issues if i.conflict]

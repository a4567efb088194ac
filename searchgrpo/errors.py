"""Errors meant for the user: each prints as one line, without a traceback.

`UserError` is the base the CLI catches. Data problems are collected as `DataIssue`s while loading
(skip and count) and raised as `DataError` under `--strict`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

# C0 and C1 controls, DEL, and the bidirectional overrides: what a terminal may act on rather
# than show (ESC starts colour and cursor sequences, CR overwrites a line, U+202E reverses it).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object) -> str:
    r"""`text` with every control character shown as an escape (`\x1b`) instead of acted on: text
    from data or from a server is printed through this, so it can never drive the terminal.

    >>> printable("red\x1b[31m\rdone")
    'red\\x1b[31m\\rdone'
    """
    return _UNPRINTABLE.sub(lambda m: repr(m.group())[1:-1], str(text))


MAX_ERROR_CHARS = 800
"""Longest error line the CLI prints (the values inside are cut shorter still)."""


def debug_enabled() -> bool:
    """Whether SEARCHGRPO_DEBUG asks for tracebacks: set to anything but empty, 0, false, no or off."""
    value = os.environ.get("SEARCHGRPO_DEBUG", "").strip().lower()
    return value not in ("", "0", "false", "no", "off")


class UserError(Exception):
    """A problem with the user's input or environment, worded as one line with the fix."""


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
    """Collects data issues; under `strict` the first one is raised instead."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.issues: list[DataIssue] = []

    def report(self, path: object, reason: str, *, conflict: bool = False) -> None:
        issue = DataIssue(str(path), reason, conflict)
        if self.strict:
            raise DataError(f"{issue} (--strict stops at the first malformed input)")
        self.issues.append(issue)

    def __len__(self) -> int:
        return len(self.issues)

    @property
    def conflicts(self) -> list[DataIssue]:
        return [i for i in self.issues if i.conflict]

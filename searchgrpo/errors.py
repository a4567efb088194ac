"""Errors meant for the user: each prints as one line, without a traceback.

`UserError` is the base the CLI catches. Data problems are collected as `DataIssue`s while loading
(skip and count) and raised as `DataError` under `--strict`.
"""

from __future__ import annotations

from dataclasses import dataclass


class UserError(Exception):
    """A problem with the user's input or environment, worded as one line with the fix."""


def one_line(text: object, limit: int | None = None) -> str:
    """`text` on one line (runs of whitespace and newlines become one space), cut to `limit`.

    >>> one_line("Weights only load failed.\\n\\n  Please  check", 30)
    'Weights only load failed. Ple…'
    """
    flat = " ".join(str(text).split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 1] + "…"


class DataError(UserError):
    """Malformed training data (a checkpoint file, a corpus line, a question record)."""


@dataclass(frozen=True)
class DataIssue:
    """One malformed input that was skipped: where it is and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class IssueLog:
    """Collects data issues; under `strict` the first one is raised instead."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self.issues: list[DataIssue] = []

    def report(self, path: object, reason: str) -> None:
        issue = DataIssue(str(path), reason)
        if self.strict:
            raise DataError(f"{issue} (--strict stops at the first malformed input)")
        self.issues.append(issue)

    def __len__(self) -> int:
        return len(self.issues)

"""Showing a worker's exception: a toast with its message, and the traceback in the Log tab."""

from __future__ import annotations

import traceback
from typing import Any, Protocol, cast

from textual.app import App
from textual.widget import Widget

from searchgrpo.events import LogMessage
from tui.inbox import EventInbox


class _WithInbox(Protocol):
    inbox: EventInbox


def traceback_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()


def report_failure(node: App[Any] | Widget, what: str, error: BaseException) -> None:
    """Log `error` with its traceback (through the app's event inbox) and notify the user."""
    console = cast(_WithInbox, node.app)  # the app is always `tui.app.ConsoleApp`, which has the inbox
    console.inbox.put(LogMessage("error", f"{what} failed: {type(error).__name__}: {error}\n{traceback_text(error)}"))
    node.notify(f"{type(error).__name__}: {error}", title=f"{what} failed", severity="error", timeout=30, markup=False)

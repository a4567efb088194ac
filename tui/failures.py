"""Showing a worker's exception: a toast with its message, and the traceback in the Log tab."""

from __future__ import annotations

import traceback

from textual.dom import DOMNode

from searchgrpo.events import LogMessage


def traceback_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()


def report_failure(node: DOMNode, what: str, error: BaseException) -> None:
    """Log `error` with its traceback (through the app's event inbox) and notify the user."""
    node.app.inbox.put(LogMessage("error", f"{what} failed: {type(error).__name__}: {error}\n{traceback_text(error)}"))
    node.notify(f"{type(error).__name__}: {error}", title=f"{what} failed", severity="error", timeout=30, markup=False)

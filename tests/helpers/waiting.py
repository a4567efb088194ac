"""Waiting for a state, never for a time: the one way tests wait (issue 24.1).

A test that waits a fixed number of event-loop turns, or sleeps and then asserts, passes on an idle
machine and fails on a busy one. These helpers wait for the state itself: they check `predicate`
again and again, and give up only after `ceiling` seconds, a hang guard far past any honest wait
(minutes, not the seconds the work takes), with a failure that names what never came.

- `wait_until(predicate, what)`: in plain code (threads, subprocesses); with `proc`, a process
  that ends before the state comes fails at once with its output.
- `await until(pilot, predicate, what)`: in a Textual Pilot test, letting the app run in between.

Both return the predicate's first truthy value.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

CEILING_S = 300.0
"""The hang guard: how long a wait may last before the test fails. Far past any wait of the suite
(on a busy 2-core machine the longest is a subprocess's first training step, tens of seconds),
and below pytest-timeout's 600 s, so the failure names what it waited for."""

POLL_S = 0.02
"""How often the predicate is checked. Not a budget: a slower machine just checks more times."""


def _never(what: str, ceiling: float, extra: str = "") -> str:
    return f"never reached within the {ceiling:g} s hang guard: {what}" + (f"\n{extra}" if extra else "")


def _output(proc: subprocess.Popen) -> str:
    stream = proc.stdout
    if stream is None:
        return ""
    try:
        return stream.read() or ""
    except (OSError, ValueError):
        return ""


def wait_until(
    predicate: Callable[[], T],
    what: str,
    *,
    ceiling: float = CEILING_S,
    proc: subprocess.Popen | None = None,
    poll: float = POLL_S,
) -> T:
    """Check `predicate` until it is truthy; return its value. Fails (naming `what`) when `proc`
    ends first, or after `ceiling` seconds (then `proc` is killed)."""
    deadline = time.monotonic() + ceiling
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            value = predicate()  # the state may have come just before the exit
            if value:
                return value
            pytest.fail(f"the process ended ({proc.returncode}) before: {what}\n{_output(proc)}")
        if time.monotonic() >= deadline:
            if proc is not None:
                proc.kill()
                pytest.fail(_never(what, ceiling, proc.communicate()[0] or ""))
            pytest.fail(_never(what, ceiling))
        time.sleep(poll)


async def until(
    pilot: Any,
    predicate: Callable[[], T],
    what: str,
    *,
    ceiling: float = CEILING_S,
    again: Callable[[], Awaitable[Any]] | None = None,
) -> T:
    """In a Pilot test: let the app run (its pending messages processed, then a short sleep)
    until `predicate` is truthy; return its value. Fails naming `what` after `ceiling` seconds.

    `again`, if given, is awaited before each wait: an idempotent nudge such as pressing a tab's key
    once more (a key pressed while the app is still starting can be lost on a busy machine)."""
    deadline = time.monotonic() + ceiling
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_never(what, ceiling))
        if again is not None:
            await again()
        await pilot.pause(POLL_S)

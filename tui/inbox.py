"""A thread-safe inbox of core events, and the sink that fills it from a worker thread.

`put` may be called from any thread (it is the `EventSink` given to the trainer, eval or merge);
it posts `EventsArrived` only when the inbox goes from empty to non-empty, so a burst costs one
message. `take` is called on the app's thread and returns at most `limit` events; when more are
left it reports so, and the app posts itself another notice instead of blocking input.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any


class EventInbox:
    """Events from worker threads, handed to the UI thread in slices."""

    def __init__(self, notify: Callable[[], Any]) -> None:
        self._notify = notify
        self._events: deque[Any] = deque()
        self._lock = threading.Lock()
        self.received = 0
        """Events ever put (for the benchmark and tests)."""

    def put(self, event: Any) -> None:
        with self._lock:
            self._events.append(event)
            self.received += 1
            first = len(self._events) == 1
        if first:
            self._notify()

    def take(self, limit: int) -> tuple[list[Any], bool]:
        """Up to `limit` events, oldest first, and whether more are waiting."""
        with self._lock:
            n = min(limit, len(self._events))
            batch = [self._events.popleft() for _ in range(n)]
            return batch, bool(self._events)

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

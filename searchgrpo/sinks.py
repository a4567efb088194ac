"""Where events go: a JSONL log, or several sinks at once; and reading a log back.

`JsonlSink` appends one JSON object per line to `runs/<run_id>/events.jsonl` and flushes each
line, so `searchgrpo tui --attach` can follow a run live. `fanout` sends each event to several
sinks. The terminal's renderers are in `searchgrpo.terminal`.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from searchgrpo.events import (
    EventSink,
    event_from_dict,
    event_to_dict,
)


class JsonlSink:
    """Appends events to a JSONL file, one line each, written straight to the file (unbuffered).

    Like every sink it never raises: a line that cannot be written (a full disk) is counted in
    `dropped` (the first error kept in `error`) and training goes on; the next line that can be
    written first ends the torn one, which readers skip.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self._torn = False
        self.dropped = 0
        self.error: OSError | None = None

    def __call__(self, event: Any) -> None:
        data = (json.dumps(event_to_dict(event), ensure_ascii=False, allow_nan=True) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                return
            if self._torn:
                data = b"\n" + data
            written = 0
            try:
                while written < len(data):
                    written += os.write(self._fd, data[written:])
                self._torn = False
            except OSError as exc:
                self._torn = self._torn or written > 0
                self.dropped += 1
                self.error = self.error or exc

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def read_events(path: str | Path) -> Iterator[Any]:
    """Events of a JSONL file; a torn last line (a run killed mid-write) is ignored."""
    with Path(path).open("r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.endswith("\n"):
                return
            try:
                yield event_from_dict(json.loads(line))
            except (ValueError, TypeError):
                continue


def fanout(*sinks: EventSink) -> EventSink:
    """A sink that forwards every event to each of `sinks` in turn."""

    def send(event: Any) -> None:
        for sink in sinks:
            sink(event)

    return send

"""Where events go: a JSONL log, or several sinks at once; and reading a log back.

`JsonlSink` appends one JSON object per line to `runs/<run_id>/events.jsonl` and flushes each
line, so `searchgrpo tui --attach` can follow a run live. `fanout` sends each event to several
sinks. The terminal's renderers are in `searchgrpo.terminal`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchgrpo.events import (
    EventSink,
    event_from_dict,
    event_to_dict,
)
from searchgrpo.redact import has_secrets, scrub


class JsonlSink:
    """Appends events to a JSONL file, one line each, written straight to the file (unbuffered).

    Like every sink it never raises: a line that cannot be written (a full disk) is counted in
    `dropped` (the first error kept in `error`) and training goes on; the next line that can be
    written first ends the torn one, which readers skip. Registered secrets (`searchgrpo.redact`)
    are blanked out of every line before it is written.
    """

    def __init__(self, path: str | Path | None) -> None:
        self._lock = threading.Lock()
        self._torn = False
        self._pending: list[bytes] | None = None
        self._fd: int | None = None
        self.dropped = 0
        self.error: OSError | None = None
        self.path: Path | None = None
        if path is None:
            self._pending = []  # deferred: held in memory until open()
        else:
            self.open(path)

    @classmethod
    def deferred(cls) -> JsonlSink:
        """A sink that keeps events in memory until `open(path)` writes them there, and if it is never
        opened writes nothing (a run that fails before it claims its folder leaves no folder)."""
        return cls(None)

    def open(self, path: str | Path) -> None:
        """Start writing to `path` (appending), first the events held so far."""
        with self._lock:
            self.path = Path(path)
            pending, self._pending = self._pending or [], None
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            except OSError as exc:  # like a failed write: counted, never raised
                self.error = self.error or exc
                self.dropped += len(pending)
                return
            for data in pending:
                self._write_unlocked(data)

    def __call__(self, event: Any) -> None:
        line = json.dumps(event_to_dict(event), ensure_ascii=False, allow_nan=True)
        self._write((scrub(line) + "\n").encode("utf-8"))

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._pending is not None:
                self._pending.append(data)
            else:
                self._write_unlocked(data)

    def _write_unlocked(self, data: bytes) -> None:
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
            self._pending = None
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


def redacting(sink: EventSink) -> EventSink:
    """A sink that passes each event on with registered secrets blanked out of its text (the
    event as it is when it holds none, or when no secret is registered)."""

    def send(event: Any) -> None:
        if has_secrets():
            line = json.dumps(event_to_dict(event), ensure_ascii=False, allow_nan=True)
            clean = scrub(line)
            if clean != line:
                event = event_from_dict(json.loads(clean))
        sink(event)

    return send


def fanout(*sinks: EventSink) -> EventSink:
    """A sink that forwards every event to each of `sinks` in turn."""

    def send(event: Any) -> None:
        for sink in sinks:
            sink(event)

    return send

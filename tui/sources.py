"""Where the console's events come from when it does not train: a run's `events.jsonl`.

`follow_events` runs in a Textual thread worker and sends core events to a sink; it never
touches widgets. The file may hold anything: lines that are not JSON, JSON that is no event,
fields of the wrong type, names with control characters, a line of gigabytes. None of these
stops the console. Bad lines are skipped and counted, and the count reaches the Log tab; a line
longer than `MAX_LINE` is skipped as it streams past, never held whole. While attached, a file
that stops growing before its run ended is reported as stalled (`SourceStalled`), and one that
is replaced (a new inode) or cut shorter is reported and no longer read.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgrpo.events import EventSink, LogMessage, RunFailed, RunFinished, RunStarted
from tui.event_check import decode_event

READ_CHUNK = 4 << 20
"""Bytes read from an events file per pass (a long replay arrives in slices)."""
MAX_LINE = 64 << 20
"""Longest event line read; a longer one is skipped (the biggest events, groups of many samples
with their documents, are a few MiB at most)."""
STALL_AFTER = 120.0
"""Seconds without a new line before an attached, unfinished run is reported as stalled."""
EXAMPLES = 3
"""Bad lines named in each report (the rest are only counted)."""


@dataclass(frozen=True)
class SourceStalled:
    """The attached file has not grown for `idle_s` seconds (0: it grows again)."""

    path: str
    idle_s: float


def events_file(path: str | Path) -> Path:
    """A run folder's events.jsonl, or the file itself."""
    path = Path(path)
    return path / "events.jsonl" if path.is_dir() or not path.suffix else path


class JsonlFollower:
    """Reads the complete lines appended to a JSONL file since the last read.

    A line still being written stays buffered until its newline arrives. A file replaced by
    another (a new inode: another run's events renamed into place) or cut shorter than what was
    read is not this file any more: `replaced` then says how, and nothing more is read from it, so
    that another run's events are never added to this one's. `skipped` counts the bad lines so far
    and `problems` keeps the not yet reported ones as 'line N: what was wrong'.
    """

    def __init__(self, path: Path, max_line: int = MAX_LINE) -> None:
        self.path = path
        self.max_line = max_line
        self.offset = 0
        self.line_no = 0
        self.skipped = 0
        self.problems: list[str] = []
        self._reported = 0
        self._partial = b""
        self._oversized = False
        """In the middle of a line longer than max_line: drop bytes until its newline."""
        self.identity: tuple[int, int] | None = None
        """(device, inode) of the file first read."""
        self.replaced = ""
        """How the file stopped being the one first read ('' while it is that file)."""

    def read(self) -> list[Any]:
        if self.replaced:
            return []
        try:
            with self.path.open("rb") as fh:
                st = os.fstat(fh.fileno())
                identity = (st.st_dev, st.st_ino)
                if self.identity is None:
                    self.identity = identity
                elif identity != self.identity:
                    self.replaced = f"replaced by another file (inode {self.identity[1]} -> {identity[1]})"
                    return []
                if st.st_size < self.offset:
                    self.replaced = f"cut from {self.offset:,} to {st.st_size:,} bytes (rewritten in place)"
                    return []
                fh.seek(self.offset)
                data = fh.read(READ_CHUNK)
        except OSError:
            return []
        self.offset += len(data)
        return self._lines(data)

    def _lines(self, data: bytes) -> list[Any]:
        events = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            piece, start = data[start:end], end + 1
            if self._oversized:  # the tail of a line already counted as too long
                self._oversized, self._partial = False, b""
                continue
            line, self._partial = self._partial + piece, b""
            self.line_no += 1
            if len(line) > self.max_line:
                self._bad(f"longer than {self.max_line:,} bytes")
                continue
            event = self._decode(line)
            if event is not None:
                events.append(event)
        tail = data[start:]
        if self._oversized:
            return events
        if len(self._partial) + len(tail) > self.max_line:
            self.line_no += 1
            self._bad(f"longer than {self.max_line:,} bytes")
            self._partial, self._oversized = b"", True
        else:
            self._partial += tail
        return events

    def _decode(self, line: bytes) -> Any:
        if not line.strip():
            return None
        try:
            data = json.loads(line)
        except (ValueError, RecursionError):
            self._bad("not JSON")
            return None
        event, problem = decode_event(data)
        if problem:
            self._bad(problem)
        return event

    def _bad(self, why: str) -> None:
        self.skipped += 1
        if len(self.problems) < EXAMPLES:
            self.problems.append(f"line {self.line_no}: {why}")

    def bad_lines_notice(self) -> LogMessage | None:
        """A Log tab line about the bad lines found since the last report, if any."""
        new = self.skipped - self._reported
        if new <= 0:
            return None
        self._reported = self.skipped
        text = (
            f"{self.path}: skipped {new} malformed event line(s) ({self.skipped} in all)"
            f"{': ' if self.problems else ''}{'; '.join(self.problems)}"
        )
        self.problems = []
        return LogMessage("warning", text)


def follow_events(
    path: Path,
    sink: EventSink,
    stop: threading.Event,
    *,
    follow: bool,
    poll: float = 0.25,
    stall_after: float = STALL_AFTER,
    max_line: int = MAX_LINE,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Send every event of `path` to `sink`; with `follow`, keep sending new ones until `stop`."""
    reader = JsonlFollower(path, max_line)
    last_growth, stalled_for, ended = clock(), 0, False
    while not stop.is_set():
        offset = reader.offset
        events = reader.read()
        for event in events:
            if isinstance(event, (RunFinished, RunFailed)):
                ended = True
            elif isinstance(event, RunStarted):
                ended = False
            sink(event)
        note = reader.bad_lines_notice()
        if note is not None:
            sink(note)
        if reader.replaced:
            sink(
                LogMessage(
                    "error",
                    f"{path}: {reader.replaced} while the console read it; stopped reading, so that another "
                    "run's events are not added to this one's (attach again to follow the new file)",
                )
            )
            return
        if reader.offset != offset:
            last_growth = clock()
            if stalled_for:
                stalled_for = 0
                sink(SourceStalled(str(path), 0.0))
            continue
        if not follow:
            return
        idle = clock() - last_growth
        if not ended and idle >= stall_after and int(idle) != stalled_for:  # at most one notice a second
            stalled_for = max(int(idle), 1)
            sink(SourceStalled(str(path), idle))
        if stop.wait(poll):
            return

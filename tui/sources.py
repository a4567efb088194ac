"""Where the console's events come from: a live trainer, or a run's `events.jsonl`.

Each source is a plain function that a Textual thread worker runs; it sends core events to a sink
and never touches widgets. `run_trainer` is the default live runner; the app takes any callable
with its signature, so tests drive the console with scripted events and no torch.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable, Optional

from searchgrpo.config import Config
from searchgrpo.events import EventSink, event_from_dict
from searchgrpo.train.control import TrainerControl

TrainRunner = Callable[[Config, EventSink, TrainerControl, Optional[Path], bool], Any]
"""(cfg, sink, control, run_dir, resume): runs training to its end, sending events to sink."""

READ_CHUNK = 4 << 20
"""Bytes read from an events file per pass (a long replay arrives in slices)."""


def run_trainer(cfg: Config, sink: EventSink, control: TrainerControl, run_dir: Path | None, resume: bool) -> None:
    """Train in this thread (`searchgrpo.runs.train`: events also go to runs/<id>/events.jsonl, so
    another console can attach to this run and it can be replayed later)."""
    from searchgrpo.runs import train

    train(cfg, sink, control, run_dir=run_dir, resume=resume)


def events_file(path: str | Path) -> Path:
    """A run folder's events.jsonl, or the file itself."""
    path = Path(path)
    return path / "events.jsonl" if path.is_dir() or not path.suffix else path


class JsonlFollower:
    """Reads the complete lines appended to a JSONL file since the last read.

    A line still being written stays buffered until its newline arrives; lines that do not parse
    are skipped (as `searchgrpo.sinks.read_events` does). A file that shrinks was replaced, and
    is read again from the start.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._partial = b""

    def read(self) -> list[Any]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:
            self.offset, self._partial = 0, b""
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(READ_CHUNK)
        self.offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        events = []
        for line in lines:
            try:
                events.append(event_from_dict(json.loads(line)))
            except (ValueError, TypeError):
                continue
        return events


def follow_events(path: Path, sink: EventSink, stop: threading.Event, *, follow: bool, poll: float = 0.25) -> None:
    """Send every event of `path` to `sink`; with `follow`, keep sending new ones until `stop`."""
    reader = JsonlFollower(path)
    while not stop.is_set():
        events = reader.read()
        for event in events:
            sink(event)
        if events:
            continue
        if not follow or stop.wait(poll):
            return

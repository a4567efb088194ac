"""Where events go: a JSONL log, the terminal, or several at once.

`JsonlSink` appends one JSON object per line to `runs/<run_id>/events.jsonl` and flushes each
line, so `searchgrpo tui --attach` can follow a run live. `ConsoleSink` renders headless progress
with rich. `fanout` sends each event to several sinks.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from rich.markup import escape

from searchgrpo.errors import one_line
from searchgrpo.events import (
    CheckpointSaved,
    EvalFinished,
    EventSink,
    GroupScored,
    LogMessage,
    RunFailed,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StepFinished,
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


class ConsoleSink:
    """Headless progress on the terminal: a progress bar, one line per step, and notices."""

    def __init__(self, console: Any = None, every: int = 1) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.console = console or Console(stderr=True)
        self.every = max(every, 1)
        self._progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=self.console,
            transient=False,
        )
        self._task: Any = None
        self._groups: list[GroupScored] = []

    def _line(self, text: str) -> None:
        # soft_wrap: one message stays one line in a log file (rich would wrap it at 80 columns).
        self.console.print(text, highlight=False, soft_wrap=True)

    def __call__(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            verb = "resuming" if event.start_step else "starting"
            self._line(
                f"[bold]{verb}[/] run {escape(event.run_id)} on {event.device}: {escape(event.base_model)}, "
                f"{event.num_train_states} train / {event.num_eval_states} eval states, "
                f"{event.total_steps} steps -> {escape(event.run_dir)}"
            )
            self._progress.start()
            self._task = self._progress.add_task("train", total=event.total_steps, completed=event.start_step, status="")
        elif isinstance(event, GroupScored):
            self._groups.append(event)
        elif isinstance(event, StepFinished):
            m = event.metrics
            status = f"reward {m.get('reward/mean', 0):+.3f}  loss {m.get('loss/total', 0):+.4f}  {m.get('time/step', 0):.1f}s/step"
            if self._task is not None:
                self._progress.update(self._task, completed=event.step, status=status)
            if event.step % self.every == 0:
                self._line(
                    f"step {event.step:>5}/{event.total_steps}  reward {m.get('reward/mean', 0):+.3f}"
                    f" ±{m.get('reward/std', 0):.3f}  zero-std {m.get('reward/frac_zero_std', 0):.2f}"
                    f"  loss {m.get('loss/total', 0):+.4f}  kl {m.get('loss/kl', 0):.4f}"
                    f"  clip {m.get('loss/clip_frac', 0):.3f}  {m.get('time/step', 0):.1f}s"
                    + checker_summary(m)
                )
            self._groups.clear()
        elif isinstance(event, EvalFinished):
            m = event.metrics
            self._line(
                f"[cyan]eval[/] step {event.step}: reward {m.get('eval/reward_mean', 0):+.3f}, "
                f"IMPORTANT discovery {m.get('eval/important_discovery', 0):.3f} "
                f"over {int(m.get('eval/states', 0))} states"
            )
        elif isinstance(event, CheckpointSaved):
            self._line(f"[green]checkpoint[/] step {event.step} -> {escape(event.path)}")
        elif isinstance(event, RunPaused):
            self._line(f"paused at step {event.step}")
        elif isinstance(event, RunResumed):
            self._line(f"resumed at step {event.step}")
        elif isinstance(event, LogMessage):
            style = {"warning": "yellow", "error": "red"}.get(event.level, "dim")
            self._line(f"[{style}]{escape(event.level)}[/]: {escape(one_line(event.text))}")
        elif isinstance(event, RunFinished):
            self._progress.stop()
            self._line(f"[bold]run {event.reason}[/] at step {event.step}")
        elif isinstance(event, RunFailed):
            self._progress.stop()
            self._line(f"[bold red]run failed[/] at step {event.step}: {escape(one_line(event.error))}")



def checker_summary(metrics: dict[str, float]) -> str:
    """The step line's checker part, for checkers that report `checker/*` metrics ('' otherwise)."""
    if "checker/calls" not in metrics:
        return ""
    text = (f"  checker {int(metrics['checker/calls'])} calls, {metrics.get('checker/cache_hit_rate', 0):.0%} cached, "
            f"{metrics.get('checker/latency_ms', 0):.0f} ms/call, {metrics.get('checker/time_s', 0):.1f}s")
    failures, unparsable = int(metrics.get("checker/failures", 0)), int(metrics.get("checker/unparsable", 0))
    if failures:
        text += f", {failures} retried"
    if unparsable:
        text += f", {unparsable} unparsable"
    return text

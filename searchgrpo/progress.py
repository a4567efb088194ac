"""Progress a person can follow, on a terminal and off one: the one helper behind every long
command's progress (train, eval, merge, audit, collect, demo-world).

`WorkProgress` says up front how much work there is, then shows it being done. On a terminal it
draws one bar (label, bar, done/total, time left, what is being worked on). Elsewhere (a log file,
a pipe, CI) it prints a line when the work is announced, a line whenever `every_s` seconds passed
without one (from a timer thread, so a long first step or a model that loads for minutes is never
silent), the first estimate of the time left as soon as one unit is done, and a line at the end.
Lines above the bar (`note`) count as lines too.

The time left (`time_left`) excludes the first unit, which warms up (a first training step took
83 s where the next took 17 s): until a second unit is done it is the first unit's time per unit,
marked as rough. Text from data is printed through `errors.printable`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from searchgrpo.errors import printable

EVERY_S = 30.0
"""Off a terminal, the longest silence between two progress lines."""


def fmt_seconds(seconds: float | None) -> str:
    """A duration for people: '45s', '3m05s', '1h02m'; '?' when unknown.

    >>> fmt_seconds(45.2), fmt_seconds(185), fmt_seconds(3725), fmt_seconds(None)
    ('45s', '3m05s', '1h02m', '?')
    """
    if seconds is None:
        return "?"
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def time_left(
    done: int, total: int | None, started: float, first: tuple[int, float] | None, done_at: float
) -> tuple[float | None, bool]:
    """(seconds left, rough) for `done` of `total` units, begun at `started`, the latest finished at
    `done_at`; `first` is (units, time) when the first units were reported done. The pace is
    measured after them, so a slow first unit (loading, warming up) does not inflate the estimate;
    with only the first units done, their own pace is used and the estimate is `rough`.

    >>> time_left(1, 10, 0.0, (1, 80.0), 80.0)     # only the first: its own pace, rough
    (720.0, True)
    >>> time_left(3, 10, 0.0, (1, 80.0), 120.0)    # 2 units in 40 s after the first
    (140.0, False)
    >>> time_left(0, 10, 0.0, None, 5.0)
    (None, True)
    """
    if total is None or first is None or done <= 0:
        return None, True
    left = max(total - done, 0)
    first_done, first_at = first
    if done > first_done and done_at > first_at:
        return left * (done_at - first_at) / (done - first_done), False
    return left * max(first_at - started, 0.0) / max(first_done, 1), True


class WorkProgress:
    """One job's progress (see the module docstring). Use as a context manager; `start` it with
    the amount of work, `update` it as units finish, `note` a line above it."""

    def __init__(
        self,
        console: Any,
        label: str,
        *,
        every_s: float = EVERY_S,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.label = label
        self.every_s = every_s
        self.terminal = bool(console.is_terminal) if terminal is None else terminal
        self.clock = clock
        self.total: int | None = None
        self.unit = ""
        self.base = 0
        self.done = 0
        self.detail = ""
        self.started = clock()
        self.first: tuple[int, float] | None = None
        self.done_at = self.started
        """When the latest unit finished (the pace is measured up to it, not up to now)."""
        self.last_line = self.started
        self.long_hint = ""
        """Printed once with the first estimate when it exceeds `long_after_s` (e.g. how to do less)."""
        self.long_after_s = 600.0
        self._estimated = False
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self._timer: threading.Thread | None = None
        self._bar: Any = None
        self._task: Any = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> WorkProgress:
        if self.terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("[bold]{task.fields[label]}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[left]}"),
                TextColumn("{task.fields[detail]}"),
                console=self.console,
            )
            self._bar.start()
            self._task = self._bar.add_task("", total=None, label=printable(self.label), count="", left="", detail="")
        else:
            self._timer = threading.Thread(target=self._beat, name=f"{self.label}-progress", daemon=True)
            self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopped.set()
        if self._timer is not None:
            self._timer.join()
        if self._bar is not None:
            self._bar.stop()

    # ------------------------------------------------------------------ what callers say

    def start(self, total: int | None, unit: str, what: str = "", *, base: int = 0) -> None:
        """Announce the work: `total` units (None: not known yet) and what they are; `base` units
        were done before (a resumed run: its steps count from there)."""
        with self._lock:
            self.total, self.unit, self.base = total, unit, base
            self.started = self.done_at = self.clock()  # the work begins now (loading came before)
            amount = f"{total - base} {unit}" if total is not None else unit
            self._say(f"{self.label}: {amount}{what}; the time left shows once the first is done")
            self._redraw()

    def update(self, done: int, total: int | None = None, detail: str | None = None) -> None:
        """`done` units of `total` (unchanged if None) are finished; `detail` says what is being done."""
        with self._lock:
            now = self.clock()
            if total is not None:
                self.total = total
            if detail is not None:
                self.detail = detail
            if done > max(self.done, self.base) and self.first is None:
                self.first = (done - self.base, now)
            if done > self.done:
                self.done_at = now
            self.done = done
            self._redraw()
            left, _ = self.left(now)
            finished = self.total is not None and done >= self.total
            if not self._estimated and left is not None and not finished:
                self._estimated = True
                hint = f" ({self.long_hint})" if self.long_hint and left > self.long_after_s else ""
                of = "?" if self.total is None else self.total - self.base
                self._say(
                    f"{self.label}: {done - self.base}/{of} {self.unit} in {fmt_seconds(now - self.started)}: "
                    f"about {fmt_seconds(left)} left at the pace of the first (it may include loading){hint}"
                )
            elif not self.terminal and (finished or now - self.last_line >= self.every_s):
                self._say(self.status(now))

    def note(self, text: str, *, markup: bool = False) -> None:
        """A line of its own (a warning, a step's figures), above the bar; with `markup`, `text` is
        rich markup whose data parts the caller escaped (`terminal.clean`)."""
        with self._lock:
            self._say(text, markup=markup)

    def set_detail(self, detail: str) -> None:
        with self._lock:
            self.detail = detail
            self._redraw()

    # ------------------------------------------------------------------ figures

    def left(self, now: float | None = None) -> tuple[float | None, bool]:
        """(seconds left, rough) at the pace so far (`time_left`); `now` is kept for callers' symmetry."""
        total = None if self.total is None else self.total - self.base
        return time_left(self.done - self.base, total, self.started, self.first, self.done_at)

    def status(self, now: float | None = None) -> str:
        """One line: done/total, elapsed, time left, and what is being worked on."""
        now = self.clock() if now is None else now
        left, rough = self.left(now)
        if self.total is None and not self.unit:  # not announced yet: loading data, models
            text = f"{self.label}: starting, {fmt_seconds(now - self.started)} elapsed"
            return text + (f"; {self.detail}" if self.detail else "")
        amount = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        text = f"{self.label}: {amount} {self.unit}, {fmt_seconds(now - self.started)} elapsed"
        if left is not None:
            text += f", about {fmt_seconds(left)} left" + (" (rough)" if rough else "")
        return text + (f"; {self.detail}" if self.detail else "")

    # ------------------------------------------------------------------ output

    def tick(self) -> None:
        """Print the status if nothing was printed for `every_s` seconds (the timer calls this)."""
        with self._lock:
            if self.clock() - self.last_line >= self.every_s:
                self._say(self.status())

    def _beat(self) -> None:
        while not self._stopped.wait(1.0):
            self.tick()

    def _say(self, text: str, *, markup: bool = False) -> None:
        self.last_line = self.clock()
        target = self._bar.console if self._bar is not None else self.console
        target.print(text if markup else printable(text), markup=markup, highlight=False, soft_wrap=True)

    def _redraw(self) -> None:
        if self._bar is None:
            return
        left, rough = self.left()
        self._bar.update(
            self._task,
            total=self.total,
            completed=self.done,
            count=f"{self.done}/{self.total} {self.unit}" if self.total is not None else f"{self.done} {self.unit}",
            left=f"{fmt_seconds(left)} left" + ("?" if rough else "") if left is not None else "",
            detail=printable(self.detail),
        )

"""What the terminal shows while a job runs: training progress, eval, merge and collect progress.

Each renderer is an event sink (or a progress callback) built on rich. `ConsoleSink` renders
headless training: a progress bar, one line per step, and notices. Text that comes from data or
from a run's files (ids, paths, model names, messages) is shown literally: `clean` escapes rich
markup and replaces control characters, so nothing in it can restyle or move the terminal.

The step line shows the loss in scientific notation beside the gradient norm and the KL. GRPO's
advantages are centred within each group, so with one policy update per batch the clipped
surrogate's value is close to zero by construction (its gradient is not): printed to four
decimals it read `+0.0000` on every step. Its magnitude (mostly beta x KL) still moves, and the
gradient norm is what tells how hard a step pushes the policy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.markup import escape

from searchgrpo.errors import one_line, printable
from searchgrpo.events import (
    AuditProgress,
    AuditStarted,
    CheckpointSaved,
    EvalFinished,
    EvalProgress,
    EvalStarted,
    EventSink,
    GroupScored,
    LogMessage,
    MergeFinished,
    MergeProgress,
    MergeStarted,
    RunFailed,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StepFinished,
)


def clean(text: Any) -> str:
    """Data made safe to print with rich markup: newlines and tabs a space, control characters
    shown as escapes (`errors.printable`: an ESC from a file would drive the terminal), and markup
    escaped."""
    return escape(printable(str(text).replace("\n", " ").replace("\t", " ")))


def plain(text: object) -> Any:
    """Data as a rich `Text` for a table or a line: no markup, no terminal control, no secret."""
    from rich.text import Text

    from searchgrpo.redact import scrub

    return Text(scrub(printable(text)))


def print_line(console: Any, text: str) -> None:
    """One message as one line, never wrapped at 80 columns nor read as markup or escapes."""
    console.print(printable(text), markup=False, highlight=False, soft_wrap=True)


class ConsoleSink:
    """Headless progress on the terminal: a progress bar, one line per step, and notices."""

    def __init__(self, console: Any = None, every: int = 1, show_failure: bool = True) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.console = console or Console(stderr=True)
        self.every = max(every, 1)
        self.show_failure = show_failure
        """False where the caller prints the error itself (the CLI's one `error:` line)."""
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
                f"[bold]{verb}[/] run {clean(event.run_id)} on {clean(event.device)}: {clean(event.base_model)}, "
                f"{event.num_train_states} train / {event.num_eval_states} eval states, "
                f"{event.total_steps} steps -> {clean(event.run_dir)}"
            )
            self._progress.start()
            self._task = self._progress.add_task(
                "train", total=event.total_steps, completed=event.start_step, status=""
            )
        elif isinstance(event, GroupScored):
            self._groups.append(event)
        elif isinstance(event, StepFinished):
            m = event.metrics
            status = (
                f"reward {m.get('reward/mean', 0):+.3f}  loss {m.get('loss/total', 0):+.2e}  "
                f"{m.get('time/step', 0):.1f}s/step"
            )
            if self._task is not None:
                self._progress.update(self._task, completed=event.step, status=status)
            if event.step % self.every == 0:
                self._line(
                    f"step {event.step:>5}/{event.total_steps}  reward {m.get('reward/mean', 0):+.3f}"
                    f" ±{m.get('reward/std', 0):.3f}  zero-std {m.get('reward/frac_zero_std', 0):.2f}"
                    f"  loss {m.get('loss/total', 0):+.2e}  grad {m.get('grad/norm', 0):.3f}"
                    f"  kl {m.get('loss/kl', 0):.2e}  clip {m.get('loss/clip_frac', 0):.3f}"
                    f"  {m.get('time/step', 0):.1f}s" + checker_summary(m)
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
            self._line(f"[green]checkpoint[/] step {event.step} -> {clean(event.path)}")
        elif isinstance(event, RunPaused):
            self._line(f"paused at step {event.step}")
        elif isinstance(event, RunResumed):
            self._line(f"resumed at step {event.step}")
        elif isinstance(event, LogMessage):
            style = {"warning": "yellow", "error": "red"}.get(event.level, "dim")
            self._line(f"[{style}]{clean(event.level)}[/]: {clean(one_line(event.text))}")
        elif isinstance(event, RunFinished):
            self._progress.stop()
            self._line(f"[bold]run {clean(event.reason)}[/] at step {event.step}")
        elif isinstance(event, RunFailed):
            self._progress.stop()
            if self.show_failure:
                self._line(f"[bold red]run failed[/] at step {event.step}: {clean(one_line(event.error))}")


def checker_summary(metrics: dict[str, float]) -> str:
    """The step line's checker part, for checkers that report `checker/*` metrics ('' otherwise)."""
    if "checker/calls" not in metrics:
        return ""
    text = (
        f"  checker {int(metrics['checker/calls'])} calls, {metrics.get('checker/cache_hit_rate', 0):.0%} cached, "
        f"{metrics.get('checker/latency_ms', 0):.0f} ms/call, {metrics.get('checker/time_s', 0):.1f}s"
    )
    failures, unparsable = int(metrics.get("checker/failures", 0)), int(metrics.get("checker/unparsable", 0))
    if failures:
        text += f", {failures} retried"
    if unparsable:
        text += f", {unparsable} unparsable"
    return text


@contextlib.contextmanager
def eval_progress(console: Any) -> Iterator[EventSink]:
    """A sink that shows one progress bar per evaluated policy (and warnings above them)."""
    from rich.progress import Progress

    with Progress(console=console, transient=True) as progress:
        tasks: dict[str, Any] = {}

        def sink(event: Any) -> None:
            if isinstance(event, EvalStarted):
                for name in event.policies:
                    tasks[name] = progress.add_task(f"eval {clean(name)}", total=event.states)
            elif isinstance(event, EvalProgress) and event.policy in tasks:
                progress.update(tasks[event.policy], completed=event.done)
            elif isinstance(event, LogMessage):
                print_line(progress.console, f"{event.level}: {one_line(event.text)}")

        yield sink


@contextlib.contextmanager
def merge_progress(console: Any, finished: list[MergeFinished]) -> Iterator[EventSink]:
    """A sink that shows one progress bar per merged checkpoint; MergeFinished goes to `finished`."""
    from rich.progress import Progress

    with Progress(console=console) as progress:
        tasks: dict[str, Any] = {}

        def sink(event: Any) -> None:
            if isinstance(event, MergeStarted):
                for c in event.checkpoints:
                    tasks[c] = progress.add_task(f"merge {clean(Path(c).name)}", total=5)
            elif isinstance(event, MergeProgress) and event.checkpoint in tasks:
                progress.update(
                    tasks[event.checkpoint],
                    completed=event.done + 1,
                    description=f"merge {clean(Path(event.checkpoint).name)}: {clean(event.stage)}",
                )
            elif isinstance(event, MergeFinished):
                for task in tasks.values():
                    progress.update(task, completed=5)
                finished.append(event)
            elif isinstance(event, LogMessage):
                print_line(progress.console, f"{event.level}: {one_line(event.text)}")

        yield sink


@contextlib.contextmanager
def audit_progress(console: Any, every_s: float = 30.0) -> Iterator[EventSink]:
    """A sink for `audit-checker`: a bar on a terminal; elsewhere (a log file, a pipe) one line per
    `every_s` seconds at most and at least, from a timer, so a long audit is never silent."""
    import threading
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    state = {"done": 0, "total": 0, "seconds": 0.0, "last": time.monotonic()}

    def line() -> str:
        rate = state["done"] / state["seconds"] if state["seconds"] else 0.0
        return f"audit: {state['done']}/{state['total']} verdicts, {rate:.2f} per second"

    if console.is_terminal:
        with Progress(
            TextColumn("[bold]audit"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console
        ) as progress:
            task = progress.add_task("audit", total=None)

            def sink(event: Any) -> None:
                if isinstance(event, AuditStarted):
                    progress.update(task, total=event.pairs)
                elif isinstance(event, AuditProgress):
                    progress.update(task, completed=event.done, total=event.total)
                elif isinstance(event, LogMessage):
                    print_line(progress.console, f"{event.level}: {one_line(event.text)}")

            yield sink
        return
    stopped = threading.Event()
    lock = threading.Lock()

    def say(text: str) -> None:
        with lock:
            state["last"] = time.monotonic()
            print_line(console, text)

    def beat() -> None:
        while not stopped.wait(1.0):
            if time.monotonic() - state["last"] >= every_s:
                say(line() if state["total"] else "audit: preparing the pairs and the checker")

    def sink(event: Any) -> None:
        if isinstance(event, AuditStarted):
            state["total"] = event.pairs
            say(f"audit: {event.pairs} pairs with {event.checker}")
        elif isinstance(event, AuditProgress):
            state.update(done=event.done, total=event.total, seconds=event.seconds)
            if event.done == event.total or time.monotonic() - state["last"] >= every_s:
                say(line())
        elif isinstance(event, LogMessage):
            say(f"{event.level}: {one_line(event.text)}")

    timer = threading.Thread(target=beat, name="audit-progress", daemon=True)
    timer.start()
    try:
        yield sink
    finally:
        stopped.set()
        timer.join()


@contextlib.contextmanager
def count_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A `progress(done, total)` callback drawing one bar (collect, demo-world)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn(f"[bold]{escape(label)}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()
    ) as progress:
        task = progress.add_task(label, total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


def print_health_checks(console: Any, results: list[Any]) -> None:
    """`searchgrpo check`'s table: each health check's status, detail and fix."""
    from rich.table import Table

    table = Table(title="searchgrpo check")
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    colours = {"PASS": "green", "FAIL": "red", "SKIP": "yellow"}
    for r in results:
        table.add_row(r.name, f"[{colours[r.status]}]{r.status}[/]", plain(r.detail), plain(r.fix))
    console.print(table)


def print_config_table(console: Any, rows: list[tuple[str, Any, str]], source: str) -> None:
    """`searchgrpo config`: every key, its value and its meaning."""
    from rich.table import Table

    table = Table(title=plain(f"config: {source}"))
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("meaning", overflow="fold")
    for key, value, doc in rows:
        table.add_row(key, plain(repr(value)), plain(doc))
    console.print(table)


def print_merge_summary(console: Any, finished: list[MergeFinished]) -> None:
    """One line per merged model: its folder and its parity figures."""
    for event in finished:
        for p in event.parity:
            line = plain(p["output"])
            line.stylize("green")
            line.append(
                f": parity passed ({p['dtype']}; max |dlogp| {p['max_abs_logprob_delta']:.2e}, "
                f"greedy identical {p['greedy_identical']}/{p['probes']}, near ties {p['greedy_near_ties']})"
            )
            console.print(line, highlight=False)

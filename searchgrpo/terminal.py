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
    MERGE_STAGES,
    AuditProgress,
    AuditStarted,
    CheckpointSaved,
    EvalFinished,
    EvalProgress,
    EvalStarted,
    EventSink,
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
    TrainEvalProgress,
)
from searchgrpo.progress import WorkProgress


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
    """Headless training on the terminal: a progress bar (off a terminal, a line at least every 30 s,
    `progress.WorkProgress`), one line per step, and notices."""

    def __init__(self, console: Any = None, every: int = 1, show_failure: bool = True) -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.every = max(every, 1)
        self.show_failure = show_failure
        """False where the caller prints the error itself (the CLI's one `error:` line)."""
        self.progress: WorkProgress | None = None
        self._last_step_s = 0.0

    def _line(self, text: str) -> None:
        # soft_wrap: one message stays one line in a log file (rich would wrap it at 80 columns).
        if self.progress is not None:
            self.progress.note(text, markup=True)
        else:
            self.console.print(text, highlight=False, soft_wrap=True)

    def open(self) -> ConsoleSink:
        """Start the progress before the run does: loading the data and the model can take minutes
        (an 8B model), and is never silent for more than 30 s off a terminal either."""
        if self.progress is None:
            self.progress = WorkProgress(self.console, "train").__enter__()
            self.progress.set_detail("loading the data and the model")
        return self

    def close(self) -> None:
        if self.progress is not None:
            self.progress.__exit__(None, None, None)
            self.progress = None

    def __call__(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            verb = "resuming" if event.start_step else "starting"
            self._line(
                f"[bold]{verb}[/] run {clean(event.run_id)} on {clean(event.device)}: {clean(event.base_model)}, "
                f"{event.num_train_states} train / {event.num_eval_states} eval states, "
                f"{event.total_steps} steps -> {clean(event.run_dir)}"
            )
            progress = self.open().progress
            assert progress is not None
            progress.start(event.total_steps, "steps", base=event.start_step)
            progress.update(event.start_step, detail=f"step {event.start_step + 1} running")
        elif isinstance(event, StepFinished):
            m = event.metrics
            self._last_step_s = m.get("time/step", 0)
            if event.step % self.every == 0:
                self._line(
                    f"step {event.step:>5}/{event.total_steps}  reward {m.get('reward/mean', 0):+.3f}"
                    f" ±{m.get('reward/std', 0):.3f}  zero-std {m.get('reward/frac_zero_std', 0):.2f}"
                    f"  loss {m.get('loss/total', 0):+.2e}  grad {m.get('grad/norm', 0):.3f}"
                    f"  kl {m.get('loss/kl', 0):.2e}  clip {m.get('loss/clip_frac', 0):.3f}"
                    f"  {m.get('time/step', 0):.1f}s" + checker_summary(m)
                )
            if self.progress is not None:
                following = f"step {event.step + 1} running" if event.step < event.total_steps else "finishing"
                self.progress.update(
                    event.step, event.total_steps, detail=f"{following} (the last took {self._last_step_s:.1f}s)"
                )
        elif isinstance(event, TrainEvalProgress):
            if self.progress is not None:
                self.progress.set_detail(f"in-training eval after step {event.step}: {event.done}/{event.total} states")
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
            self.close()
            self._line(f"[bold]run {clean(event.reason)}[/] at step {event.step}")
        elif isinstance(event, RunFailed):
            self.close()
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


class ProgressSink:
    """An event sink that keeps what a Ctrl-C note needs: the progress it drives (`done`, `total`)
    and, for a merge, the folders written so far (`kept`)."""

    def __init__(self, handle: EventSink, progress: WorkProgress, kept: list[str] | None = None) -> None:
        self.handle, self.progress, self.kept = handle, progress, kept if kept is not None else []

    def __call__(self, event: Any) -> None:
        self.handle(event)


@contextlib.contextmanager
def eval_progress(console: Any, unit: str = "states", long_hint: str = "") -> Iterator[ProgressSink]:
    """A sink for `eval`: one bar over every policy's states (or questions); `long_hint` is said with
    the first estimate when the eval will run more than ten minutes (how to do less)."""
    with WorkProgress(console, "eval") as progress:
        progress.long_hint = long_hint
        done: dict[str, int] = {}

        def sink(event: Any) -> None:
            if isinstance(event, EvalStarted):
                done.update(dict.fromkeys(event.policies, 0))
                progress.start(
                    len(event.policies) * event.states,
                    unit,
                    f" ({len(event.policies)} policies x {event.states}: {', '.join(map(printable, event.policies))})",
                )
            elif isinstance(event, EvalProgress):
                done[event.policy] = event.done
                progress.update(sum(done.values()), detail=f"{event.policy} {event.done}/{event.total}")
            elif isinstance(event, LogMessage):
                progress.note(f"{event.level}: {one_line(event.text)}")

        yield ProgressSink(sink, progress)


@contextlib.contextmanager
def merge_progress(console: Any, finished: list[MergeFinished]) -> Iterator[ProgressSink]:
    """A sink for `merge`: one bar over every checkpoint's stages; MergeFinished goes to `finished`.
    Its `kept` lists the folders written so far (for a Ctrl-C note)."""
    with WorkProgress(console, "merge") as progress:
        stages: dict[str, int] = {}
        kept: list[str] = []

        def sink(event: Any) -> None:
            if isinstance(event, MergeStarted):
                stages.update(dict.fromkeys(event.checkpoints, 0))
                progress.start(
                    len(event.checkpoints) * 5,
                    "stages",
                    f" ({len(event.checkpoints)} checkpoints x {', '.join(MERGE_STAGES)})",
                )
            elif isinstance(event, MergeProgress) and event.checkpoint in stages:
                stages[event.checkpoint] = min(event.done, event.total)
                if event.stage == "done":
                    kept.append(event.checkpoint)
                progress.update(sum(stages.values()), detail=f"{Path(event.checkpoint).name}: {event.stage}")
            elif isinstance(event, MergeFinished):
                finished.append(event)
            elif isinstance(event, LogMessage):
                progress.note(f"{event.level}: {one_line(event.text)}")

        yield ProgressSink(sink, progress, kept)


@contextlib.contextmanager
def audit_progress(console: Any, every_s: float = 30.0) -> Iterator[ProgressSink]:
    """A sink for `audit-checker`: a bar on a terminal; elsewhere (a log file, a pipe) one line per
    `every_s` seconds at least, so a long audit is never silent (`progress.WorkProgress`)."""
    with WorkProgress(console, "audit", every_s=every_s) as progress:

        def sink(event: Any) -> None:
            if isinstance(event, AuditStarted):
                progress.start(event.pairs, "verdicts", f" from {event.checker}")
            elif isinstance(event, AuditProgress):
                rate = event.done / event.seconds if event.seconds else 0.0
                progress.update(event.done, event.total, detail=f"{rate:.2f} per second")
            elif isinstance(event, LogMessage):
                progress.note(f"{event.level}: {one_line(event.text)}")

        yield ProgressSink(sink, progress)


@contextlib.contextmanager
def count_progress(label: str, unit: str = "", console: Any = None) -> Iterator[Callable[[int, int], None]]:
    """A `progress(done, total)` callback (collect, demo-world), as `progress.WorkProgress` shows it."""
    from rich.console import Console

    with WorkProgress(console or Console(stderr=True), label) as progress:

        def update(done: int, total: int) -> None:
            if progress.total is None:  # the first call: what was done before (a resumed collect) is no work
                progress.start(total, unit or "done", base=done)
            progress.update(done, total)

        yield update


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
    """One line per merged model (its folder and parity figures) and per merge refused (its reason
    and remedy)."""
    for event in finished:
        for p in event.parity:
            line = plain(p["output"])
            line.stylize("green")
            line.append(f": parity passed ({parity_words(p)})")
            console.print(line, highlight=False, soft_wrap=True)
        for r in event.refused:
            line = plain(r["checkpoint"])
            line.stylize("red")
            line.append(": refused: ")
            line.append_text(plain(r["reason"]))
            console.print(line, highlight=False, soft_wrap=True)


def parity_words(p: dict[str, Any]) -> str:
    """A parity check's figures in one phrase."""
    if "top1_agreement" not in p:  # a merge folder written by an earlier version
        return f"{p.get('dtype')}; max |dlogp| {p.get('max_abs_logprob_delta', 0):.2e}"
    return (
        f"{p['dtype']} against base + adapter in {p['dtype']}: max |dlogp| {p['max_abs_logprob_delta']:.2e}, "
        f"mean {p['mean_abs_logprob_delta']:.2e}, top-1 agreement {p['top1_agreement']:.1%} "
        f"of {p['tokens']} tokens, near ties {p['near_ties']}"
    )

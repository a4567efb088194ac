"""What the Eval, Merge and Audit tabs share: a form with a run button, one job in a thread worker
through the `Backend`, and its end posted back as a typed message.

A subclass says how to run its request (`run_job`), how to describe it in the log
(`describe`), what to show while and after it runs (`status_text`), and what to do with the
result (`use_result`; a method named on_job_ended would be taken by Textual for a second handler
of the message). The run button is never disabled while the job runs: a disabled button loses
focus to the list above it, and the next enter would tick or untick a checkbox there. Pressing
it again only says that the job is running.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.text import Text
from textual import on
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, SelectionList, Static
from textual.worker import Worker, WorkerState, get_current_worker

from searchgrpo.config import Config
from searchgrpo.events import EventSink, LogMessage
from tui.backend import Backend
from tui.failures import report_failure
from tui.model import JobModel


class JobEnded(Message):
    """A job pane's worker ended: `result` is the backend's typed result, or `error` is set."""

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        super().__init__()
        self.result = result
        self.error = error


class JobPane(Horizontal):
    """A form and a job; see the module docstring for what a subclass provides."""

    JOB = ""
    """The job's name: eval or merge (the worker group, and the words of notices)."""
    BUTTON = ""
    """The run button's id, and its label when idle."""
    LABEL = ""

    def __init__(self, job: JobModel, cfg: Config, sink: EventSink, backend: Backend, **kwargs) -> None:
        super().__init__(**kwargs)
        self.job, self.cfg, self.sink, self.backend = job, cfg, sink, backend
        self.request: Any = None
        """The request of the job running (or run last)."""
        self._drawn = -1

    # ------------------------------------------------------------------ running

    def start(self, request: Any) -> None:
        """Run the job with this request (ignored, with a notice, while one runs)."""
        if self.job.status == "running":
            self.notify(f"The {self.JOB} is still running.", severity="warning")
            return
        self.request = request
        self.job.reset()
        self.sink(LogMessage("info", f"{self.JOB} requested: {self.describe(request)}"))
        self.run_worker(
            lambda: self.run_job(request, get_current_worker().cancelled_event),
            thread=True,
            group=self.JOB,
            exclusive=True,
            exit_on_error=False,
            description=self.JOB,
        )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.node is not self or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR):
            return
        event.stop()
        if event.state == WorkerState.SUCCESS:
            self.post_message(JobEnded(result=event.worker.result))
        else:
            self.post_message(JobEnded(error=event.worker.error))

    @on(JobEnded)
    def _ended(self, message: JobEnded) -> None:
        message.stop()
        if message.error is not None:
            error = message.error
            self.job.fail(f"{type(error).__name__}: {error}")
            report_failure(self, self.JOB, error)
            return
        self.use_result(message.result)

    def finish(self) -> None:
        """Mark the job done (a subclass calls it from `use_result` on success)."""
        self.job.status = "done"
        self.job.version += 1

    # ------------------------------------------------------------------ redraw

    def update_from(self) -> None:
        job = self.job
        if job.version == self._drawn:
            return
        self._drawn = job.version
        button = self.query_one(f"#{self.BUTTON}", Button)
        button.label = f"{self.LABEL} (running…)" if job.status == "running" else self.LABEL
        self.query_one(f"#{self.JOB}-status", Static).update(self.status_text())
        self.redraw_job()

    def status_head(self) -> Text:
        """The first line of the status: running, failed with its error, or done."""
        job = self.job
        if job.status == "running":
            return Text("running…\n", style="bold")
        if job.status == "failed":
            return Text(f"✖ {job.error}\n", style="bold red")
        if job.status == "done":
            return Text("done\n", style="bold green")
        return Text()

    @staticmethod
    def highlight_first(options: SelectionList) -> None:
        """Put the list's cursor on its first option, so the first Down moves past it."""
        if options.option_count and options.highlighted is None:
            options.highlighted = 0

    # ------------------------------------------------------------------ for subclasses

    def run_job(self, request: Any, stop: threading.Event) -> Any:
        raise NotImplementedError

    def describe(self, request: Any) -> str:
        raise NotImplementedError

    def status_text(self) -> Text:
        raise NotImplementedError

    def redraw_job(self) -> None:
        """Redraw anything else that follows the job (tables, bars)."""

    def use_result(self, result: Any) -> None:
        raise NotImplementedError

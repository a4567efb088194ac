"""What the Eval, Merge and Audit tabs share: a form with a run button, one job in a thread worker
through the `Backend`, and its end posted back as a typed message.

A subclass says how to run its request (`run_job`), how to describe it in the log
(`describe`), what to show while and after it runs (`status_text`), and what to do with the
result (`use_result`; a method named on_job_ended would be taken by Textual for a second handler
of the message). The run button is never disabled while the job runs: a disabled button loses
focus to the list above it, and the next enter would tick or untick a checkbox there. Pressing
it again only says that the job is running.

A job can be cancelled (`cancel`: the console's `q`): its worker's cancel flag is the stop flag the
core's job checks between decode steps, states and stages, so it ends within about a second with
`JobCancelled`; `job_ended` is set when the job's function returns, which the console waits for
before the process exits (the worker's thread itself belongs to a pool and outlives the job).

Narrower than 110 columns the form and the results do not both fit: the pane shows one at a time
(`-view-form` / `-view-results`), `v` switches, the results show when a job ends and the view with
the progress shows when one starts. The form's fields scroll; its run button, status and progress
stay in view below them.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, SelectionList, Static
from textual.worker import Worker, WorkerState, get_current_worker

from searchgrpo.config import Config
from searchgrpo.errors import JobCancelled
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
    PROGRESS_VIEW = "form"
    """The narrow view that shows the job's progress (`form` or `results`)."""
    NARROW_WIDTH: ClassVar[int] = 110
    view = "form"

    def __init__(self, job: JobModel, cfg: Config, sink: EventSink, backend: Backend, **kwargs) -> None:
        super().__init__(**kwargs)
        self.job, self.cfg, self.sink, self.backend = job, cfg, sink, backend
        self.request: Any = None
        """The request of the job running (or run last)."""
        self.job_ended: threading.Event | None = None
        """Set when the job running (or run last) has returned, in its thread."""
        self._drawn = -1

    # ------------------------------------------------------------------ narrow views

    def on_resize(self) -> None:
        self.set_class(self.app.size.width < self.NARROW_WIDTH, "-narrow")
        self.show_view(self.view)

    def show_view(self, view: str) -> None:
        """Show the form or the results (both when wide enough)."""
        self.view = view
        for name in ("form", "results"):
            self.set_class(view == name, f"-view-{name}")
        hint = "v: the results" if view == "form" else "v: the form"
        for node in self.query(".form, .results"):
            node.border_subtitle = hint if self.has_class("-narrow") else ""

    def action_view(self) -> None:
        self.show_view("results" if self.view == "form" else "form")
        if self.has_class("-narrow"):
            target = self.query_one(".results" if self.view == "results" else ".form SelectionList, .form Input")
            target.focus()

    # ------------------------------------------------------------------ running

    def start(self, request: Any) -> None:
        """Run the job with this request (ignored, with a notice, while one runs)."""
        if self.job.status == "running":
            self.notify(f"The {self.JOB} is still running.", severity="warning")
            return
        self.request = request
        self.job.reset()
        self.sink(LogMessage("info", f"{self.JOB} requested: {self.describe(request)}"))
        self.show_view(self.PROGRESS_VIEW)

        ended = self.job_ended = threading.Event()

        def work() -> Any:
            try:
                return self.run_job(request, get_current_worker().cancelled_event)
            finally:
                ended.set()

        self.run_worker(
            work,
            thread=True,
            group=self.JOB,
            exclusive=True,
            exit_on_error=False,
            description=self.JOB,
        )

    @property
    def running(self) -> bool:
        return self.job.status == "running"

    def cancel(self) -> None:
        """Ask the running job to stop (its worker's cancel flag: the job's `stop`)."""
        for worker in self.app.workers:
            if worker.node is self and worker.group == self.JOB:
                worker.cancel()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        ended = (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED)
        if event.worker.node is not self or event.state not in ended:
            return
        event.stop()
        if event.state == WorkerState.SUCCESS:
            self.post_message(JobEnded(result=event.worker.result))
        elif event.state == WorkerState.CANCELLED:
            self.post_message(JobEnded(error=JobCancelled(f"{self.JOB} cancelled: nothing of it was written")))
        else:
            self.post_message(JobEnded(error=event.worker.error))

    @on(JobEnded)
    def _ended(self, message: JobEnded) -> None:
        message.stop()
        if isinstance(message.error, JobCancelled):
            self.job.fail(str(message.error), status="cancelled")
            self.sink(LogMessage("info", str(message.error)))
            return
        if message.error is not None:
            error = message.error
            self.job.fail(f"{type(error).__name__}: {error}")
            report_failure(self, self.JOB, error)
            return
        self.use_result(message.result)

    def finish(self) -> None:
        """Mark the job done (a subclass calls it from `use_result` on success); the results show."""
        self.job.status = "done"
        self.job.version += 1
        self.show_view("results")

    # ------------------------------------------------------------------ redraw

    def update_from(self) -> None:
        job = self.job
        if job.version == self._drawn:
            return
        self._drawn = job.version
        button = self.query_one(f"#{self.BUTTON}", Button)
        button.label = f"{self.LABEL} (running…)" if job.status == "running" else self.LABEL
        status = self.status_text()
        status.rstrip()
        self.query_one(f"#{self.JOB}-status", Static).update(status)
        self.redraw_job()

    def status_head(self) -> Text:
        """The first line of the status: running, failed with its error, or done."""
        job = self.job
        if job.status == "running":
            return Text("running…\n", style="bold")
        if job.status == "failed":
            return Text(f"✖ {job.error}\n", style="bold red")
        if job.status == "cancelled":
            return Text(f"✖ {job.error}\n", style="bold yellow")
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

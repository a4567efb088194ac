"""The Merge tab: choose checkpoints and an output folder, merge in a worker with progress.

The pane runs merge in its own thread worker. Existing output folders are never replaced
silently: when merge refuses with `OutputExists`, a dialog names them, and only an explicit
"Overwrite" runs the merge again with overwrite=True.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, DataTable, Input, Label, SelectionList, Static
from textual.worker import Worker, WorkerState, get_current_worker

from searchgrpo.config import Config
from searchgrpo.events import EventSink, LogMessage
from tui.failures import report_failure
from tui.format import bar, plain
from tui.jobs import existing_outputs, run_merge_job
from tui.model import JobModel
from tui.screens.confirm import ConfirmScreen


class MergePane(Horizontal):
    """Merge form on the left, progress and results on the right."""

    def __init__(self, job: JobModel, cfg: Config, sink: EventSink, **kwargs) -> None:
        super().__init__(**kwargs)
        self.job, self.cfg, self.sink = job, cfg, sink
        self.request: dict[str, Any] = {}
        """The request of the merge running (or last run)."""
        self._drawn = -1

    def compose(self) -> ComposeResult:
        with Vertical(id="merge-form", classes="form"):
            yield Label("Checkpoints to merge", classes="section")
            yield SelectionList[str](id="merge-checkpoints")
            yield Static(id="merge-run-dir", classes="hint")
            yield Label("Output folder ({base}-grpo-step{N}/ inside)")
            yield Input("merged", id="merge-output")
            yield Button("Merge", id="merge-run", variant="primary")
        with Vertical(id="merge-results"):
            yield Static("Merged models will be listed here.", id="merge-status")
            yield DataTable(id="merge-outputs", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#merge-form").border_title = "merge LoRA into the base"
        self.query_one("#merge-results").border_title = "progress"
        self.set_checkpoints(None, [])

    def set_checkpoints(self, run_dir: Path | None, checkpoints: list[tuple[str, str]]) -> None:
        boxes = self.query_one("#merge-checkpoints", SelectionList)
        chosen = set(boxes.selected)
        boxes.clear_options()
        for name, path in reversed(checkpoints):
            boxes.add_option((name, path, path in chosen))
        where = f"{len(checkpoints)} checkpoint(s) in {run_dir}" if run_dir else "no run yet: nothing to merge"
        self.query_one("#merge-run-dir", Static).update(Text(where))

    @on(Button.Pressed, "#merge-run")
    def _run(self) -> None:
        chosen = self.query_one("#merge-checkpoints", SelectionList).selected
        output = self.query_one("#merge-output", Input).value.strip()
        if not chosen:
            self.notify("Choose at least one checkpoint.", severity="warning")
            return
        if not output:
            self.notify("Name an output folder.", severity="warning")
            return
        self.start({"checkpoints": list(chosen), "output_dir": output})

    def start(self, request: dict[str, Any]) -> None:
        """Run merge with these `MergeRequest` fields."""
        self.request = request
        self.job.reset()
        self.sink(LogMessage("info", f"merge requested: {request}"))
        self._merge(request)

    @work(thread=True, exclusive=True, group="merge", exit_on_error=False, description="merge")
    def _merge(self, request: dict[str, Any]) -> list[str]:
        return run_merge_job(self.cfg, request, self.sink, get_current_worker().cancelled_event)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != "merge":
            return
        if event.state == WorkerState.SUCCESS:
            self.job.status = "done"
            self.job.version += 1
        elif event.state == WorkerState.ERROR:
            error = event.worker.error
            paths = existing_outputs(error)
            if paths is None:
                self.job.fail(f"{type(error).__name__}: {error}")
                report_failure(self, "merge", error)
                return
            self.job.fail("output exists: " + ", ".join(paths))
            question = "These merged models already exist:\n\n" + "\n".join(paths) + "\n\nOverwrite them?"
            self.app.push_screen(ConfirmScreen(question, "Overwrite"), self._overwrite_answered)

    def _overwrite_answered(self, yes: bool | None) -> None:
        if yes:
            self.start({**self.request, "overwrite": True})
        else:
            self.sink(LogMessage("info", "merge cancelled: the existing output was kept"))

    def update_from(self) -> None:
        job = self.job
        if job.version == self._drawn:
            return
        self._drawn = job.version
        self.query_one("#merge-run", Button).disabled = job.status == "running"
        lines = Text()
        if job.status == "running":
            lines.append(f"merging into {job.started.output_dir if job.started else '…'}\n", style="bold")
        elif job.status == "failed":
            lines.append(f"✖ {job.error}\n", style="bold red")
        elif job.status == "done":
            lines.append("done\n", style="bold green")
        for unit, (done, total) in job.progress.items():
            lines.append(f"{Path(unit.split(': ')[0]).name}: {unit.split(': ')[-1]:<10} {bar(done, total, 16)}\n")
        self.query_one("#merge-status", Static).update(lines)
        table = self.query_one("#merge-outputs", DataTable)
        if job.status == "done" and job.result is not None:
            table.clear(columns=True)
            table.add_columns("model folder", "parity")
            parity = list(job.result.parity) + [{}] * len(job.result.outputs)
            for path, figures in zip(job.result.outputs, parity):
                table.add_row(plain(path), plain(", ".join(f"{k}={_short(v)}" for k, v in figures.items()) or "–"))


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)

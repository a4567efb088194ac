"""The Merge tab: choose checkpoints and an output folder, merge in a worker with progress.

Existing output folders are never replaced silently: the app asks in a dialog first (see
`ConsoleApp._merge_finished`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Label, SelectionList, Static

from tui.format import bar
from tui.model import JobModel


class MergePane(Horizontal):
    """Merge form on the left, progress and results on the right."""

    class Requested(Message):
        """Run merge with these `MergeRequest` fields."""

        def __init__(self, request: dict[str, Any]) -> None:
            super().__init__()
            self.request = request

    def __init__(self, job: JobModel, **kwargs) -> None:
        super().__init__(**kwargs)
        self.job = job
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
        self.query_one("#merge-run-dir", Static).update(where)

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
        self.post_message(self.Requested({"checkpoints": list(chosen), "output_dir": output}))

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
                table.add_row(path, ", ".join(f"{k}={_short(v)}" for k, v in figures.items()) or "–")


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)

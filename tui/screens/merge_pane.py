"""The Merge tab: choose checkpoints, the output dtype and folder, merge in a worker with progress.

The pane runs merge through the backend in a thread worker (`JobPane`). Existing output folders
are never replaced silently: when the backend answers `MergeRefused`, a dialog names them, and
only an explicit "Overwrite" runs the merge again with overwrite=True. Each checkpoint has one
bar: the stages it finished (load, reference, merge, save, parity), full once its merge is done
or refused. The dtype is the CLI's `--dtype` (bfloat16 by default, as vLLM serves); a merge that
fails its parity check is listed with its reason and remedy, and the others are still written.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Button, DataTable, Input, Label, Select, SelectionList, Static

from searchgrpo.events import LogMessage
from tui.backend import MergeDone, MergeRefused, MergeRequest
from tui.format import bar, plain, printable
from tui.screens.confirm import ConfirmScreen
from tui.screens.job_pane import JobPane

DTYPES = [("bfloat16 (default)", "bfloat16"), ("float16", "float16"), ("float32 (twice as big)", "float32")]
"""The output dtypes `searchgrpo merge --dtype` takes, as the form offers them."""


class MergePane(JobPane):
    """Merge form on the left, progress and results on the right."""

    JOB, BUTTON, LABEL = "merge", "merge-run", "Merge"
    PROGRESS_VIEW = "results"

    def compose(self) -> ComposeResult:
        with Vertical(id="merge-form", classes="form"):
            with VerticalScroll(classes="fields"):
                yield Label("Checkpoints to merge", classes="section")
                yield SelectionList[str](id="merge-checkpoints")
                yield Static(id="merge-run-dir", classes="hint")
                yield Label("Output dtype (as it will be served)")
                yield Select(DTYPES, value="bfloat16", allow_blank=False, id="merge-dtype")
                yield Label("Output folder ({base}-grpo-step{N}/ inside)")
                yield Input("merged", id="merge-output")
            with Vertical(classes="run-area"):
                yield Button(self.LABEL, id=self.BUTTON, variant="primary")
        with VerticalScroll(id="merge-results", classes="results"):
            yield Static("Merged models will be listed here.", id="merge-status")
            yield DataTable(id="merge-outputs", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#merge-form").border_title = "merge LoRA into the base"
        self.query_one("#merge-results").border_title = "progress"
        self.set_checkpoints(None, [])

    def set_checkpoints(self, run_dir: Path | None, checkpoints: list[tuple[str, str]]) -> None:
        """Offer these checkpoints, keeping what was ticked and the cursor."""
        boxes = self.query_one("#merge-checkpoints", SelectionList)
        chosen = set(boxes.selected)
        cursor = boxes.highlighted
        boxes.clear_options()
        for name, path in reversed(checkpoints):
            boxes.add_option((plain(name), path, path in chosen))
        if cursor is not None and cursor < boxes.option_count:
            boxes.highlighted = cursor
        self.highlight_first(boxes)
        where = f"{len(checkpoints)} checkpoint(s) in {run_dir}" if run_dir else "no run yet: nothing to merge"
        self.query_one("#merge-run-dir", Static).update(Text(printable(where, one_line=True)))

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
        dtype = str(self.query_one("#merge-dtype", Select).value)
        self.start(MergeRequest(list(chosen), output, dtype=dtype))

    def describe(self, request: MergeRequest) -> str:
        names = ", ".join(Path(c).name for c in request.checkpoints)
        return f"{names} into {request.output_dir}/ in {request.dtype}" + (
            " (overwriting)" if request.overwrite else ""
        )

    def run_job(self, request: MergeRequest, stop: threading.Event) -> MergeDone | MergeRefused:
        return self.backend.merge(self.cfg, request, self.sink, stop)

    def use_result(self, result: MergeDone | MergeRefused) -> None:
        if isinstance(result, MergeDone):
            self.finish()
            if result.refused:
                self.notify(
                    f"{len(result.refused)} merge(s) refused by the parity check; the reasons are in the pane.",
                    severity="warning",
                )
            return
        self.job.fail("output exists: " + ", ".join(result.existing))
        question = "These merged models already exist:\n\n" + "\n".join(result.existing) + "\n\nOverwrite them?"
        self.app.push_screen(ConfirmScreen(question, "Overwrite"), self._overwrite_answered)

    def _overwrite_answered(self, yes: bool | None) -> None:
        if yes:
            self.start(dataclasses.replace(self.request, overwrite=True))
        else:
            self.sink(LogMessage("info", "merge cancelled: the existing output was kept"))

    def status_text(self) -> Text:
        job = self.job
        lines = Text()
        if job.status == "running":
            where = job.started.output_dir if job.started else "…"
            dtype = getattr(self.request, "dtype", "")
            lines.append(f"merging into {printable(where, one_line=True)} in {dtype}\n", style="bold")
        else:
            lines.append_text(self.status_head())
        for checkpoint, (done, total) in job.progress.items():
            name = printable(Path(checkpoint).name, one_line=True)
            stage = job.stages.get(checkpoint, "")
            lines.append(f"{name}  {bar(done, total, 16)}  ")
            lines.append(f"{stage}\n", style="bold red" if stage == "refused" else "")
        for refused in getattr(job.result, "refused", None) or []:
            lines.append(
                f"✖ {printable(Path(str(refused.get('checkpoint'))).name, one_line=True)} refused: ", "bold red"
            )
            lines.append(f"{printable(str(refused.get('reason', '')), one_line=True)}\n")
        return lines

    def redraw_job(self) -> None:
        job = self.job
        table = self.query_one("#merge-outputs", DataTable)
        table.display = job.status == "done" and bool(getattr(job.result, "parity", None))
        if not table.display:
            return
        table.clear(columns=True)
        table.add_columns("model folder", "max |Δlogp|", "mean |Δlogp|", "top-1", "ties")
        dtypes = {str(p.get("dtype")) for p in job.result.parity} or {"–"}
        table.border_title = f"parity against base + adapter in {', '.join(sorted(dtypes))}"
        parity = list(job.result.parity) + [{}] * len(job.result.outputs)
        for path, figures in zip(job.result.outputs, parity):
            table.add_row(*parity_cells(path, figures))


def parity_cells(path: str, figures: dict[str, Any]) -> tuple[Any, ...]:
    """A merged model's row: its folder and the parity check's figures (against base + adapter in
    the same dtype), each in its own column."""

    def number(key: str, spec: str) -> Text:
        value = figures.get(key)
        return Text(f"{value:{spec}}" if isinstance(value, (int, float)) else "–", justify="right")

    return (
        plain(path),
        number("max_abs_logprob_delta", ".2e"),
        number("mean_abs_logprob_delta", ".2e"),
        number("top1_agreement", ".1%"),
        Text(str(figures.get("near_ties", "–")), justify="right"),
    )

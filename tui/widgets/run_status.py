"""The run's headline: state, step, epoch, ETA, a progress bar, and the error when it failed."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import ProgressBar, Static

from tui.format import STATUS_STYLE, fmt_duration
from tui.model import RunModel

SOURCE_TAG = {"live": "LIVE", "attach": "ATTACHED (read-only)", "replay": "REPLAY (read-only)"}


class RunStatus(Widget):
    """State badge, step/epoch/ETA line and progress bar of a run."""

    def __init__(self, source: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.source = source
        self._drawn = -1

    def compose(self) -> ComposeResult:
        with Horizontal(id="run-line"):
            yield Static(id="run-badge")
            yield Static(id="run-text")
            yield ProgressBar(total=1, show_eta=False, id="run-progress")
        yield Static(id="run-error")

    def update_from(self, run: RunModel) -> None:
        if run.version == self._drawn:
            return
        self._drawn = run.version
        self.set_class(run.status == "failed", "-failed")
        self.query_one("#run-badge", Static).update(
            Text(f" {run.status.upper()} ", style=f"reverse {STATUS_STYLE.get(run.status, '')}")
        )
        self.query_one("#run-text", Static).update(self._line(run))
        bar = self.query_one("#run-progress", ProgressBar)
        bar.update(total=max(run.total_steps, 1), progress=run.step)
        error = f"✖ {run.error}  (traceback in the Log tab)" if run.status == "failed" else ""
        self.query_one("#run-error", Static).update(Text(error))

    def _line(self, run: RunModel) -> Text:
        text = Text()
        text.append(f" {SOURCE_TAG[self.source]} ", style="bold")
        if run.info is None:
            hint = "press s to start training" if self.source == "live" else "waiting for the run's first events"
            return text.append(hint, style="dim")
        info = run.info
        epochs = max(info.epochs, 1)
        text.append(f"{info.run_id}", style="bold cyan")
        text.append(f"  {info.base_model} on {info.device}", style="dim")
        text.append(f"  step {run.step}/{run.total_steps}")
        text.append(f"  epoch {min(run.epoch + 1, epochs)}/{epochs}")
        if run.active:
            text.append(f"  ETA {fmt_duration(run.eta_seconds())}")
        if run.checkpoints:
            text.append(f"  ckpt {run.checkpoints[-1].step}", style="green")
        return text

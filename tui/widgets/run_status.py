"""The run's headline: state, step, ETA, epoch, a progress bar, the error when it failed, and a
hint line (how long the run is, how to stop and resume it; a stalled attach, or the hack radar's
judge drift, says so here)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import ProgressBar, Static

from tui.format import STATUS_STYLE, fmt_duration, printable
from tui.model import RunModel
from tui.widgets.steady_bar import SteadyProgressBar

SOURCE_TAG = {"live": "LIVE", "attach": "ATTACHED (read-only)", "replay": "REPLAY (read-only)"}


class RunStatus(Widget):
    """State badge, step/ETA/epoch line and progress bar of a run."""

    def __init__(self, source: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.source = source
        self._drawn: tuple = ()

    def compose(self) -> ComposeResult:
        with Horizontal(id="run-line"):
            yield Static(id="run-badge")
            yield Static(id="run-text")
            yield SteadyProgressBar(total=1, show_eta=False, id="run-progress")
        yield Static(id="run-hint")
        yield Static(id="run-error")

    def update_from(self, run: RunModel) -> None:
        if (run.version, run.stalled_s) == self._drawn:
            return
        self._drawn = (run.version, run.stalled_s)
        self.set_class(run.status == "failed", "-failed")
        badge = "evaluating" if run.eval_progress is not None and run.status == "running" else run.status
        self.query_one("#run-badge", Static).update(
            Text(f" {badge.upper()} ", style=f"reverse {STATUS_STYLE.get(badge, '')}")
        )
        self.query_one("#run-text", Static).update(self._line(run))
        self.query_one("#run-hint", Static).update(self._hint(run))
        bar = self.query_one("#run-progress", ProgressBar)
        bar.update(total=max(run.total_steps, 1), progress=run.step)
        error = f"✖ {printable(run.error, one_line=True)}  (traceback in the Log tab)" if run.status == "failed" else ""
        self.query_one("#run-error", Static).update(Text(error))

    def _line(self, run: RunModel) -> Text:
        """What matters first (step, ETA), so a narrow terminal cuts only the run's name."""
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.source != "live":
            text.append(f"{SOURCE_TAG[self.source]} ", style="bold")
        if run.info is None:
            hint = "press s to start training" if self.source == "live" else "waiting for the run's first events"
            return text.append(hint, style="dim")
        info = run.info
        epochs = max(info.epochs, 1)
        text.append(f"step {run.step}/{run.total_steps}", style="bold")
        if run.eval_progress is not None:
            done, total = run.eval_progress
            text.append(f"  in-training eval {done}/{total} states", style="bold magenta")
        elif run.active:
            text.append(f"  ETA {fmt_duration(run.eta_seconds())}", style="bold")
        text.append(f"  epoch {min(run.epoch + 1, epochs)}/{epochs}")
        if run.checkpoints:
            text.append(f"  ckpt {run.checkpoints[-1].step}", style="green")
        text.append(f"  {printable(info.run_id, one_line=True)}", style="bold cyan")
        text.append(
            f"  {printable(info.base_model, one_line=True)} on {printable(info.device, one_line=True)}", style="dim"
        )
        return text

    def _hint(self, run: RunModel) -> Text:
        if run.metrics.get("checker/judge_drift", 0.0) > 0:
            return Text(
                "⚠ judge drift: the checker's IMPORTANT rate rises while its precision against gold falls "
                "(hack radar below; Log tab)",
                style="bold yellow",
            )
        if run.stalled_s:
            return Text(
                f"⚠ no new events for {fmt_duration(run.stalled_s)}: the run may have stopped "
                "(its process died, or its folder is no longer synced)",
                style="bold yellow",
            )
        if self.source != "live" or run.info is None or not run.active:
            return Text()
        left = run.eta_seconds()
        if run.status == "pausing":
            length = "pausing after the current step (p again: keep going)"
        elif left is not None:
            length = f"{run.total_steps} steps, about {fmt_duration(left)} left at this pace"
        else:
            length = (
                f"{run.total_steps} steps; the time left shows after step {run.first_step + 1} "
                f"(step {run.first_step} warms up)"
            )
        return Text.assemble(
            (length, ""),
            ("  ·  x: stop with a checkpoint; ", "dim"),
            ("searchgrpo tui --resume", "bold"),
            (" continues it", "dim"),
        )

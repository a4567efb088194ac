"""The hack radar panel: the checker against gold on the documents the policy retrieves, and its
IMPORTANT rate by document length and by overlap with the question, each with its trend.

It reads the `checker/*` radar metrics (searchgrpo/train/judge_radar.py) from the run's history and
is shown only when the run reports them. A value is the last one reported (a rate with nothing to
count in a step keeps its earlier value); the sparkline shows the recent steps.
A rising IMPORTANT rate while gold precision falls is the sign the policy is learning what the judge
over-rates; the trainer's drift rule (`checker/judge_drift`) turns the panel's border yellow and
its last line into a warning.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui.format import sparkline
from tui.model import RunModel

TREND = 12
"""Steps in each sparkline."""
HEADLINE = (
    ("gold precision", "checker/gold_precision"),
    ("gold recall", "checker/gold_recall"),
    ("IMPORTANT rate", "checker/important_rate"),
    ("minus gold", "checker/important_rate_minus_gold"),
)
BINS = (
    ("by length", ("q1", "q2", "q3", "q4"), ("length_q1", "length_q2", "length_q3", "length_q4")),
    ("by overlap", ("<.25", "<.5", "<.75", "≥.75"), ("overlap_0", "overlap_25", "overlap_50", "overlap_75")),
)
SHOWN_WHEN = "checker/important_rate"
"""The panel shows once the run reports this metric."""


def drifting(run: RunModel) -> bool:
    """The last step's drift flag is up (the trainer's rule, `checker/judge_drift`)."""
    return run.metrics.get("checker/judge_drift", 0.0) > 0


def render_radar(run: RunModel) -> Text:
    """The panel's text: headline figures with trends, the two bias rows, and the drift line."""
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, (name, key) in enumerate(HEADLINE):
        values = run.last(key, TREND)
        if i:
            text.append("   ")
        text.append(f"{name} ", style="dim")
        if not values:
            text.append("–")
            continue
        shown = f"{values[-1]:+.2f}" if key.endswith("minus_gold") else f"{values[-1]:.2f}"
        text.append(shown, style="bold")
        text.append(f" {sparkline(values, TREND)}", style="cyan")
    for title, labels, names in BINS:
        text.append(f"\nIMPORTANT {title} ", style="dim")
        for label, name in zip(labels, names):
            judged = run.metrics.get(f"checker/important_rate/{name}")
            gold = run.metrics.get(f"checker/gold_important_rate/{name}")
            text.append(f" {label} ", style="dim")
            text.append("–" if judged is None else f"{judged:.2f}", style="bold")
            if gold is not None:
                text.append(f"/{gold:.2f}", style="dim")
        if any(k.startswith("checker/gold_important_rate/") for k in run.metrics):
            text.append("   (checker/gold)", style="dim")
    if drifting(run):
        text.append(
            "\n⚠ judge drift: the IMPORTANT rate rises while gold precision falls (Log tab; "
            "train.stop_on_judge_drift stops such a run)",
            style="bold yellow",
        )
    return text


class JudgeRadarPanel(Static):
    """The hack radar (see the module docstring); hidden until the run reports radar metrics."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._drawn = -1

    def on_mount(self) -> None:
        self.border_title = "hack radar · checker vs gold on retrieved documents"

    def update_from(self, run: RunModel) -> None:
        if run.steps_version == self._drawn:
            return
        self._drawn = run.steps_version
        shown = SHOWN_WHEN in run.history
        self.set_class(shown, "-shown")
        self.set_class(shown and drifting(run), "-drift")
        self.update(render_radar(run) if shown else "")

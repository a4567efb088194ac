"""A progress bar that draws the same whether its progress came before or after its first layout.

Textual's Bar rounds its percentage down to a whole cell of its width when the percentage is set;
one set before the bar has a width (before its first layout, or while its tab is hidden) stays
unrounded and draws half a cell more. `SteadyProgressBar` sets it again whenever its size
changes, so what it shows depends on its progress only, not on when the progress arrived (the
run's, the eval's and the audit's bars; a snapshot of a busy machine differed by that half cell).
"""

from __future__ import annotations

from textual import events
from textual.widgets import ProgressBar
from textual.widgets._progress_bar import Bar


class SteadyProgressBar(ProgressBar):
    """A ProgressBar whose bar is rounded to its width again on every resize."""

    def on_resize(self, _: events.Resize) -> None:
        bar = self.query_one(Bar)
        bar.percentage = self.percentage

"""One training metric over steps (the one chosen in the metric table)."""

from __future__ import annotations

from textual_plotext import PlotextPlot

from tui.format import fmt_value, thin
from tui.model import RunModel

MAX_POINTS = 240
"""Plenty for a braille line two dots per cell wide; more only slows the redraw."""


class MetricPlot(PlotextPlot):
    """A line plot of `key`'s history; set `key` to switch metric."""

    def __init__(self, key: str = "loss/total", **kwargs) -> None:
        super().__init__(**kwargs)
        self.key = key
        self._drawn: tuple[int, str] = (-1, "")

    def show(self, key: str, run: RunModel) -> None:
        self.key = key
        self.update_from(run)

    def update_from(self, run: RunModel) -> None:
        if (run.steps_version, self.key) == self._drawn:
            return
        self._drawn = (run.steps_version, self.key)
        plt = self.plt
        plt.clear_figure()
        plt.xlabel("step")
        points = thin(list(run.history.get(self.key, ())), MAX_POINTS)
        if not points:
            plt.title(f"{self.key}: no data yet")
        else:
            plt.plot([s for s, _ in points], [v for _, v in points], marker="braille", color="magenta")
            plt.title(f"{self.key}   last {fmt_value(self.key, points[-1][1])}")
        self.refresh()

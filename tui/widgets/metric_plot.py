"""One training metric over steps (the one chosen in the metric table), with the same metric of
the runs it is compared with."""

from __future__ import annotations

from collections.abc import Sequence

from textual_plotext import PlotextPlot

from tui.format import fmt_value, printable, smooth, thin
from tui.model import RunModel
from tui.widgets.reward_plot import COMPARE_COLOURS, label_of

MAX_POINTS = 240
"""Plenty for a braille line two dots per cell wide; more only slows the redraw."""


class MetricPlot(PlotextPlot):
    """A line plot of `key`'s history; set `key` to switch metric."""

    def __init__(self, key: str = "loss/total", **kwargs) -> None:
        super().__init__(**kwargs)
        self.key = key
        self._drawn: tuple = ()

    def show(self, key: str, run: RunModel, compare: Sequence[RunModel] = (), smoothing: bool = False) -> None:
        self.key = key
        self.update_from(run, compare, smoothing)

    def update_from(self, run: RunModel, compare: Sequence[RunModel] = (), smoothing: bool = False) -> None:
        state = (run.steps_version, tuple(c.steps_version for c in compare), self.key, smoothing)
        if state == self._drawn:
            return
        self._drawn = state
        plt = self.plt
        plt.clear_figure()  # no x label: the title says "by step", and the plot keeps that row
        name = printable(self.key, one_line=True)
        plt.ylabel(name[-24:])
        points = thin(list(run.history.get(self.key, ())), MAX_POINTS)
        series = [(run, points, "magenta")] + [
            (other, thin(list(other.history.get(self.key, ())), MAX_POINTS), COMPARE_COLOURS[i % len(COMPARE_COLOURS)])
            for i, other in enumerate(compare)
        ]
        if not any(p for _, p, _ in series):
            plt.title(f"{name} by step: no data yet")
            self.refresh()
            return
        for i, (owner, pts, colour) in enumerate(series):
            if not pts:
                continue
            ys = [v for _, v in pts]
            if smoothing:
                if i == 0:
                    plt.plot([s for s, _ in pts], ys, marker="dot", color="gray")
                ys = smooth(ys)
            label = label_of(owner, f"run {i + 1}") if compare else None
            plt.plot([s for s, _ in pts], ys, marker="braille", color=colour, label=label)
        last = f"   last {fmt_value(self.key, points[-1][1])}" if points else ""
        plt.title(f"{name} by step{last}" + ("  (smoothed)" if smoothing else ""))
        self.refresh()

"""Reward per step: the mean, a min/max band, the in-training eval reward as points, and the mean
reward of the runs it is compared with."""

from __future__ import annotations

from collections.abc import Sequence

from textual_plotext import PlotextPlot

from tui.format import printable, smooth, thin
from tui.model import RunModel

MAX_POINTS = 240
"""Plenty for a braille line two dots per cell wide; more only slows the redraw."""
COMPARE_COLOURS = ("orange", "cyan", "magenta", "blue", "red")


def label_of(run: RunModel, fallback: str) -> str:
    """A run's name in legends: its id, or `fallback` before its first event."""
    return printable(run.info.run_id, one_line=True)[:24] if run.info else fallback


class RewardPlot(PlotextPlot):
    """Mean group reward per step with its min/max band (plotext), both axes labelled."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._drawn: tuple = ()

    def update_from(self, run: RunModel, compare: Sequence[RunModel] = (), smoothing: bool = False) -> None:
        state = (run.steps_version, tuple(c.steps_version for c in compare), smoothing)
        if state == self._drawn:
            return
        self._drawn = state
        plt = self.plt
        plt.clear_figure()
        plt.xlabel("step")
        plt.ylabel("reward")
        mean = thin(list(run.history.get("reward/mean", ())), MAX_POINTS)
        if not mean and not compare:
            plt.title("reward: waiting for the first step")
            self.refresh()
            return
        steps = [s for s, _ in mean]
        wanted = set(steps)
        if not smoothing:
            for key in ("reward/min", "reward/max"):
                band = [(s, v) for s, v in run.history.get(key, ()) if s in wanted]
                plt.plot([s for s, _ in band], [v for _, v in band], marker="dot", color="gray")
        values = [v for _, v in mean]
        if smoothing and values:
            plt.plot(steps, values, marker="dot", color="gray")
            values = smooth(values)
        if values:
            plt.plot(steps, values, marker="braille", color="green", label=label_of(run, "mean") if compare else "mean")
        for i, other in enumerate(compare):
            points = thin(list(other.history.get("reward/mean", ())), MAX_POINTS)
            if points:
                ys = [v for _, v in points]
                plt.plot(
                    [s for s, _ in points],
                    smooth(ys) if smoothing else ys,
                    marker="braille",
                    color=COMPARE_COLOURS[i % len(COMPARE_COLOURS)],
                    label=label_of(other, f"run {i + 2}"),
                )
        evals = list(run.history.get("eval/reward_mean", ()))
        if evals:
            plt.scatter([s for s, _ in evals], [v for _, v in evals], marker="◆", color="cyan", label="eval")
        last = f"  last {mean[-1][1]:+.3f}" if mean else ""
        how = "smoothed; m: raw" if smoothing else "band: min–max"
        plt.title(f"reward{last}  ({how})")
        self.refresh()

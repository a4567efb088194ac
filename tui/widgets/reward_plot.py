"""Reward per step: the mean, a min/max band, and the in-training eval reward as points."""

from __future__ import annotations

from textual_plotext import PlotextPlot

from tui.format import thin
from tui.model import RunModel

MAX_POINTS = 240
"""Plenty for a braille line two dots per cell wide; more only slows the redraw."""


class RewardPlot(PlotextPlot):
    """Mean group reward per step with its min/max band (plotext)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._drawn = -1

    def update_from(self, run: RunModel) -> None:
        if run.steps_version == self._drawn:
            return
        self._drawn = run.steps_version
        plt = self.plt
        plt.clear_figure()
        plt.xlabel("step")
        mean = thin(list(run.history.get("reward/mean", ())), MAX_POINTS)
        if not mean:
            plt.title("reward: waiting for the first step")
            self.refresh()
            return
        steps = [s for s, _ in mean]
        wanted = set(steps)
        for key in ("reward/min", "reward/max"):
            band = [(s, v) for s, v in run.history.get(key, ()) if s in wanted]
            plt.plot([s for s, _ in band], [v for _, v in band], marker="dot", color="gray")
        plt.plot(steps, [v for _, v in mean], marker="braille", color="green", label="mean")
        evals = list(run.history.get("eval/reward_mean", ()))
        if evals:
            plt.scatter([s for s, _ in evals], [v for _, v in evals], marker="◆", color="cyan", label="eval")
        plt.title(f"reward  last {mean[-1][1]:+.3f}  (band: min–max)")
        self.refresh()

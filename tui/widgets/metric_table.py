"""Every metric of the last step with a sparkline of its trend; highlight one to plot it."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from tui.format import fmt_value, printable, sparkline
from tui.model import RunModel

FIRST = (
    "reward/mean",
    "reward/std",
    "reward/frac_zero_std",
    "loss/total",
    "loss/kl",
    "loss/clip_frac",
    "grad/norm",
    "train/lr",
    "time/step",
    "eval/reward_mean",
    "eval/important_discovery",
)
"""Shown first, in this order; the other metrics follow alphabetically."""
WARN = {
    "reward/frac_zero_std": 0.5,
    "train/nonfinite_skipped": 0.5,
    "checker/unparsable": 1.0,
    "checker/unparsable_share": 0.05,
    "checker/judge_drift": 0.5,
}
"""Values at or above these are highlighted (the unparsable share at checker.max_unparsable_frac's default)."""
TREND = 8
"""Steps in the sparkline."""
NAME_WIDTH = (12, 40)
"""The name column fits the longest metric name, within these bounds (longer names end in …)."""
VALUE_WIDTH = 9


def table_width(keys: list[str]) -> int:
    """Columns the table needs to show these names in full (cells pad one on each side; border,
    scrollbar)."""
    return name_width(keys) + VALUE_WIDTH + TREND + 3 * 2 + 2 + 2


def name_width(keys: list[str]) -> int:
    return min(max([NAME_WIDTH[0], *(len(k) for k in keys)]), NAME_WIDTH[1])


class MetricTable(DataTable):
    """Metric name, last value, and a sparkline of the recent steps."""

    def __init__(self, selected: str, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.selected = selected
        """The metric plotted beside the table; the cursor returns to it when rows change."""
        self._drawn = -1
        self._keys: list[str] = []

    def update_from(self, run: RunModel) -> None:
        if run.steps_version == self._drawn:
            return
        self._drawn = run.steps_version
        keys = [k for k in FIRST if k in run.history] + sorted(k for k in run.history if k not in FIRST)
        if keys != self._keys:
            self.clear(columns=True)
            self.add_column("metric", key="metric", width=name_width(keys))
            self.add_column("last", key="last", width=VALUE_WIDTH)
            self.add_column("trend", key="trend", width=TREND)
            self._keys = keys
            for key in keys:
                self.add_row(
                    Text(printable(key, one_line=True), overflow="ellipsis", no_wrap=True),
                    *self._cells(key, run),
                    key=key,
                )
            if self.selected in keys:
                self.move_cursor(row=keys.index(self.selected), animate=False)
            return
        for key in keys:
            value, trend = self._cells(key, run)
            self.update_cell(key, "last", value)
            self.update_cell(key, "trend", trend)

    def _cells(self, key: str, run: RunModel) -> tuple[Text, Text]:
        recent = run.last(key, TREND)
        value = recent[-1] if recent else None
        style = "bold yellow" if key in WARN and value is not None and value >= WARN[key] else ""
        return (Text(fmt_value(key, value), style=style, justify="right"), Text(sparkline(recent, TREND), style="cyan"))

    @property
    def highlighted_key(self) -> str | None:
        return self._keys[self.cursor_row] if 0 <= self.cursor_row < len(self._keys) else None

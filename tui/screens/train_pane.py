"""The Train tab: run status, reward and metric plots, the metric table, and the group browser
with its drill-down into a sample's clues, documents and verdicts."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from searchgrpo.events import GroupScored
from tui.format import printable
from tui.model import RunModel
from tui.widgets import GroupTable, MetricPlot, MetricTable, RewardPlot, RunStatus, SampleDetail

DEFAULT_METRIC = "loss/kl"
"""Plotted beside the reward until another metric is highlighted in the table."""


class TrainPane(Vertical):
    """Watch a run live (or attached, or replayed): the same widgets for all three."""

    def __init__(self, run: RunModel, source: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run = run
        self.source = source
        self.pinned: GroupScored | None = None
        """The group being browsed; None follows the newest."""
        self._groups_seen = -1

    def compose(self) -> ComposeResult:
        yield RunStatus(self.source, id="run-status")
        with Horizontal(id="plots"):
            yield RewardPlot(id="reward-plot")
            yield MetricTable(DEFAULT_METRIC, id="metric-table")
            yield MetricPlot(DEFAULT_METRIC, id="metric-plot")
        with Vertical(id="group-area"):
            yield Static(id="group-title")
            yield GroupTable(id="group-table")
            yield SampleDetail(id="sample-detail")

    def on_mount(self) -> None:
        self.query_one("#group-area").border_title = "current group"
        self.query_one("#sample-detail").border_title = "drill-down"
        self.query_one("#metric-table").border_title = "metrics"

    # ------------------------------------------------------------------ redraw

    def update_from(self, plots: bool) -> None:
        """Redraw what changed; `plots` also redraws the (costlier) plots."""
        run = self.run
        self.query_one(RunStatus).update_from(run)
        self.query_one(MetricTable).update_from(run)
        if plots:
            self.query_one(RewardPlot).update_from(run)
            self.query_one(MetricPlot).update_from(run)
        if run.groups_added != self._groups_seen:
            self._groups_seen = run.groups_added
            self._show_group()

    def _show_group(self) -> None:
        groups = self.run.groups
        area = self.query_one("#group-area")
        if not groups:
            self.query_one("#group-title", Static).update(Text("No group scored yet.", style="dim"))
            return
        pos = self._position()
        group = groups[pos]
        area.set_class(group.zero_std, "-zero-std")
        area.border_title = (f"group {pos + 1}/{len(groups)} · step {group.step}"
                             + ("  (following newest)" if self.pinned is None else "  (browsing: f follows newest)"))
        title = Text.assemble(("Q ", "dim"), (printable(group.question, one_line=True), "bold"), ("  ", ""),
                              (f"{group.state_id} round {group.round}", "dim"),
                              (f"   mean {group.reward_mean:+.3f} σ {group.reward_std:.3f}", ""))
        if group.zero_std:
            title.append("   ⚠ ZERO VARIANCE: all rewards equal, no learning signal", style="bold yellow")
        if group.original_clues:
            title.append("\noriginal clues: ", style="dim")
            title.append(" │ ".join(printable(c, one_line=True) for c in group.original_clues), style="dim italic")
        self.query_one("#group-title", Static).update(title)
        table = self.query_one(GroupTable)
        table.show(group)
        self.query_one(SampleDetail).show(table.sample)

    # ------------------------------------------------------------------ interaction

    @on(DataTable.RowHighlighted, "#group-table")
    def _sample_highlighted(self) -> None:
        self.query_one(SampleDetail).show(self.query_one(GroupTable).sample)

    @on(DataTable.RowSelected, "#group-table")
    def _sample_selected(self) -> None:
        self.action_detail()

    @on(DataTable.RowHighlighted, "#metric-table")
    def _metric_highlighted(self) -> None:
        table = self.query_one(MetricTable)
        key = table.highlighted_key
        if key:
            table.selected = key
            self.query_one(MetricPlot).show(key, self.run)

    def _position(self) -> int:
        """Index of the group shown; a pinned group that fell out of the history unpins."""
        groups = self.run.groups
        if self.pinned is not None:
            for i in range(len(groups) - 1, -1, -1):
                if groups[i] is self.pinned:
                    return i
            self.pinned = None
        return len(groups) - 1

    def action_older(self) -> None:
        if self.run.groups:
            self.pinned = self.run.groups[max(self._position() - 1, 0)]
            self._show_group()

    def action_newer(self) -> None:
        if self.pinned is not None:
            pos = self._position() + 1
            self.pinned = self.run.groups[pos] if pos < len(self.run.groups) - 1 else None
            self._show_group()

    def action_follow(self) -> None:
        self.pinned = None
        self._show_group()

    def action_detail(self) -> None:
        """Show the drill-down full screen (escape returns)."""
        detail = self.query_one(SampleDetail)
        if self.screen.maximized is detail:
            self.screen.minimize()
        else:
            detail.focus()
            self.screen.maximize(detail, container=False)

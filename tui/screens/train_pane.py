"""The Train tab: run status, reward and metric plots, the metric table, the hack radar (once the
run reports it), and the group browser with its drill-down into a sample's clues, documents and
verdicts.

The layout follows the terminal's size (`layout_for`): `wide` puts the reward plot, the metric
table and the metric plot side by side over the group browser; `medium` stacks the two plots
beside the table; `narrow` (80x24 and the like) shows one view at a time: the group browser,
the reward plot, or the metrics, and `v` switches between them.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import DataTable, Static

from searchgrpo.events import GroupScored
from tui.format import printable
from tui.model import RunModel
from tui.widgets import GroupTable, JudgeRadarPanel, MetricPlot, MetricTable, RewardPlot, RunStatus, SampleDetail
from tui.widgets.metric_table import table_width

DEFAULT_METRIC = "loss/kl"
"""Plotted beside the reward until another metric is highlighted in the table."""
VIEWS = ("group", "reward", "metrics")
"""What the narrow layout shows, one at a time (`v` moves to the next)."""
NARROW_WIDTH, WIDE_WIDTH, SHORT_HEIGHT = 110, 160, 32


def layout_for(width: int, height: int) -> str:
    """narrow, medium or wide, for a terminal of this size."""
    if width < NARROW_WIDTH or height < SHORT_HEIGHT:
        return "narrow"
    return "wide" if width >= WIDE_WIDTH else "medium"


class TrainPane(Vertical):
    """Watch a run live (or attached, or replayed): the same widgets for all three."""

    def __init__(self, run: RunModel, source: str, compare: Sequence[RunModel] = (), **kwargs) -> None:
        super().__init__(**kwargs)
        self.run = run
        self.compare = compare
        """Runs whose curves are drawn over this one's (a list the app's model fills)."""
        self.source = source
        self.pinned: GroupScored | None = None
        """The group being browsed; None follows the newest."""
        self.smoothing = False
        self.layout_name = ""
        self.view = "group"
        """The narrow layout's view (see VIEWS)."""
        self._groups_seen = -1
        self._table_width: tuple[int, str] = (0, "")

    def compose(self) -> ComposeResult:
        yield RunStatus(self.source, id="run-status")
        with Grid(id="plots"):
            yield RewardPlot(id="reward-plot")
            yield MetricTable(DEFAULT_METRIC, id="metric-table")
            yield MetricPlot(DEFAULT_METRIC, id="metric-plot")
        yield JudgeRadarPanel(id="judge-radar")
        with Vertical(id="group-area"):
            yield Static(id="group-title")
            yield GroupTable(id="group-table")
            yield SampleDetail(id="sample-detail")

    def on_mount(self) -> None:
        self.query_one("#group-area").border_title = "current group"
        self.query_one("#sample-detail").border_title = "drill-down"
        self.query_one("#metric-table").border_title = "metrics"
        self.watch(self.screen, "maximized", self._maximized_changed, init=False)
        self.apply_layout(self.app.size.width, self.app.size.height)

    def on_resize(self) -> None:
        self.apply_layout(self.app.size.width, self.app.size.height)

    # ------------------------------------------------------------------ layout

    def apply_layout(self, width: int, height: int) -> None:
        name = layout_for(width, height)
        if name != self.layout_name:
            for old in ("narrow", "medium", "wide"):
                self.set_class(old == name, f"-{old}")
            self.layout_name = name
            self._fit_table()
        self._show_view()

    def _show_view(self) -> None:
        narrow = self.layout_name == "narrow"
        for view in VIEWS:
            self.set_class(narrow and self.view == view, f"-view-{view}")
        hint = "v: the plots · enter: drill-down" if narrow else "enter: drill-down"
        self.query_one("#group-area").border_subtitle = hint

    def action_view(self) -> None:
        """The next view: narrow, the group browser, the reward plot or the metrics in turn; wider,
        where all are shown, the keys move between the group table and the metric table."""
        views = VIEWS if self.layout_name == "narrow" else ("group", "metrics")
        self.view = views[(views.index(self.view) + 1) % len(views)] if self.view in views else views[0]
        self._show_view()
        if self.view != "reward":
            self.query_one("#group-table" if self.view == "group" else "#metric-table").focus()

    def action_smooth(self) -> None:
        """Plot an exponential moving average of each curve (raw curves stay, in grey)."""
        self.smoothing = not self.smoothing
        self.update_from(plots=True)

    def _fit_table(self) -> None:
        """The metric table is as wide as its longest name needs (grid columns follow it)."""
        width = table_width(list(self.run.history))
        if (width, self.layout_name) != self._table_width:
            self._table_width = (width, self.layout_name)
            grid = self.query_one("#plots", Grid)
            grid.styles.grid_columns = {"wide": f"1fr {width} 1fr", "medium": f"1fr {width}"}.get(
                self.layout_name, "1fr"
            )

    # ------------------------------------------------------------------ redraw

    def update_from(self, plots: bool) -> None:
        """Redraw what changed; `plots` also redraws the (costlier) plots."""
        run = self.run
        self.query_one(RunStatus).update_from(run)
        self.query_one(MetricTable).update_from(run)
        self.query_one(JudgeRadarPanel).update_from(run)
        self._fit_table()
        if plots:
            self.query_one(RewardPlot).update_from(run, self.compare, self.smoothing)
            self.query_one(MetricPlot).update_from(run, self.compare, self.smoothing)
        if run.groups_added != self._groups_seen:
            self._groups_seen = run.groups_added
            self._show_group()

    def _show_group(self) -> None:
        groups = self.run.groups
        area = self.query_one("#group-area")
        table = self.query_one(GroupTable)
        if not groups:
            self.pinned = None
            area.border_title = "current group"
            area.set_class(False, "-zero-std")
            self.query_one("#group-title", Static).update(Text("No group scored yet.", style="dim"))
            table.show(None)
            self.query_one(SampleDetail).show(None)
            return
        pos = self._position()
        group = groups[pos]
        area.set_class(group.zero_std, "-zero-std")
        area.border_title = f"group {pos + 1}/{len(groups)} · step {group.step}" + (
            "  (following newest)" if self.pinned is None else "  (browsing: f follows newest)"
        )
        title = Text.assemble(
            ("Q ", "dim"),
            (printable(group.question, one_line=True), "bold"),
            ("  ", ""),
            (f"{printable(group.state_id, one_line=True)} round {group.round}", "dim"),
            (f"   mean {group.reward_mean:+.3f} σ {group.reward_std:.3f}", ""),
        )
        if group.zero_std:
            title.append("   ⚠ ZERO VARIANCE: all rewards equal, no learning signal", style="bold yellow")
        if group.original_clues:
            title.append("\noriginal clues: ", style="dim")
            title.append(" │ ".join(printable(c, one_line=True) for c in group.original_clues), style="dim italic")
        self.query_one("#group-title", Static).update(title)
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
            self.query_one(MetricPlot).show(key, self.run, self.compare, self.smoothing)

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
        """Show the drill-down full screen (escape, d or enter return)."""
        detail = self.query_one(SampleDetail)
        if self.screen.maximized is detail:
            self.screen.minimize()
        else:
            if self.layout_name == "narrow" and self.view != "group":
                self.view = "group"
                self._show_view()
            detail.focus()
            self.screen.maximize(detail, container=False)

    def _maximized_changed(self, maximized: object) -> None:
        # Back from the drill-down (escape, d or enter), the keys choose samples again.
        if maximized is None and self.screen.focused is self.query_one(SampleDetail):
            self.query_one(GroupTable).focus()

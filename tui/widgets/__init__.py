"""The console's widgets, one per file; each redraws from the `tui.model` objects it is given."""

from tui.widgets.group_table import GroupTable
from tui.widgets.judge_radar import JudgeRadarPanel
from tui.widgets.metric_plot import MetricPlot
from tui.widgets.metric_table import MetricTable
from tui.widgets.reward_plot import RewardPlot
from tui.widgets.run_status import RunStatus
from tui.widgets.sample_detail import SampleDetail

__all__ = ["GroupTable", "JudgeRadarPanel", "MetricPlot", "MetricTable", "RewardPlot", "RunStatus", "SampleDetail"]

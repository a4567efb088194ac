"""Snapshots of each pane (pytest-textual-snapshot). Scripted events with fixed times, a fixed
terminal size and relative paths keep them identical from run to run.

After a deliberate change to the look: `pytest tests/console/test_snapshots.py --snapshot-update`,
then review the SVGs under __snapshots__/ (and copy the README's ones to docs/).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from textual.widgets import SelectionList

from searchgrpo.events import RunStarted, StepFinished, event_to_dict
from tests.helpers.console import SIZE, make_app, make_checkpoint, settle, show_tab
from tests.helpers.scripted import ScriptedBackend, ScriptedRunner
from tests.helpers.scripted_events import run_started, scripted_run
from tests.helpers.waiting import until
from tui.backend import EvalRequest, MergeRequest
from tui.screens.confirm import ConfirmScreen
from tui.screens.eval_pane import EvalPane
from tui.screens.merge_pane import MergePane


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Log lines show local time; pin the zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", [(80, 24), SIZE, (200, 50)], ids=["80x24", "120x40", "200x50"])
def test_train_pane_mid_run(cfg, snap_compare, size):
    """The three layouts: narrow (one view: the group browser), medium and wide."""
    runner = ScriptedRunner(steps=12, gated=True)

    async def run_before(pilot):
        runner.allow(8)
        await until(pilot, lambda: pilot.app.model.run.step == 8, "step 8")
        pilot.app.redraw()
        await pilot.pause()

    assert snap_compare(make_app(cfg, runner, start=True), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("view", ["reward", "metrics"])
def test_narrow_train_pane_switches_views(cfg, snap_compare, view):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press(*(["v"] if view == "reward" else ["v", "v"]))
        pilot.app.redraw()
        await pilot.pause()

    assert snap_compare(
        make_app(cfg, ScriptedRunner(steps=12), start=True), terminal_size=(80, 24), run_before=run_before
    )


def test_replays_compared_and_smoothed(cfg, tmp_path, snap_compare):
    """`--replay A --replay B`: B's reward and metric curves over A's, smoothed with m."""
    first, second = Path("a.jsonl"), Path("b.jsonl")
    first.write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in scripted_run(steps=12)))
    other = [e for e in scripted_run(steps=12) if not isinstance(e, RunStarted)]
    second.write_text(
        "".join(
            json.dumps(event_to_dict(e)) + "\n"
            for e in [
                run_started(run_id="20260102-000000"),
                *(e for e in other if not isinstance(e, StepFinished)),
                *(
                    StepFinished(
                        e.step,
                        e.epoch,
                        e.total_steps,
                        {
                            **e.metrics,
                            "reward/mean": e.metrics["reward/mean"] + 1.0,
                            "loss/kl": e.metrics["loss/kl"] * 2,
                        },
                        e.time,
                    )
                    for e in other
                    if isinstance(e, StepFinished)
                ),
            ]
        )
    )

    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("m")
        pilot.app.redraw()
        await pilot.pause()

    app = make_app(cfg, source="replay", events_path=first, compare=[second])
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_merge_pane_done(cfg, snap_compare):
    run = Path("runs/20260101-000000")
    make_checkpoint(run, 4)
    step8 = make_checkpoint(run, 8)

    async def run_before(pilot):
        await show_tab(pilot, "3")
        pilot.app.query_one("#merge-checkpoints", SelectionList).select(str(step8))
        pilot.app.query_one(MergePane).start(
            MergeRequest([str(step8), str(run / "checkpoints" / "step-000004")], "merged")
        )
        await settle(pilot)
        pilot.app.query_one("#merge-checkpoints").focus()
        await pilot.pause()

    assert snap_compare(make_app(cfg, run_dir=run), terminal_size=SIZE, run_before=run_before)


def test_train_pane_flags_a_zero_variance_group(cfg, snap_compare):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("left_square_bracket")

    assert snap_compare(make_app(cfg, ScriptedRunner(steps=5), start=True), terminal_size=SIZE, run_before=run_before)


def test_drill_down(cfg, snap_compare):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("down", "d")

    assert snap_compare(make_app(cfg, ScriptedRunner(steps=6), start=True), terminal_size=SIZE, run_before=run_before)


def test_failed_run(cfg, snap_compare):
    async def run_before(pilot):
        await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(
        make_app(cfg, ScriptedRunner(steps=6, fail_at=4), start=True), terminal_size=SIZE, run_before=run_before
    )


def test_eval_pane_with_a_report(cfg, snap_compare):
    make_checkpoint(Path("runs/20260101-000000"), 4)
    make_checkpoint(Path("runs/20260101-000000"), 8)

    async def run_before(pilot):
        await settle(pilot)
        await show_tab(pilot, "2")
        pilot.app.query_one("#eval-policies", SelectionList).select("runs/20260101-000000/checkpoints/step-000008")
        # Not a click: a pressed button stays highlighted for a moment, which would race the screenshot.
        pilot.app.query_one(EvalPane).start(EvalRequest(checkpoints=["runs/20260101-000000/checkpoints/step-000008"]))
        await settle(pilot)
        pilot.app.query_one("#eval-policies").focus()
        await pilot.pause()

    assert snap_compare(make_app(cfg, ScriptedRunner(steps=2), start=True), terminal_size=SIZE, run_before=run_before)


def test_merge_pane_asks_before_overwriting(cfg, snap_compare):
    run = Path("runs/20260101-000000")
    make_checkpoint(run, 4)
    step8 = make_checkpoint(run, 8)
    Path("merged/tiny-grpo-step8").mkdir(parents=True)

    async def run_before(pilot):
        await show_tab(pilot, "3")
        pilot.app.query_one("#merge-checkpoints", SelectionList).select(str(step8))
        pilot.app.query_one(MergePane).start(MergeRequest([str(step8)], "merged"))  # see above
        await until(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "overwrite question")
        pilot.app.redraw()
        await pilot.pause()

    assert snap_compare(make_app(cfg, run_dir=run), terminal_size=SIZE, run_before=run_before)


def test_config_pane(cfg, snap_compare):
    assert snap_compare(make_app(cfg), press=["4"], terminal_size=SIZE)


def test_log_pane_of_a_replay(cfg, tmp_path, snap_compare):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in scripted_run(steps=12)))

    async def run_before(pilot):
        await settle(pilot)
        await show_tab(pilot, "5")
        pilot.app.redraw()
        await pilot.pause()

    assert snap_compare(
        make_app(cfg, source="replay", events_path=Path("events.jsonl")), terminal_size=SIZE, run_before=run_before
    )


@pytest.mark.parametrize(
    "size, view",
    [((80, 24), "running"), ((80, 24), "report"), ((120, 40), "running"), ((200, 50), "report")],
    ids=["80x24-running", "80x24-report", "120x40-running", "200x50-report"],
)
def test_eval_pane_at_each_size(cfg, snap_compare, size, view):
    """Issue 26: at 80x24 the Run button and the progress were off-screen and the results clipped
    to the baseline column. Now the fields scroll above a run area that stays in view, and a narrow
    pane shows the form or the results (v switches; the results show when the report is in)."""
    make_checkpoint(Path("runs/20260101-000000"), 4)
    step8 = str(make_checkpoint(Path("runs/20260101-000000"), 8))
    backend = ScriptedBackend()
    backend.hold = view == "running"

    async def run_before(pilot):
        await show_tab(pilot, "2")
        pilot.app.query_one("#eval-policies", SelectionList).select(step8)
        pilot.app.query_one(EvalPane).start(EvalRequest(baseline=True, checkpoints=[step8]))  # not a click: see above
        if view == "running":
            await until(pilot, backend.started.is_set, "the eval running")
        else:
            await until(
                pilot, lambda: pilot.app.query_one("#eval-results").has_class("-has-report"), "the report shown"
            )
            await settle(pilot)  # the report can show before the pane has handled its job's end (the Run button)
        narrow_report = size[0] < 110 and view == "report"  # the form is hidden: focus what shows
        pilot.app.query_one("#eval-results" if narrow_report else "#eval-policies").focus()
        await pilot.pause()
        pilot.app.query_one("#eval-form .fields").scroll_home(animate=False)  # focusing may scroll it
        pilot.app.refresh_bindings()
        pilot.app.redraw()
        await pilot.pause()

    app = make_app(cfg, backend=backend, run_dir=Path("runs/20260101-000000"))
    assert snap_compare(app, terminal_size=size, run_before=run_before)

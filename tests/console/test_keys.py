"""The key bugs of issue 16: `s` after `x`, the keys after the drill-down, enter after a merge, the
first Down+Space of the eval list, and the exit status of a console that crashed (every key in
every state: test_every_key.py)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button, SelectionList

from tests.console.test_every_key import write_run
from tests.helpers.console import SIZE, make_app, make_checkpoint, settle, show_tab
from tests.helpers.scripted import ScriptedBackend, ScriptedRunner
from tests.helpers.waiting import until
from tui.app import ConsoleApp
from tui.launch import print_resume_hint, run_console
from tui.screens.confirm import ConfirmScreen
from tui.widgets import GroupTable, MetricTable, SampleDetail


async def test_start_after_stop_starts_a_new_run_with_fresh_metrics(cfg):
    runner = ScriptedRunner(steps=10, gated=True)
    app = make_app(cfg, runner)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        runner.allow(3)
        await until(pilot, lambda: app.model.run.step == 3, "step 3")
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("s")
        runner.allow(1)
        await until(pilot, lambda: app.model.run.step == 1, "the second run's step 1")
        app.redraw()
        await pilot.pause()
        run = app.model.run
        assert [s for s, _ in run.history["reward/mean"]] == [1]
        assert app.query_one(MetricTable).row_count == len(run.history)
        await pilot.press("x")
        await settle(pilot)
        assert len(runner.calls) == 2 and app.is_running


async def test_escape_from_the_drill_down_gives_the_keys_back_to_the_samples(cfg, tmp_path):
    app = make_app(cfg, source="replay", events_path=write_run(tmp_path / "events.jsonl"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table, detail = app.query_one(GroupTable), app.query_one(SampleDetail)
        await pilot.press("d")
        assert app.screen.maximized is detail
        await pilot.press("escape")
        assert app.screen.maximized is None and app.focused is table
        await pilot.press("down")
        assert table.cursor_row == 1
        await pilot.press("enter")
        assert app.screen.maximized is detail
        await pilot.press("enter")  # enter returns too
        assert app.screen.maximized is None and app.focused is table


async def test_the_first_down_and_space_in_the_eval_list_tick_a_checkpoint(cfg):
    run = Path("runs/20260101-000000")
    make_checkpoint(run, 4)
    step8 = str(make_checkpoint(run, 8))
    app = make_app(cfg, run_dir=run)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "2")
        policies = app.query_one("#eval-policies", SelectionList)
        assert app.focused is policies
        await pilot.press("down", "space")
        assert app.query_one("#eval-policies", SelectionList).selected == ["baseline", step8]


async def test_enter_after_a_merge_does_not_untick_the_checkpoint(cfg):
    run = Path("runs/20260101-000000")
    step4 = str(make_checkpoint(run, 4))
    backend = ScriptedBackend()
    app = make_app(cfg, backend=backend, run_dir=run)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "3")
        boxes = app.query_one("#merge-checkpoints", SelectionList)
        assert app.focused is boxes
        await pilot.press("space")
        assert boxes.selected == [step4]
        button = app.query_one("#merge-run", Button)
        button.focus()
        await pilot.press("enter")  # Merge, from the keyboard
        await until(pilot, lambda: app.model.merge.status == "done", "merged")
        await settle(pilot)
        assert app.model.merge.status == "done"
        assert app.focused is button
        # A Button ignores enter while it shows its pressed effect (the class -active, removed by a
        # timer): on a fast machine the merge ends inside it. Wait for the button, not for a time.
        await until(pilot, lambda: not button.has_class("-active"), "the Merge button's pressed effect to end")
        await pilot.press("enter")  # presses Merge again: the output exists now, so it asks
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "overwrite question")
        await pilot.press("n")
        assert boxes.selected == [step4]


def test_a_console_that_crashes_exits_with_status_1(cfg):
    class Crashing(ConsoleApp):
        def redraw(self) -> None:
            raise RuntimeError("a widget bug")

    app = Crashing(cfg, "test", backend=ScriptedBackend())
    assert run_console(app, headless=True, size=SIZE) == 1


async def test_quitting_a_stopped_run_prints_the_command_that_resumes_it(cfg, capsys):
    runner = ScriptedRunner(steps=10, gated=True)
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        runner.allow(2)
        await until(pilot, lambda: app.model.run.step == 2, "step 2")
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("q")
    print_resume_hint(app)
    err = capsys.readouterr().err
    assert "stopped at step 2/10" in err and "searchgrpo tui --resume --run-dir runs/20260101-000000" in err

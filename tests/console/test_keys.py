"""Every documented key in every state of the console, and the key bugs of issue 16: `s` after
`x`, the keys after the drill-down, enter after a merge, the first Down+Space of the eval list,
and the exit status of a console that crashed."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Button, SelectionList

from searchgrpo.events import event_to_dict
from tests.helpers.console import SIZE, make_app, make_checkpoint, settle, show_tab
from tests.helpers.scripted import ScriptedBackend, ScriptedRunner
from tests.helpers.scripted_events import scripted_run
from tests.helpers.waiting import until
from tui.app import ConsoleApp
from tui.launch import print_resume_hint, run_console
from tui.screens.confirm import ChoiceScreen, ConfirmScreen
from tui.widgets import GroupTable, MetricTable, SampleDetail

NARROW = (80, 24)
BROWSE = (
    "1",
    "d",
    "escape",
    "enter",
    "enter",
    "v",
    "v",
    "v",
    "m",
    "m",
    "left_square_bracket",
    "right_square_bracket",
    "f",
    "down",
    "d",
    "d",
    "2",
    "down",
    "3",
    "4",
    "5",
    "1",
)
"""The keys that only look: tabs, the group browser, views, smoothing (README's key table)."""
CONTROLS = ("s", "p", "x", "c")


async def press_all(pilot, keys, state: str) -> None:
    """Press each key; the app must stay up (a crash would end it), and a question is answered no."""
    app = pilot.app
    for key in keys:
        await pilot.press(key)
        await pilot.pause()
        assert app.is_running and app._exception is None, f"{state}: the console died on {key!r}"
        if isinstance(app.screen, (ConfirmScreen, ChoiceScreen)):
            await pilot.press("n")


def write_run(path: Path, steps: int = 6) -> Path:
    path.write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in scripted_run(steps=steps)))
    return path


async def test_every_key_in_every_state_of_a_live_run(cfg):
    runner = ScriptedRunner(steps=20, gated=True)
    app = make_app(cfg, runner)
    async with app.run_test(size=NARROW) as pilot:
        await press_all(pilot, (*BROWSE, "p", "x", "c"), "idle")  # q would quit: it is pressed last
        await pilot.press("s")
        runner.allow(2)
        await until(pilot, lambda: app.model.run.step == 2, "step 2")
        await press_all(pilot, (*BROWSE, "c", "q"), "running")
        await pilot.press("p")
        await until(pilot, lambda: app.model.run.status == "paused", "paused")
        await press_all(pilot, (*BROWSE, "s", "q"), "paused")
        await pilot.press("p", "x")
        await settle(pilot)
        assert app.model.run.status == "stopped"
        await press_all(pilot, (*BROWSE, "p", "x", "c"), "stopped")
        await pilot.press("s")  # s after x: a new run (this crashed the console)
        runner.allow(1)
        await until(pilot, lambda: app.model.run.step == 1 and app.model.run.status == "running", "second run")
        await press_all(pilot, BROWSE, "second run")
        await pilot.press("x")
        await settle(pilot)
        await pilot.press("q")
    assert app.return_value == 0


async def test_every_key_on_a_replay_and_a_failed_run(cfg, tmp_path):
    path = write_run(tmp_path / "events.jsonl")
    app = make_app(cfg, source="replay", events_path=path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press_all(pilot, (*BROWSE, *CONTROLS), "replay")
        assert app.model.run.status == "completed"
    app = make_app(cfg, ScriptedRunner(steps=5, fail_at=2), start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.model.run.status == "failed"
        await press_all(pilot, (*BROWSE, "p", "x", "c"), "failed")


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

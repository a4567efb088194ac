"""The console driven by scripted event streams: controls, drill-down, errors, attach, replay."""

from __future__ import annotations

import json

from searchgrpo.events import event_to_dict
from tests.helpers.console import SIZE, make_app, settle, show_tab, text_of
from tests.helpers.scripted import ScriptedRunner
from tests.helpers.scripted_events import run_started, scripted_run, step_events
from tests.helpers.waiting import until
from tui.screens.confirm import ChoiceScreen
from tui.widgets import GroupTable, MetricTable, SampleDetail


async def test_training_starts_on_keypress_and_fills_the_train_pane(cfg):
    runner = ScriptedRunner(steps=3, k=4)
    app = make_app(cfg, runner)
    async with app.run_test(size=SIZE) as pilot:
        assert runner.calls == [] and app.model.run.status == "idle"
        assert "press s to start" in text_of(app, "#run-text")
        await pilot.press("s")
        await settle(pilot)
        run = app.model.run
        assert runner.calls[0]["cfg"] is cfg
        assert (run.status, run.step, run.groups_added) == ("completed", 3, 6)
        assert [s for s, _ in run.history["reward/mean"]] == [1, 2, 3]
        assert "step 3/3" in text_of(app, "#run-text")
        table = app.query_one(GroupTable)
        assert table.row_count == 4 and table.group is run.groups[-1]
        assert run.groups[-1].question in text_of(app, "#group-title")
        assert str(app.query_one(MetricTable).get_row("loss/kl")[0]) == "loss/kl"


async def test_start_flag_starts_at_once(cfg):
    runner = ScriptedRunner(steps=2)
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert len(runner.calls) == 1 and app.model.run.status == "completed"


async def test_pause_resume_stop_and_checkpoint_reach_the_trainer(cfg):
    runner = ScriptedRunner(steps=10, gated=True)
    app = make_app(cfg, runner)
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("pause", ()) is None  # greyed out in the footer before a run
        await pilot.press("s")
        runner.allow(1)
        await until(pilot, lambda: app.model.run.step == 1, "step 1")
        assert app.check_action("pause", ()) is True and app.check_action("start", ()) is None
        await pilot.press("p")
        await until(pilot, lambda: app.model.run.status == "paused", "paused")
        await pilot.press("p")
        await until(pilot, lambda: app.model.run.status == "running", "resumed")
        await pilot.press("c")
        runner.allow(1)
        await until(pilot, lambda: app.model.run.checkpoints, "checkpoint now")
        assert app.model.run.checkpoints[-1].step == 2
        await pilot.press("x")
        await settle(pilot)
        run = app.model.run
        assert run.status == "stopped" and run.step == 2
        assert [c.step for c in run.checkpoints] == [2, 2]  # the one asked for, and the one at stop
        assert app.control.stop.is_set()


async def test_drill_down_shows_documents_and_verdicts_and_groups_stay_browsable(cfg):
    runner = ScriptedRunner(steps=3, k=4)
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.query_one(GroupTable)
        table.focus()
        await pilot.press("down")
        sample = app.model.run.groups[-1].samples[1]
        detail = text_of(app, "#sample-body")
        assert f"#{sample.index}" in detail and sample.clues[0] in detail
        assert sample.docs[0].title in detail and sample.docs[0].docid in detail
        assert sample.docs[0].label in detail and ("new" in detail or "seen" in detail)

        await pilot.press("left_square_bracket", "left_square_bracket")
        assert table.group is app.model.run.groups[-3]
        assert "browsing" in app.query_one("#group-area").border_title
        await pilot.press("right_square_bracket")
        assert table.group is app.model.run.groups[-2]
        await pilot.press("f")
        assert table.group is app.model.run.groups[-1]

        await pilot.press("enter")
        assert app.screen.maximized is app.query_one(SampleDetail)
        await pilot.press("escape")
        assert app.screen.maximized is None


async def test_zero_variance_group_is_flagged(cfg):
    runner = ScriptedRunner(steps=5, k=4)  # the first group of step 5 has equal rewards
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        area = app.query_one("#group-area")
        assert not area.has_class("-zero-std")
        await pilot.press("left_square_bracket")
        assert app.query_one(GroupTable).group.zero_std
        assert area.has_class("-zero-std") and "ZERO VARIANCE" in text_of(app, "#group-title")


async def test_error_raised_by_the_trainer_is_shown_and_the_app_survives(cfg):
    runner = ScriptedRunner(steps=5, fail_at=3)
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.is_running and app.model.run.status == "failed"
        assert "CUDA out of memory at step 3" in text_of(app, "#run-error")
        assert app.query_one("#run-status").has_class("-failed")
        assert any("Traceback" in line.text for line in app.model.log)
        await pilot.press("q")
    assert app.return_value == 1


async def test_error_before_any_event_is_shown(cfg):
    def broken(cfg, sink, control, run_dir, resume):
        raise ImportError("No module named 'torch'")

    app = make_app(cfg, broken, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.model.run.status == "failed"
        assert "ImportError: No module named 'torch'" in text_of(app, "#run-error")
        assert app.check_action("start", ()) is True  # another try is allowed


async def test_quit_while_training_asks_then_stops_with_a_checkpoint(cfg):
    runner = ScriptedRunner(steps=10, gated=True)
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        runner.allow(1)
        await until(pilot, lambda: app.model.run.step == 1, "step 1")
        await pilot.press("q")
        assert isinstance(app.screen, ChoiceScreen)
        await pilot.press("n")
        assert app.is_running and not app.control.stop.is_set()
        await pilot.press("q")
        await pilot.press("s")  # stop after this step with a checkpoint, then quit
        await until(pilot, lambda: runner.finished.is_set(), "trainer ended")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
    assert app.return_value == 0
    assert app.model.run.status == "stopped" and app.model.run.checkpoints[-1].step == 1


def write_events(path, events, torn: str = "") -> None:
    with path.open("a", encoding="utf-8") as fh:
        for e in events:
            fh.write(json.dumps(event_to_dict(e)) + "\n")
        fh.write(torn)


async def test_attach_follows_a_growing_events_file(cfg, tmp_path):
    path = tmp_path / "runs" / "r1" / "events.jsonl"
    path.parent.mkdir(parents=True)
    second = json.dumps(event_to_dict(step_events(2, total=4)[-1])) + "\n"
    write_events(path, [run_started(4), *step_events(1, total=4)], torn=second[:40])
    app = make_app(cfg, source="attach", events_path=path, run_dir=path.parent)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.run.step == 1, "step 1")
        assert app.check_action("start", ()) is None and app.check_action("stop", ()) is None
        assert "ATTACHED" in text_of(app, "#run-text")
        with path.open("a", encoding="utf-8") as fh:  # the torn line completes, then more steps come
            fh.write(second[40:])
        write_events(path, step_events(3, total=4))
        await until(pilot, lambda: app.model.run.step == 3, "step 3")
        assert [s for s, _ in app.model.run.history["reward/mean"]] == [1, 2, 3]


async def test_replay_shows_a_finished_run_including_a_resume(cfg, tmp_path):
    path = tmp_path / "events.jsonl"
    events = scripted_run(steps=6, total=8, finish=False)
    events += [run_started(8, start_step=4)]  # crashed after step 6, resumed from checkpoint 4
    for step in range(5, 9):
        events += step_events(step, total=8)
    write_events(path, events)
    app = make_app(cfg, source="replay", events_path=path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.model.run
        assert run.step == 8 and [s for s, _ in run.history["reward/mean"]] == list(range(1, 9))
        assert [s for s, _ in run.history["eval/reward_mean"]] == [4]
        assert [c.step for c in run.checkpoints] == [4]
        assert any(entry.level == "warning" for entry in app.model.log)
        assert "REPLAY" in text_of(app, "#run-text")


async def test_command_palette_offers_the_controls(cfg):
    runner = ScriptedRunner(steps=2)
    app = make_app(cfg, runner)
    async with app.run_test(size=SIZE) as pilot:
        commands = {c.title: c.callback for c in app.get_system_commands(app.screen)}
        assert {
            "Start training",
            "Pause or resume training",
            "Stop training",
            "Save a checkpoint now",
            "Show eval",
        } <= set(commands)
        commands["Start training"]()
        await settle(pilot)
        assert len(runner.calls) == 1 and app.model.run.status == "completed"
        commands["Show merge"]()
        await until(pilot, lambda: app.query_one("TabbedContent").active == "merge", "the Merge tab shown")


async def test_log_lines_use_the_width_of_a_wide_pane(cfg, tmp_path):
    from searchgrpo.events import LogMessage

    path = tmp_path / "events.jsonl"
    long = "warning text " * 12 + "END"  # 159 characters
    write_events(path, [LogMessage("warning", long, 0.0), *scripted_run(steps=2)])
    app = make_app(cfg, source="replay", events_path=path)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        await show_tab(pilot, "5")
        await settle(pilot)
        lines = [str(line.text).rstrip() for line in app.query_one("#log-pane").lines]
        (line,) = [line for line in lines if "warning text" in line]  # one line, not wrapped at 80
        assert line.endswith("END")


def test_compared_replays_must_all_exist(cfg, tmp_path):
    import pytest

    from searchgrpo.errors import UserError
    from tui.launch import launch_console

    first = tmp_path / "a.jsonl"
    write_events(first, scripted_run(steps=1))
    with pytest.raises(UserError, match=r"b\.jsonl: no events file to replay"):
        launch_console(cfg, "test", start=False, replay=[first, tmp_path / "b.jsonl"])
    with pytest.raises(UserError, match="exclusive"):
        launch_console(cfg, "test", start=False, attach=first, replay=[first])


async def test_replays_are_compared_on_the_same_plots(cfg, tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_events(first, scripted_run(steps=4))
    write_events(second, [run_started(run_id="20260102-000000"), *step_events(1, seed=3), *step_events(2, seed=3)])
    app = make_app(cfg, source="replay", events_path=first, compare=[second])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        (other,) = app.model.compare
        assert other.info.run_id == "20260102-000000" and [s for s, _ in other.history["reward/mean"]] == [1, 2]
        assert app.model.run.step == 4  # the main run is the first one (the picture: test_snapshots.py)

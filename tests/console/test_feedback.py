"""Every key says something (issue 26.2): dead keys of a read-only console or of an idle one,
group keys off the Train tab, tab keys from a text field (alt+N, or escape then N), the PAUSING
state, and every key while a job runs and after one failed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from textual.widgets import Input

from searchgrpo.events import event_to_dict
from tests.console.test_every_key import BROWSE, CONTROLS, press_all
from tests.helpers.console import SIZE, click_button, make_app, make_checkpoint, settle, show_tab, text_of
from tests.helpers.scripted import ScriptedBackend
from tests.helpers.scripted_events import run_started, scripted_run, step_events
from tests.helpers.waiting import until

RUN = Path("runs/20260101-000000")


def recording(app) -> list[str]:
    """What the app says in notifications, in order (read from the calls, not from the toasts,
    which expire with time)."""
    said: list[str] = []
    real = app.notify

    def notify(message, *args, **kwargs):
        said.append(str(message))
        return real(message, *args, **kwargs)

    app.notify = notify
    return said


async def test_a_read_only_console_says_why_its_run_keys_do_nothing(cfg, tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in scripted_run(steps=3)))
    app = make_app(cfg, source="replay", events_path=path)
    async with app.run_test(size=SIZE) as pilot:
        said = recording(app)
        await settle(pilot)
        for key in CONTROLS:
            await pilot.press(key)
        await until(pilot, lambda: len(said) >= len(CONTROLS), "a notice per key")
        assert all("This console replays a run: read-only" in text for text in said[:4]), said


async def test_an_idle_console_says_what_starts_a_run_and_where_group_keys_work(cfg):
    app = make_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        said = recording(app)
        await pilot.press("p", "x", "c")
        await until(pilot, lambda: len(said) >= 3, "a notice per key")
        assert said[:3] == ["No training is running: s starts it."] * 3
        await show_tab(pilot, "4")
        await pilot.press("d", "v")
        await until(pilot, lambda: len(said) >= 5, "two more notices")
        assert said[3] == "d: drill-down works on the Train tab (1)."
        assert said[4] == "v: views works on the Train, Eval, Merge and Audit tabs."


async def test_tabs_switch_from_a_text_field_with_alt_or_after_escape(cfg):
    app = make_app(cfg)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "2")
        field = app.query_one("#eval-limit", Input)
        field.focus()
        await pilot.press("1", "2")  # digits type into the field
        assert field.value == "12" and app.query_one("TabbedContent").active == "eval"
        await pilot.press("alt+3")
        await until(pilot, lambda: app.query_one("TabbedContent").active == "merge", "alt+3: Merge")
        await show_tab(pilot, "2")
        field.focus()
        await pilot.press("escape")
        await until(pilot, lambda: app.focused is app.query_one("#eval-policies"), "out of the field")
        await pilot.press("5")
        await until(pilot, lambda: app.query_one("TabbedContent").active == "log", "5: Log")
        assert field.value == "12"


class LongStep:
    """A runner whose step takes until the test says so, whatever is asked meanwhile: `p` during
    it shows PAUSING, and the pause begins when the step ends."""

    def __init__(self) -> None:
        self.step_done = threading.Event()

    def __call__(self, cfg, sink, control, run_dir, resume) -> None:
        from searchgrpo.events import RunFinished, RunPaused, RunResumed

        sink(run_started(4))
        self.step_done.wait()
        for event in step_events(1, total=4):
            sink(event)
        if control.pause.is_set():
            sink(RunPaused(1))
            while control.pause.is_set() and not control.stop.is_set():
                control.stop.wait(0.01)
            sink(RunResumed(1))
        sink(RunFinished(1, "stopped"))


async def test_p_during_a_step_shows_pausing_until_the_step_ends(cfg):
    runner = LongStep()
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.run.status == "running", "running")
        await pilot.press("p")
        app.redraw()
        assert app.model.run.status == "pausing" and "PAUSING" in text_of(app, "#run-badge")
        assert "pausing after the current step" in text_of(app, "#run-hint")
        runner.step_done.set()
        await until(pilot, lambda: app.model.run.status == "paused", "paused")
        app.redraw()
        assert "PAUSED" in text_of(app, "#run-badge")
        await pilot.press("x")
        await settle(pilot)


async def test_every_key_while_a_job_runs_and_after_one_failed(cfg):
    make_checkpoint(RUN, 4)
    backend = ScriptedBackend()
    backend.hold = True
    app = make_app(cfg, backend=backend, run_dir=RUN)
    async with app.run_test(size=(80, 24)) as pilot:
        said = recording(app)
        await show_tab(pilot, "2")
        await click_button(pilot, "#eval-run")
        await until(pilot, backend.started.is_set, "the eval running")
        await press_all(pilot, (*BROWSE, *CONTROLS), "a job running")
        await show_tab(pilot, "2")
        app.query_one("EvalPane").show_view("form")  # v was pressed: the narrow pane may show its results
        await click_button(pilot, "#eval-run")  # again: it says that it runs
        await until(pilot, lambda: "The eval is still running." in said, "the notice")
        app.query_one("EvalPane").cancel()
        await until(pilot, lambda: app.model.eval.status == "cancelled", "cancelled")
        app.redraw()
        assert "eval cancelled" in text_of(app, "#eval-status")
        backend.hold = False
        backend.eval_error = RuntimeError("the checker went away")
        await show_tab(pilot, "2")
        app.query_one("EvalPane").show_view("form")
        await click_button(pilot, "#eval-run")
        await until(pilot, lambda: app.model.eval.status == "failed", "failed")
        await press_all(pilot, (*BROWSE, *CONTROLS), "a job failed")
        app.redraw()
        assert "the checker went away" in text_of(app, "#eval-status")


class EvaluatingRun:
    """A run whose in-training eval after step 1 is held at 6 of 32 states until the test says so."""

    def __init__(self) -> None:
        self.go_on = threading.Event()

    def __call__(self, cfg, sink, control, run_dir, resume) -> None:
        from searchgrpo.events import EvalFinished, RunFinished, TrainEvalProgress

        sink(run_started(4))
        for event in step_events(1, total=4):
            sink(event)
        sink(TrainEvalProgress(1, 6, 32))
        self.go_on.wait()
        sink(EvalFinished(1, {"eval/reward_mean": 0.2}))
        sink(RunFinished(1, "stopped"))


async def test_the_in_training_eval_shows_its_own_progress(cfg):
    """Issue 26: during the in-training eval the header said only 'RUNNING step 8/8 ETA 0s'."""
    runner = EvaluatingRun()
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.run.eval_progress == (6, 32), "the eval's progress")
        app.redraw()
        assert "EVALUATING" in text_of(app, "#run-badge")
        assert "in-training eval 6/32 states" in text_of(app, "#run-text")
        runner.go_on.set()
        await settle(pilot)
        assert app.model.run.eval_progress is None and "EVALUATING" not in text_of(app, "#run-badge")

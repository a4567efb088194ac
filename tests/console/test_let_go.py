"""A console that always lets go (issue 26.2): `q` during any job asks, then cancels the job and
quits; the process never waits on a thread that does not stop (`launch.let_go`); a resumed
console shows the run's whole history; Ctrl-C and SIGINT never leave a traceback."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from searchgrpo.events import event_to_dict
from tests.helpers.console import SIZE, click_button, make_app, make_checkpoint, settle, show_tab
from tests.helpers.scripted import ScriptedBackend, ScriptedRunner
from tests.helpers.scripted_events import scripted_run
from tests.helpers.waiting import CEILING_S, until
from tui.launch import let_go
from tui.screens.confirm import ChoiceScreen

RUN = Path("runs/20260101-000000")


async def start_held_job(pilot, backend: ScriptedBackend, job: str) -> None:
    """Start the eval, merge or audit tab's job; the scripted backend holds it until cancelled."""
    app = pilot.app
    if job == "eval":
        await show_tab(pilot, "2")
        await click_button(pilot, "#eval-run")
    elif job == "merge":
        await show_tab(pilot, "3")
        app.query_one("#merge-checkpoints").select_all()
        await click_button(pilot, "#merge-run")
    else:
        await show_tab(pilot, "6")
        await click_button(pilot, "#audit-run")
    await until(pilot, backend.started.is_set, f"the {job} running")


@pytest.mark.parametrize("job", ["eval", "merge", "audit"])
async def test_q_during_a_job_asks_then_cancels_it_and_quits(cfg, job):
    make_checkpoint(RUN, 4)
    backend = ScriptedBackend()
    backend.hold = True
    app = make_app(cfg, backend=backend, run_dir=RUN)
    async with app.run_test(size=SIZE) as pilot:
        await start_held_job(pilot, backend, job)
        pane = {p.JOB: p for p in app.job_panes()}[job]
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen), "the question")
        assert f"The {job} is running" in str(app.screen.question)
        await pilot.press("n")  # keep it running
        await until(pilot, lambda: not isinstance(app.screen, ChoiceScreen), "the question answered")
        assert app.is_running and pane.running
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen), "the question again")
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, "the console closed")
    assert app.quit_now and app.return_value == 0
    assert pane.job_ended.wait(60)  # hang guard only: the job saw its cancel flag and ended (JobCancelled)


async def test_quit_now_while_training_leaves_the_step_and_says_what_was_kept(cfg, capsys):
    runner = ScriptedRunner(steps=10, gated=True)
    app = make_app(cfg, runner, start=True)
    async with app.run_test(size=SIZE) as pilot:
        runner.allow(2)
        await until(pilot, lambda: app.model.run.step == 2, "step 2")
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ChoiceScreen), "the question")
        question = str(app.screen.question)
        assert "s: stop after this step" in question and "q: quit now" in question
        await pilot.press("q")  # q, q: quit now
        await until(pilot, lambda: not app.is_running, "the console closed")
    assert app.quit_now and app.control.stop.is_set()


def test_let_go_ends_the_process_when_a_thread_does_not_stop(cfg, capsys):
    """A thread stuck in native code: after the grace the process ends at once (os._exit), saying
    what was kept, instead of waiting (a blank screen) or aborting at interpreter exit."""
    app = make_app(cfg, ScriptedRunner(steps=3))
    app.model.apply(scripted_run(steps=2, finish=False)[1])  # a run started
    app.training_done = threading.Event()  # the training has not returned
    app.job_panes = lambda: []
    app.quit_now = True
    exits: list[int] = []
    let_go(app, 0, exit_process=exits.append, grace_s=0.0)
    assert exits == [0]
    err = capsys.readouterr().err
    assert (
        "quit while the training ran: training's newest checkpoint is kept (none); the step in progress is not" in err
    )
    assert "searchgrpo tui --resume --run-dir runs/20260101-000000" in err
    exits.clear()
    app.training_done.set()  # it returned: nothing to wait for, the process is not ended
    let_go(app, 0, exit_process=exits.append, grace_s=0.0)
    assert exits == []


async def test_resume_shows_the_whole_history_then_the_new_steps(cfg):
    """`tui --resume` replays the run's events.jsonl first: the steps before the checkpoint (and
    those after it, which the resumed run repeats) are on the curves, then the new ones."""
    events = RUN / "events.jsonl"
    RUN.mkdir(parents=True)
    events.write_text("".join(json.dumps(event_to_dict(e)) + "\n" for e in scripted_run(steps=6, total=10)))
    runner = ScriptedRunner(steps=10, total=10, gated=True, start_step=4)
    app = make_app(cfg, runner, start=True, resume=True, run_dir=RUN)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.run.info is not None and app.model.run.step == 4, "the resumed start")
        run = app.model.run
        assert [s for s, _ in run.history["reward/mean"]] == [1, 2, 3, 4]  # 5 and 6 are trained again
        assert run.status == "running" and run.first_step == 5
        runner.allow(2)
        await until(pilot, lambda: app.model.run.step == 6, "step 6")
        assert [s for s, _ in run.history["reward/mean"]] == [1, 2, 3, 4, 5, 6]
        assert any("run 20260101-000000 started" in e.text for e in app.model.log)  # the history's own log
        await pilot.press("x")
        await settle(pilot)


STUCK_CONSOLE = """
import time
from searchgrpo.config import load_config
from tests.helpers.tiny import TINY_OVERRIDES
from tests.helpers.console import click_button, show_tab
from tests.helpers.waiting import until
from tests.helpers.scripted import ScriptedBackend
from tui.app import ConsoleApp
from tui.launch import run_console


class Stuck(ScriptedBackend):
    def evaluate(self, cfg, request, sink, stop):
        self.started.set()
        time.sleep(3600)  # native code that never looks at its cancel flag


backend = Stuck()
app = ConsoleApp(load_config(None, [*TINY_OVERRIDES, "train.output_dir=runs"]), "test", backend=backend)


async def press(pilot):
    await show_tab(pilot, "2")
    await click_button(pilot, "#eval-run")
    await until(pilot, backend.started.is_set, "the eval running")
    await pilot.press("q")
    await until(pilot, lambda: type(app.screen).__name__ == "ChoiceScreen", "the question")
    await pilot.press("y")


code = run_console(app, headless=True, size=(120, 40), auto_pilot=press)
print("run_console returned", code)
"""


def test_a_job_that_ignores_its_cancel_flag_does_not_hold_the_process(tmp_path):
    """The eval's thread sleeps in 'native code' for an hour: `q`, `y` ends the process anyway,
    with status 0, a line saying what was kept, and no traceback or abort."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", STUCK_CONSOLE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=CEILING_S,  # hang guard only
        env={**os.environ, "PYTHONPATH": str(root), "SEARCHGRPO_HOME": str(tmp_path / "home")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "quit while the eval ran: the eval in progress wrote nothing" in proc.stderr
    assert "run_console returned" not in proc.stdout  # the process ended in let_go
    assert "Traceback" not in proc.stderr + proc.stdout and "terminate called" not in proc.stderr

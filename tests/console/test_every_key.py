"""Every documented key in every state of the console: a live run (idle, running, paused, stopped,
a second run), a replay and a failed run. The key bugs of issue 16 are in test_keys.py; every key
while a job runs, in test_feedback.py."""

from __future__ import annotations

import json
from pathlib import Path

from searchgrpo.events import event_to_dict
from tests.helpers.console import SIZE, make_app, settle
from tests.helpers.scripted import ScriptedRunner
from tests.helpers.scripted_events import scripted_run
from tests.helpers.waiting import until
from tui.screens.confirm import ChoiceScreen, ConfirmScreen

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

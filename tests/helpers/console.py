"""The console tests' helpers: apps over a scripted backend, what a widget shows as text, a tab
shown and an app settled by waiting for states, and a checkpoint folder on disk."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Button, DataTable, Static
from textual.worker import WorkerFailed

from searchgrpo.config import load_config
from tests.helpers.scripted import ScriptedBackend, ScriptedRunner
from tests.helpers.tiny import TINY_OVERRIDES
from tests.helpers.waiting import until
from tui.app import TABS, ConsoleApp
from tui.screens.job_pane import JobPane

SIZE = (120, 40)


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    """The tiny config with runs under ./runs of a fresh working folder (paths shown stay fixed)."""
    monkeypatch.chdir(tmp_path)
    return load_config(None, [*TINY_OVERRIDES, "train.output_dir=runs"])


def make_app(
    cfg, runner: ScriptedRunner | None = None, backend: ScriptedBackend | None = None, **kwargs: Any
) -> ConsoleApp:
    """The console over a scripted backend (training with `runner`, if given)."""
    return ConsoleApp(cfg, "built-in defaults", backend=backend or ScriptedBackend(runner), **kwargs)


def text_of(app, selector: str) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(app.screen.query_one(selector, Static).content)
    return console.export_text()


FIRST_FOCUS = {
    "1": "#group-table",
    "2": "#eval-policies",
    "3": "#merge-checkpoints",
    "4": "#config-table",
    "5": "#log-pane",
    "6": "#audit-questions",
}


async def show_tab(pilot, key: str) -> None:
    """Press a tab's key and wait until its first widget has the focus (under load that comes
    after the key; a click before it may land on the tab that was showing). A key pressed while the
    app is still starting can be lost on a busy machine (the tab stays as it was): while the tab
    does not show, the key is pressed again; no time is assumed."""
    app = pilot.app
    target = app.query_one(FIRST_FOCUS[key])
    tab = TABS[int(key) - 1]
    tabs = app.query_one("TabbedContent")
    if tabs.active == tab:
        target.focus()  # showing already: the key would change nothing
        await until(pilot, lambda: app.focused is target, f"tab {key}'s first widget")
        return

    async def press_if_not_shown() -> None:
        if tabs.active != tab:
            await pilot.press(key)

    await pilot.press(key)
    await until(
        pilot, lambda: app.focused is target, f"tab {key} with its first widget focused", again=press_if_not_shown
    )


async def click_button(pilot, selector: str) -> None:
    """Click a button the way a person does: once it can be pressed. A Textual Button ignores a
    click while it shows its last press (the class `-active`, removed by a 0.2 s timer), so a
    second click on a fast machine, or one whose timer the load delays, was lost and the test
    waited for a job that never started. Wait for the button, never for a time; and fail at
    once, naming the selector, when the click lands on another widget (a toast, a dialog)."""
    button = pilot.app.screen.query_one(selector, Button)
    await until(pilot, lambda: not button.has_class("-active"), f"{selector}'s last press to end")
    assert await pilot.click(selector), f"the click on {selector} landed on another widget"


def _nothing_pending(app) -> bool:
    """No message waits in the app, its screen or any widget, no callback waits for a refresh, and
    no table has rows still to lay out. Private Textual state, read because a Pilot pause cannot
    tell: it judges the app idle by its CPU time, and a process that other processes starve of
    the CPU uses little CPU time while its work is still queued (a merge table drawn empty)."""
    pumps = [app, app.screen, *app.screen.walk_children()]
    if any(pump._message_queue.qsize() or pump._next_callbacks for pump in pumps):
        return False
    return not any(table._require_update_dimensions or table._updated_cells for table in app.screen.query(DataTable))


async def quiet(pilot) -> None:
    """Lay every widget out again, then wait until the screen is finished: nothing pending
    (`_nothing_pending`) and two renders in a row the same. Every snapshot waits for this before it
    is taken (tests/console/conftest.py).

    The new layout is there because a starved process can also leave a stale one with nothing
    pending: the eval report's tables, shown by a class and filled in the same handler, held their
    rows (virtual height 7) in a layout of height 0, and stayed so (2 times in 14 beside two
    busy loops). Any later layout (a key, a resize) draws them; the snapshot asks for one."""
    app = pilot.app
    for widget in (app.screen, *app.screen.walk_children()):
        widget.refresh(layout=True)
    last: list[str] = [""]

    def finished() -> bool:
        if not _nothing_pending(app):
            last[0] = ""
            return False
        shot, last[0] = last[0], app.export_screenshot()
        return shot == last[0]

    await until(pilot, finished, "a screen with nothing left to draw")


async def settle(pilot) -> None:
    """Wait for every worker (a failed one included) and for every job pane to have handled its job's
    end, then fold in all events and redraw everything.

    A finished worker's end reaches its pane as messages (the worker's state, then `JobEnded`); one
    pause is not always enough for both on a busy machine, and the pane still said "running…"."""
    with contextlib.suppress(WorkerFailed):
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await until(
        pilot, lambda: not any(pane.running for pane in pilot.app.query(JobPane)), "every job pane's end handled"
    )
    pilot.app.redraw()
    await pilot.pause()


def make_checkpoint(run_dir: Path, step: int) -> Path:
    """A folder that `list_checkpoints` accepts as a complete checkpoint."""
    path = run_dir / "checkpoints" / f"step-{step:06d}"
    (path / "adapter").mkdir(parents=True)
    for name in (
        "adapter/adapter_config.json",
        "adapter/adapter_model.safetensors",
        "optimizer.pt",
        "scheduler.pt",
        "rng.safetensors",
    ):
        (path / name).write_text("{}")
    (path / "trainer_state.json").write_text(json.dumps({"step": step}))
    return path

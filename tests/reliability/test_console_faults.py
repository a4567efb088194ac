"""The console's training worker dies: the real trainer, in the console's worker thread, fails on
bad data and on a full disk; the error is shown in the UI (status, error line, Log tab) and the
console stays up. `tests/tui/test_app.py` covers scripted failures; these are real ones, with
text that reads like console markup (a path with `[/q]` in it)."""

from __future__ import annotations

import errno
import os

import torch

from searchgrpo.train.checkpoints import latest_checkpoint
from tests.conftest import tiny_config
from tests.reliability.helpers import assert_checkpoint_loads, tiny_world
from tests.tui.conftest import SIZE, settle
from tui.app import ConsoleApp
from tui.widgets import GroupTable


def error_text(app) -> str:
    import io

    from rich.console import Console

    console = Console(width=300, record=True, file=io.StringIO())
    console.print(app.screen.query_one("#run-error").render())
    return console.export_text()


async def test_a_worker_that_dies_on_bad_data_is_shown_and_the_console_survives(tmp_path):
    ckpts, _ = tiny_world(tmp_path)
    missing = tmp_path / "data[" / "q] [bold]" / "corpus.jsonl"  # reads .../data[/q] [bold]/corpus.jsonl
    cfg = tiny_config(tmp_path, f"data.traces={ckpts}", f"data.corpus={missing}", "train.run_name=bad")
    app = ConsoleApp(cfg, "tiny", start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.model.run
        assert app.is_running and run.status == "failed"
        assert f"{missing}: corpus file not found (data.corpus)" in run.error
        assert f"{missing}: corpus file not found" in error_text(app)
        assert any("Traceback" in line.text and "corpus file not found" in line.text for line in app.model.log)
        assert app.check_action("start", ()) is True  # the user can fix the config and try again
        await pilot.press("5")  # the Log tab draws the traceback
        await settle(pilot)
        await pilot.press("q")
    assert app.return_value == 1


async def test_a_worker_that_dies_on_a_full_disk_is_shown_and_its_checkpoint_kept(tmp_path, monkeypatch):
    real_save = torch.save

    def full(obj, f, *a, **kw):
        if "step-000002.tmp-" in str(f):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(f))
        return real_save(obj, f, *a, **kw)

    monkeypatch.setattr(torch, "save", full)
    cfg = tiny_config(tmp_path, "train.max_steps=3", "train.save_every=1", "train.run_name=full")
    app = ConsoleApp(cfg, "tiny", start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.model.run
        assert app.is_running and run.status == "failed" and run.step == 2
        assert "CheckpointWriteError" in run.error and "No space left on device" in run.error
        assert "step-000001, is intact" in error_text(app)
        assert [c.step for c in run.checkpoints] == [1]
        assert app.query_one(GroupTable).row_count == cfg.grpo.num_generations  # the run's groups stay browsable
    assert [p.name for p in (tmp_path / "runs" / "full" / "checkpoints").iterdir()] == ["step-000001"]
    assert_checkpoint_loads(latest_checkpoint(tmp_path / "runs" / "full"))

"""The console's training worker dies: the real trainer, in the console's worker thread, fails on
bad data and on a full disk; the error is shown in the UI (status, error line, Log tab) and the
console stays up. `tests/console/test_app.py` covers scripted failures; these are real ones, with
text that reads like console markup (a path with `[/q]` in it).

The console never dies on a run's files either: `--replay` and `--attach` skip and count
malformed event lines (not JSON, wrong JSON type, fields of the wrong type, odd metric names, a
line over the size cap), show the rest and report the count in the Log tab; an attached run
whose file stops growing is reported as stalled. Text from data (questions, ids, names) is drawn
literally, never as markup or terminal escapes, in the console and in the headless progress."""

from __future__ import annotations

import errno
import io
import json
import os

import torch
from rich.console import Console

from searchgrpo.events import GroupScored, LogMessage, RunStarted, StepFinished, event_to_dict
from searchgrpo.terminal import ConsoleSink
from searchgrpo.train.checkpoints import latest_checkpoint
from tests.helpers.console import SIZE, settle, show_tab, text_of
from tests.helpers.faults import assert_checkpoint_loads, tiny_world
from tests.helpers.scripted_events import run_started, scripted_run, step_events
from tests.helpers.tiny import tiny_config
from tests.helpers.waiting import until
from tui.app import ConsoleApp
from tui.widgets import GroupTable, MetricTable


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
        await show_tab(pilot, "5")  # the Log tab draws the traceback
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


def jsonl(*items) -> str:
    return "".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in items)


HOSTILE = "Which [bold red]river[/] flows \x1b[2J\x1b]0;owned\x07 through [/q]?"
"""A question that reads as rich markup, clears the screen and sets the terminal's title."""


def bad_lines() -> list[str]:
    step = event_to_dict(step_events(3, total=6)[-1])
    return [
        "not json at all {",
        json.dumps([1, 2, 3]),
        json.dumps("a string"),
        json.dumps({"type": "NoSuchEvent", "step": 1}),
        json.dumps({**step, "step": "three"}),
        json.dumps({**step, "metrics": {"reward/mean": "high"}}),
        json.dumps({**step, "metrics": {"loss/\x1b[31mkl": 0.1}}),
        json.dumps({**step, "metrics": {"x" * 500: 0.1}}),
        json.dumps({"type": "GroupScored", "step": 3}),
        "x" * 100_000,  # over the cap given below
    ]


async def test_replay_skips_and_counts_malformed_lines_and_shows_the_rest(tmp_path):
    events = scripted_run(steps=6, total=6)
    first = next(i for i, e in enumerate(events) if isinstance(e, GroupScored))
    events[first] = GroupScored(**{**events[first].__dict__, "question": HOSTILE, "state_id": "q[/x]\x1b[1m"})
    good = [event_to_dict(e) for e in events]
    path = tmp_path / "run" / "events.jsonl"
    path.parent.mkdir()
    path.write_text(jsonl(*good[:10], *bad_lines(), *good[10:]))
    cfg = tiny_config(tmp_path)
    app = ConsoleApp(cfg, "test", source="replay", events_path=path, max_line=64_000)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.model.run
        assert app.is_running and run.status == "completed" and run.step == 6
        assert [s for s, _ in run.history["reward/mean"]] == [1, 2, 3, 4, 5, 6]
        assert app.query_one(MetricTable).row_count == len(run.history)
        (note,) = [e.text for e in app.model.log if "malformed" in e.text]
        assert "skipped 10 malformed event line(s)" in note and "line 11: not JSON" in note
        await show_tab(pilot, "5")
        await settle(pilot)
        log = " ".join(" ".join(str(line.text) for line in app.query_one("#log-pane").lines).split())
        assert "skipped 10 malformed event line(s)" in log  # wrapped over lines at the pane's width
        await show_tab(pilot, "1")
        for _ in range(20):
            await pilot.press("left_square_bracket")
        await settle(pilot)
        title = text_of(app, "#group-title")
        assert "[bold red]river[/]" in title and "\x1b" not in title and "through [/q]?" in title


async def test_attach_says_when_the_run_stalls_and_when_it_moves_again(tmp_path):
    path = tmp_path / "run" / "events.jsonl"
    path.parent.mkdir()
    path.write_text(jsonl(*(event_to_dict(e) for e in [run_started(6), *step_events(1, total=6)])))
    app = ConsoleApp(tiny_config(tmp_path), "test", source="attach", events_path=path, stall_after=0.5)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.run.stalled_s > 0, "stalled")
        app.redraw()
        await pilot.pause()
        assert "no new events for" in text_of(app, "#run-hint")
        assert any("no new events" in e.text for e in app.model.log)
        with path.open("a") as fh:
            fh.write(jsonl(*(event_to_dict(e) for e in step_events(2, total=6))))
        await until(pilot, lambda: app.model.run.step == 2 and app.model.run.stalled_s == 0, "moving again")
        assert any("events arrive again" in e.text for e in app.model.log)


async def test_replay_of_a_file_that_is_no_event_log_at_all_opens_and_quits(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\x00\xff garbage\n" * 50 + json.dumps({"type": "RunStarted"}).encode() + b"\n")
    app = ConsoleApp(tiny_config(tmp_path), "test", source="replay", events_path=path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.is_running and app.model.run.info is None
        (note,) = [e.text for e in app.model.log if "malformed" in e.text]
        assert "skipped 51 malformed event line(s)" in note
        await pilot.press("q")
    assert app.return_value == 0


def test_headless_progress_prints_data_literally():
    out = io.StringIO()
    sink = ConsoleSink(Console(file=out, width=300, force_terminal=True, color_system=None))
    sink(RunStarted("run[/bold]\x1b[2J", "runs/[red]x", "model\x07", "cpu", 2, 1, 1, 2, 2))
    sink(StepFinished(1, 0, 2, {"reward/mean": 0.5, "loss/total": 3.2e-6, "loss/kl": 1e-4, "grad/norm": 0.4}))
    sink(LogMessage("warning", HOSTILE))
    sink.close()
    text = out.getvalue()
    assert "run[/bold]\\x1b[2J" in text and "runs/[red]x" in text and "[bold red]river[/]" in text
    assert "\x1b]0;" not in text and "\x07" not in text
    assert "loss +3.20e-06  grad 0.400  kl 1.00e-04" in text  # not +0.0000

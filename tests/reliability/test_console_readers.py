"""Files that change under a reader, and one sanitiser for the console: an attached console whose
events file is replaced by another (a new inode) or cut shorter says so and stops reading it,
instead of adding the other run's steps to this run's curves; a replay of a run whose config.yaml
this version cannot read (an unknown key, a non-mapping) still shows its events, with a notice;
the console shows text through the core's `printable`, bidirectional overrides included.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from searchgrpo.errors import printable as core_printable
from searchgrpo.events import event_to_dict
from tests.helpers.console import SIZE, make_app
from tests.helpers.console import cfg as cfg  # the console tests' config fixture
from tests.helpers.scripted_events import run_started, step_events
from tests.helpers.waiting import until
from tui.format import printable as console_printable


def write_events(path: Path, events: list) -> None:
    with path.open("a", encoding="utf-8") as fh:
        for e in events:
            fh.write(json.dumps(event_to_dict(e)) + "\n")


def other_run(path: Path, steps: range) -> Path:
    """Another run's events file beside `path`."""
    other = path.with_name("other.jsonl")
    write_events(other, [run_started(20, run_id="20270101-000000")])
    for step in steps:
        write_events(other, step_events(step, total=20, seed=7))
    return other


def log_texts(app) -> list[str]:
    return [e.text for e in app.model.log]


async def test_an_attached_file_replaced_by_another_is_reported_not_mixed(cfg, tmp_path):
    path = tmp_path / "runs" / "r1" / "events.jsonl"
    path.parent.mkdir(parents=True)
    write_events(path, [run_started(8), *step_events(1, total=8), *step_events(2, total=8)])
    app = make_app(cfg, source="attach", events_path=path, run_dir=path.parent)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.run.step == 2, "step 2")
        os.replace(other_run(path, range(1, 6)), path)  # another run's events renamed into place
        await until(pilot, lambda: any("replaced by another file" in t for t in log_texts(app)), "the notice")
        assert [s for s, _ in app.model.run.history["reward/mean"]] == [1, 2]  # nothing of the other run
        assert app.model.run.info.run_id == "20260101-000000"
        notice = next(t for t in log_texts(app) if "replaced by another file" in t)
        assert "stopped reading" in notice and "attach again to follow the new file" in notice


async def test_an_attached_file_rewritten_shorter_is_reported_not_mixed(cfg, tmp_path):
    path = tmp_path / "events.jsonl"
    write_events(path, [run_started(8), *[e for s in range(1, 4) for e in step_events(s, total=8)]])
    app = make_app(cfg, source="attach", events_path=path, run_dir=path.parent)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.run.step == 3, "step 3")
        with path.open("r+b") as fh:  # the same inode, rewritten from the start by another writer
            fh.truncate(0)
        write_events(path, [run_started(20, run_id="20270101-000000"), *step_events(1, total=20, seed=7)])
        await until(pilot, lambda: any("rewritten in place" in t for t in log_texts(app)), "the notice")
        assert [s for s, _ in app.model.run.history["reward/mean"]] == [1, 2, 3]


@pytest.mark.parametrize(
    "config_text, words",
    [
        ("train:\n  lr: 1.0e-5\n  a_key_of_a_later_version: 3\n", "unknown key 'train.a_key_of_a_later_version'"),
        ("- a list\n- not a mapping\n", "must be a mapping"),
        ("train: [unclosed\n", "not valid YAML"),
    ],
)
async def test_a_replay_of_a_run_of_another_config_version_still_shows_its_events(
    config_text, words, cfg, tmp_path, monkeypatch
):
    import tui.launch as launch

    run = tmp_path / "runs" / "old"
    run.mkdir(parents=True)
    write_events(run / "events.jsonl", [run_started(4), *step_events(1, total=4), *step_events(2, total=4)])
    (run / "config.yaml").write_text(config_text)
    apps = []
    monkeypatch.setattr(launch, "run_console", lambda app, **kw: apps.append(app) or 0)
    assert launch.launch_console(cfg, "built-in defaults", start=False, replay=[run]) == 0
    (app,) = apps
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.model.run.step == 2, "both steps of the replay")
        notices = [t for t in log_texts(app) if "not a config this version reads" in t]
        assert notices and words in notices[0] and str(run / "config.yaml") in notices[0]


@pytest.mark.parametrize(
    "hostile", ["abc\u202edef", "x\u2066y\u2069", "a\u200bb", "soft\xadhyphen", "l1\u2028l2", "\ufeffbom"]
)
def test_the_console_and_the_cli_sanitise_alike(hostile):
    shown = console_printable(hostile, one_line=True)
    assert shown == core_printable(hostile)
    assert shown.isascii() or all(ord(c) < 0x2000 or c.isalnum() for c in shown)
    assert not any(c in shown for c in "\u202e\u2066\u2069\u200b\xad\u2028\ufeff")

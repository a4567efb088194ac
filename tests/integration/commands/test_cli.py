"""The CLI: in-process with Typer's runner, and end to end in subprocesses."""

import json
import signal
from pathlib import Path

from typer.testing import CliRunner

import searchgrpo.cli as cli
from searchgrpo.sinks import read_events
from searchgrpo.train.checkpoints import latest_checkpoint, list_checkpoints
from tests.helpers.tiny import SETS, searchgrpo
from tests.helpers.waiting import CEILING_S, wait_until

runner = CliRunner()


def test_config_command_shows_overrides():
    result = runner.invoke(cli.app, ["config", "--set", "grpo.beta=0.5"])
    assert result.exit_code == 0
    assert "grpo.beta" in result.output and "0.5" in result.output


def test_bad_override_is_one_line_exit_2(tmp_path):
    proc = searchgrpo("config", "--set", "grpo.num_generations=1", cwd=tmp_path)
    out, _ = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == 2
    assert out.strip().splitlines() == [
        "error: <defaults> + --set: grpo.num_generations = 1 is out of range: expected >= 2 and <= 1024"
    ]


def test_train_receives_the_parsed_config(monkeypatch, tmp_path):
    seen = {}
    import searchgrpo.runs as runs

    monkeypatch.setattr(runs, "train_headless", lambda cfg, **kw: seen.update(cfg=cfg, **kw) or 0)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli.app, ["train", "--headless", "--debug", "--epochs", "3", "--set", "train.lr=1e-4"])
    assert result.exit_code == 0, result.output
    cfg = seen["cfg"]
    assert cfg.train.epochs == 3 and cfg.train.lr == 1e-4 and cfg.train.max_steps == 4
    assert cfg.grpo.num_generations == 2 and seen["resume"] is False


def test_check_reports_every_stage(tmp_path):
    result = runner.invoke(cli.app, ["check", *SETS], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in ("config", "data", "split", "search", "checker+reward", "model", "forward"):
        assert name in result.output
    assert "FAIL" not in result.output


def test_check_points_at_the_broken_part(tmp_path):
    result = runner.invoke(
        cli.app,
        ["check", "--no-model", "--set", f"data.traces={tmp_path}/none", "--set", f"data.corpus={tmp_path}/none.jsonl"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 1
    assert "FAIL" in result.output and "SKIP" in result.output


def test_demo_world_command(tmp_path):
    out = tmp_path / "world"
    result = runner.invoke(cli.app, ["demo-world", "--out", str(out), "--questions", "5", "--distractors", "10"])
    assert result.exit_code == 0, result.output
    assert (out / "corpus.jsonl").is_file() and (out / "questions.jsonl").is_file()
    assert len(list((out / "traces").iterdir())) == 5


def test_headless_debug_run_writes_events_and_a_checkpoint(tmp_path):
    proc = searchgrpo("train", "--headless", "--debug", *SETS, "--set", "train.run_name=dbg", cwd=tmp_path)
    out, _ = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == 0, out
    run_dir = tmp_path / "runs" / "dbg"
    events = list(read_events(run_dir / "events.jsonl"))
    assert type(events[0]).__name__ == "RunStarted" and type(events[-1]).__name__ == "RunFinished"
    assert latest_checkpoint(run_dir).step == 4
    assert "run completed at step 4" in out


def test_sigterm_saves_a_checkpoint_and_exits_cleanly(tmp_path):
    proc = searchgrpo(
        "train", "--headless", *SETS, "--set", "train.run_name=term", "--set", "train.max_steps=500", cwd=tmp_path
    )
    events = tmp_path / "runs" / "term" / "events.jsonl"
    wait_until(
        lambda: events.is_file() and '"StepFinished"' in events.read_text(), "the first step finished", proc=proc
    )
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == 0, out
    last = list(read_events(events))[-1]
    assert type(last).__name__ == "RunFinished" and last.reason == "stopped"
    assert latest_checkpoint(tmp_path / "runs" / "term").step == last.step


def test_sigkill_then_resume_completes_the_run(tmp_path):
    """Kill -9 mid-training (checkpoints every step), resume, finish: no corrupt checkpoint."""
    args = [
        "train",
        "--headless",
        *SETS,
        "--set",
        "train.run_name=kill",
        "--set",
        "train.max_steps=12",
        "--set",
        "train.save_every=1",
        "--set",
        "train.keep_last=2",
    ]
    run_dir = tmp_path / "runs" / "kill"
    proc = searchgrpo(*args, cwd=tmp_path)
    wait_until(lambda: any(c.step >= 3 for c in list_checkpoints(run_dir)), "the checkpoint of step 3", proc=proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    killed_at = latest_checkpoint(run_dir).step
    assert killed_at < 12
    proc = searchgrpo(*args, "--resume", cwd=tmp_path)
    out, _ = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == 0, out
    assert [c.step for c in list_checkpoints(run_dir)] == [11, 12]
    assert not [p for p in (run_dir / "checkpoints").iterdir() if ".tmp-" in p.name]
    steps = [e.step for e in read_events(run_dir / "events.jsonl") if type(e).__name__ == "StepFinished"]
    assert steps[-1] == 12 and set(range(1, 13)) <= set(steps)
    for info in list_checkpoints(run_dir):
        assert json.loads((info.path / "trainer_state.json").read_text())["step"] == info.step


def test_tui_opens_the_console_with_the_parsed_options(monkeypatch, tmp_path):
    import tui.launch

    seen = {}
    monkeypatch.setattr(tui.launch, "launch_console", lambda cfg, source, **kw: seen.update(cfg=cfg, **kw) or 0)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli.app, ["tui", "--start", "--set", "grpo.beta=0.0"])
    assert result.exit_code == 0, result.output
    assert seen["cfg"].grpo.beta == 0.0 and seen["start"] is True and seen["attach"] is None
    result = runner.invoke(cli.app, ["tui", "--attach", "runs/abc"])
    assert result.exit_code == 0 and seen["attach"] == Path("runs/abc") and seen["start"] is False


def test_tui_refuses_to_train_while_attaching(tmp_path):
    proc = searchgrpo("tui", "--attach", "runs/x", "--start", cwd=tmp_path)
    out, _ = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == 2 and "only watch a run" in out

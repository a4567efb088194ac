"""Faults during training: SIGKILL at random points and inside checkpoint writes, a full disk
during a save, NaN and inf in the loss, Ctrl-C once and twice, a kill while an old checkpoint is
deleted. In every case the newest complete checkpoint loads, `--resume` finishes the run, and no
folder named `step-*` is ever incomplete.

`tests/integration/commands/test_cli.py` already covers SIGTERM (a graceful checkpoint) and one SIGKILL + resume;
`tests/integration/train/test_trainer.py` that a resumed run replays an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import searchgrpo.train.checkpoints as train_checkpoints
import searchgrpo.train.step as grpo_step_module
import searchgrpo.train.step_runner as runner_module
from searchgrpo.events import LogMessage, RunFailed, RunFinished, StepFinished
from searchgrpo.sinks import read_events
from searchgrpo.train.checkpoints import (
    latest_checkpoint,
    list_checkpoints,
)
from searchgrpo.train.trainer import Trainer
from tests.helpers.faults import (
    assert_checkpoint_loads,
    main_in_process,
    run_cli,
    spawn,
    step_folders,
)
from tests.helpers.tiny import SETS, tiny_config
from tests.helpers.waiting import wait_until


def assert_no_partial_checkpoint(run_dir: Path) -> None:
    """Every folder named step-* is a complete checkpoint (anything else is a .tmp- leftover)."""
    assert [p.name for p in step_folders(run_dir)] == [c.path.name for c in list_checkpoints(run_dir)]


def step_metrics(events_file: Path) -> list[tuple[int, dict]]:
    return [
        (e.step, {k: v for k, v in e.metrics.items() if not k.startswith("time/")})
        for e in read_events(events_file)
        if isinstance(e, StepFinished)
    ]


# --------------------------------------------------------------------------- SIGKILL


def test_sigkill_at_random_points_and_inside_checkpoint_writes(tmp_path):
    """A seeded series of kills, two of them while a checkpoint folder is being written (each file
    of a checkpoint is slowed by 50 ms so that the kill lands inside). After each kill the newest
    complete checkpoint loads; the last `--resume` finishes the run. Steps that ran twice (after
    the checkpoint they followed was lost with the kill) report the same numbers both times."""
    rng = random.Random(20240909)
    total = 14
    args = [
        "train",
        "--headless",
        *SETS,
        "--set",
        "train.run_name=kill",
        "--set",
        f"train.max_steps={total}",
        "--set",
        "train.save_every=1",
        "--set",
        "train.keep_last=2",
    ]
    run_dir = tmp_path / "runs" / "kill"
    events = run_dir / "events.jsonl"
    kills = ["random", "in_write", "random", "in_write"]
    killed_at: list[int] = []
    for n, when in enumerate(kills):
        started = len(step_metrics(events)) if events.is_file() else 0
        proc = spawn(*args, *(["--resume"] if n else []), cwd=tmp_path, fault="slow_save=0.05")
        wait_until(
            lambda started=started: events.is_file() and len(step_metrics(events)) > started,
            f"a step past step {started} in the events",
            proc=proc,
        )
        if when == "random":
            time.sleep(rng.uniform(0.0, 1.5))
        else:
            root = run_dir / "checkpoints"
            wait_until(
                lambda root=root: any(".tmp-" in p.name and "deleted" not in p.name for p in root.iterdir()),
                "a checkpoint folder being written (.tmp-)",
                proc=proc,
                poll=0.005,
            )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL, "the run ended before the kill"
        assert_no_partial_checkpoint(run_dir)
        info = latest_checkpoint(run_dir)
        assert info is not None and info.step < total
        assert_checkpoint_loads(info)
        killed_at.append(info.step)
    assert killed_at == sorted(killed_at)  # no kill ever cost an older checkpoint

    code, out = run_cli(*args, "--resume", cwd=tmp_path)
    assert code == 0, out
    assert "resuming run kill" in out and f"run completed at step {total}" in out
    assert [c.step for c in list_checkpoints(run_dir)] == [total - 1, total]
    assert not [p for p in (run_dir / "checkpoints").iterdir() if ".tmp-" in p.name]
    seen: dict[int, dict] = {}
    for step, metrics in step_metrics(events):
        if step in seen:
            assert metrics == seen[step], f"step {step} replayed differently after a kill"
        seen[step] = metrics
    assert sorted(seen) == list(range(1, total + 1))


def test_kill_while_an_old_checkpoint_is_deleted_leaves_no_partial_folder(tmp_path, monkeypatch):
    """keep_last deletes old checkpoints; a kill halfway through a deletion (simulated: the
    deletion removes one file, then the process is interrupted) must not leave a half-deleted
    `step-*` folder that looks like a checkpoint. The leftover is removed on resume."""
    real_rmtree = train_checkpoints.shutil.rmtree

    def killed_midway(path, ignore_errors=False, **kw):
        path = Path(path)
        if path.exists():
            next(f for f in sorted(path.rglob("*")) if f.is_file()).unlink()
            raise KeyboardInterrupt  # the process dies here
        return real_rmtree(path, ignore_errors=ignore_errors, **kw)

    cfg = tiny_config(tmp_path, "train.max_steps=3", "train.save_every=1", "train.keep_last=1", "train.run_name=del")
    events: list = []
    trainer = Trainer(cfg, sink=events.append)
    monkeypatch.setattr(train_checkpoints.shutil, "rmtree", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    monkeypatch.setattr(train_checkpoints.shutil, "rmtree", real_rmtree)
    run_dir = trainer.run_dir
    assert_no_partial_checkpoint(run_dir)
    assert [c.step for c in list_checkpoints(run_dir)] == [2]
    assert any(".tmp-" in p.name for p in (run_dir / "checkpoints").iterdir())
    resumed: list = []
    summary = Trainer(cfg, sink=resumed.append, resume=True, run_dir=run_dir).train()
    assert summary.step == 3
    assert any(
        isinstance(e, LogMessage) and "left by an interrupted checkpoint write or deletion" in e.text for e in resumed
    )
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] == ["step-000003"]


# --------------------------------------------------------------------------- Ctrl-C


def ctrl_c_after(monkeypatch, step: int) -> None:
    """Press Ctrl-C (a real SIGINT to this process) once step `step` is finished.

    The CLI runs in-process (`main`), so the signal meets the real handler of `train --headless`;
    the hook is the console display, which sees every event."""
    import searchgrpo.terminal as terminal

    class PressCtrlC(terminal.ConsoleSink):
        def __call__(self, event):
            super().__call__(event)
            if isinstance(event, StepFinished) and event.step == step:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)  # the handler runs here, in the main thread

    monkeypatch.setattr(terminal, "ConsoleSink", PressCtrlC)


def test_ctrl_c_once_saves_a_checkpoint_and_exits_0(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ctrl_c_after(monkeypatch, step=2)
    code, out = main_in_process(["train", "--headless", *SETS, "--set", "train.run_name=once"], capsys, monkeypatch)
    assert code == 0, out
    assert "SIGINT: stopping after this step with a checkpoint" in out and "Traceback" not in out
    run_dir = tmp_path / "runs" / "once"
    last = list(read_events(run_dir / "events.jsonl"))[-1]
    assert isinstance(last, RunFinished) and last.reason == "stopped" and last.step == 2
    info = latest_checkpoint(run_dir)
    assert info.step == 2
    assert_checkpoint_loads(info)


def test_ctrl_c_twice_aborts_with_130_and_no_partial_checkpoint(tmp_path, capsys, monkeypatch):
    """The first Ctrl-C comes after step 3; the second while step 3's checkpoint is being written:
    the write is abandoned, nothing named step-* is left of it, and step 2's checkpoint stays."""
    real_save = torch.save

    def press_in_write(obj, f, *a, **kw):
        if "step-000003.tmp-" in str(f) and str(f).endswith("optimizer.pt"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)  # the handler raises KeyboardInterrupt here
        return real_save(obj, f, *a, **kw)

    monkeypatch.setattr(torch, "save", press_in_write)
    monkeypatch.chdir(tmp_path)
    ctrl_c_after(monkeypatch, step=3)
    code, out = main_in_process(
        ["train", "--headless", *SETS, "--set", "train.run_name=twice", "--set", "train.save_every=2"],
        capsys,
        monkeypatch,
    )
    assert code == 130, out
    assert out.strip().splitlines()[-1].startswith("aborted: the newest complete checkpoint is ")
    assert "step-000002; continue with --resume" in out and "Traceback" not in out
    run_dir = tmp_path / "runs" / "twice"
    assert [p.name for p in step_folders(run_dir)] == ["step-000002"]
    assert not [p for p in (run_dir / "checkpoints").iterdir() if ".tmp-" in p.name]
    assert_checkpoint_loads(latest_checkpoint(run_dir))
    failed = list(read_events(run_dir / "events.jsonl"))[-1]
    assert isinstance(failed, RunFailed) and failed.error == "KeyboardInterrupt"


# --------------------------------------------------------------------------- NaN and inf


def _poison(kind: str, loss: torch.Tensor, logp: torch.Tensor) -> torch.Tensor:
    if kind == "nan_loss":
        return loss * float("nan")
    if kind == "inf_loss":
        return loss + float("inf")
    # nan_grad: the loss stays finite, its gradient is NaN (d sqrt(|x|)/dx at 0, times 0)
    return loss + (logp.sum() * 0).abs().sqrt()


@pytest.mark.parametrize("kind", ["nan_loss", "inf_loss", "nan_grad", "nan_advantage"])
def test_a_nonfinite_step_is_skipped_counted_reported_and_never_saved(kind, tmp_path, monkeypatch):
    poisoned = {"on": False}
    real_step, real_loss, real_adv = runner_module.update, grpo_step_module.grpo_loss, grpo_step_module.group_advantages

    calls = {"n": 0}

    def step(*args, **kw):
        calls["n"] += 1
        poisoned["on"] = calls["n"] == 2  # the second step
        return real_step(*args, **kw)

    def loss_fn(logp, *args, **kw):
        loss, stats = real_loss(logp, *args, **kw)
        return (_poison(kind, loss, logp) if poisoned["on"] and kind != "nan_advantage" else loss), stats

    def advantages(*args, **kw):
        adv, zero_std = real_adv(*args, **kw)
        return (adv * float("nan") if poisoned["on"] and kind == "nan_advantage" else adv), zero_std

    monkeypatch.setattr(runner_module, "update", step)
    monkeypatch.setattr(grpo_step_module, "grpo_loss", loss_fn)
    monkeypatch.setattr(grpo_step_module, "group_advantages", advantages)
    cfg = tiny_config(tmp_path, "train.max_steps=3", "train.save_every=1", "train.keep_last=3", "train.run_name=nan")
    events: list = []
    summary = Trainer(cfg, sink=events.append).train()
    assert summary.step == 3 and summary.reason == "completed"

    skipped = {e.step: e.metrics["train/nonfinite_skipped"] for e in events if isinstance(e, StepFinished)}
    assert skipped == {1: 0.0, 2: 1.0, 3: 0.0}
    warnings = [e.text for e in events if isinstance(e, LogMessage) and e.level == "warning"]
    assert warnings == ["step 2: non-finite loss or gradient; update skipped"]

    ckpts = {c.step: c.path for c in list_checkpoints(summary.run_dir)}
    adapters = {s: load_file(str(p / "adapter" / "adapter_model.safetensors")) for s, p in ckpts.items()}
    for weights in adapters.values():
        assert all(torch.isfinite(t).all() for t in weights.values())
    assert all(torch.equal(adapters[1][k], adapters[2][k]) for k in adapters[1])  # the update was skipped
    assert any(not torch.equal(adapters[2][k], adapters[3][k]) for k in adapters[2])  # and training went on
    opt1, opt2 = (torch.load(ckpts[s] / "optimizer.pt", weights_only=True)["state"] for s in (1, 2))
    assert all(torch.equal(opt1[i][k], opt2[i][k]) for i in opt1 for k in opt1[i])
    state = json.loads((ckpts[2] / "trainer_state.json").read_text())
    assert state["last_metrics"]["train/nonfinite_skipped"] == 1.0

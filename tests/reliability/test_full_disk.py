"""A full disk during training: a save that fails halfway keeps the previous checkpoint, the CLI stops
in one line and `--resume` finishes, and a full disk under the event log never stops training (the
other training faults: `test_faults_training.py`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import torch

from searchgrpo.events import RunFailed, StepFinished
from searchgrpo.sinks import read_events
from searchgrpo.train.checkpoints import (
    CheckpointWriteError,
    latest_checkpoint,
    list_checkpoints,
    load_training_state,
)
from searchgrpo.train.trainer import Trainer
from tests.helpers.faults import (
    assert_checkpoint_loads,
    assert_one_error_line,
    main_in_process,
)
from tests.helpers.tiny import SETS, tiny_config
from tests.reliability.test_faults_training import assert_no_partial_checkpoint

# --------------------------------------------------------------------------- a full disk


def _enospc(path: object) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def _in_step(path: object, step: int) -> bool:
    return f"step-{step:06d}.tmp-" in str(path)


def _fail_save_in_step(monkeypatch, owner: object, name: str, step: int, partial: bytes | None) -> None:
    """Patch `owner.name(obj, path, ...)` to fail with ENOSPC for files of checkpoint `step`,
    after writing `partial` bytes (None: nothing)."""
    real = getattr(owner, name)

    def fail(obj, path, *a, **kw):
        if _in_step(path, step):
            if partial is not None:
                Path(path).write_bytes(partial)
            raise _enospc(path)
        return real(obj, path, *a, **kw)

    monkeypatch.setattr(owner, name, fail)


def disk_fills_in(monkeypatch, which: str, step: int) -> None:
    """Make the write of one file of checkpoint `step` fail with ENOSPC, after writing some of it."""
    import peft.peft_model
    import safetensors.torch

    if which == "adapter":
        _fail_save_in_step(monkeypatch, peft.peft_model, "safe_save_file", step, b"\0" * 1024)
    elif which == "optimizer":
        _fail_save_in_step(monkeypatch, torch, "save", step, b"PK\x03\x04")
    elif which == "rng":
        _fail_save_in_step(monkeypatch, safetensors.torch, "save_file", step, None)
    elif which == "state":
        real_write = Path.write_text

        def fail_write(self, data, *a, **kw):
            if _in_step(self, step) and self.name == "trainer_state.json":
                real_write(self, data[: len(data) // 2], *a, **kw)
                raise _enospc(self)
            return real_write(self, data, *a, **kw)

        monkeypatch.setattr(Path, "write_text", fail_write)
    elif which == "fsync":  # the data was accepted, then fsync finds no room (delayed allocation)
        real_fsync = os.fsync

        def fail_fsync(fd):
            try:
                where = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                where = ""
            if _in_step(where, step):
                raise _enospc(where)
            return real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fail_fsync)


@pytest.mark.parametrize("which", ["adapter", "optimizer", "rng", "state", "fsync"])
def test_disk_full_during_a_save_keeps_the_previous_checkpoint(which, tmp_path, monkeypatch):
    cfg = tiny_config(tmp_path, "train.max_steps=4", "train.save_every=1", "train.keep_last=3", "train.run_name=full")
    events: list = []
    trainer = Trainer(cfg, sink=events.append)
    disk_fills_in(monkeypatch, which, step=3)
    with pytest.raises(CheckpointWriteError) as info:
        trainer.train()
    monkeypatch.undo()
    message = str(info.value)
    run_dir = trainer.run_dir
    assert "\n" not in message
    for words in (
        f"{run_dir / 'checkpoints' / 'step-000003'}: checkpoint not written (No space left on device)",
        "the newest complete checkpoint, step-000002, is intact",
        "free disk space, then continue with --resume",
    ):
        assert words in message
    failed = [e for e in events if isinstance(e, RunFailed)]
    assert len(failed) == 1 and failed[0].step == 3 and "CheckpointWriteError" in failed[0].error
    assert_no_partial_checkpoint(run_dir)
    assert [c.step for c in list_checkpoints(run_dir)] == [1, 2]
    assert not [p for p in (run_dir / "checkpoints").iterdir() if ".tmp-" in p.name]  # cleaned up at once
    info = latest_checkpoint(run_dir)
    assert_checkpoint_loads(info)
    load_training_state(info, model=trainer.policy.model, optimizer=trainer.optimizer, scheduler=trainer.scheduler)


def test_disk_full_through_the_cli_then_resume(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [
        "train",
        "--headless",
        *SETS,
        "--set",
        "train.run_name=full",
        "--set",
        "train.max_steps=4",
        "--set",
        "train.save_every=1",
    ]
    with monkeypatch.context() as m:
        disk_fills_in(m, "optimizer", step=3)
        code, out = main_in_process(args, capsys, monkeypatch)
    assert code == 2, out
    run_dir = Path("runs") / "full"
    assert_one_error_line(
        out,
        f"{run_dir / 'checkpoints' / 'step-000003'}: checkpoint not written "
        "(No space left on device); the newest complete checkpoint, step-000002, is intact; "
        "free disk space, then continue with --resume",
    )
    assert [c.step for c in list_checkpoints(run_dir)] == [1, 2]
    assert_no_partial_checkpoint(run_dir)
    assert not [p for p in (run_dir / "checkpoints").iterdir() if ".tmp-" in p.name]
    assert_checkpoint_loads(latest_checkpoint(run_dir))
    code, out = main_in_process([*args, "--resume"], capsys, monkeypatch)  # space is back
    assert code == 0, out
    assert "resuming run full" in out and "run completed at step 4" in out
    assert latest_checkpoint(run_dir).step == 4


def test_a_full_disk_under_the_event_log_never_stops_training(tmp_path, monkeypatch):
    """events.jsonl cannot be written for a while: the lines are counted as dropped, the run goes
    on, and the log stays readable (the torn line is ended and skipped by readers)."""
    from searchgrpo.sinks import JsonlSink

    sink = JsonlSink(tmp_path / "events.jsonl")
    real_write = os.write
    state = {"full": False}

    def write(fd, data):
        if state["full"]:
            real_write(fd, data[:7])  # part of the line made it
            raise _enospc("events.jsonl")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    cfg = tiny_config(tmp_path, "train.max_steps=4", "train.run_name=log")

    def tee(event):
        sink(event)
        if isinstance(event, StepFinished):
            state["full"] = event.step == 1  # full after step 1, free again after step 2

    summary = Trainer(cfg, sink=tee).train()
    monkeypatch.undo()
    sink.close()
    assert summary.step == 4 and summary.reason == "completed"
    assert sink.dropped > 0 and sink.error is not None and sink.error.errno == errno.ENOSPC
    steps = [e.step for e in read_events(tmp_path / "events.jsonl") if isinstance(e, StepFinished)]
    assert steps == [1, 3, 4]

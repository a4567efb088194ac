"""Signals everywhere: SIGTERM and SIGHUP to the console (`searchgrpo tui --start`, in a real
pseudo-terminal) stop the run as `x` does, with a checkpoint, leave the alternate screen, print
the command that resumes the run and release its lock; SIGHUP to `train --headless` does what
SIGTERM does. A hung-up terminal (its master side closed: the kernel's own SIGHUP, writes failing)
still ends with the checkpoint written and the lock released.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from searchgrpo.train.checkpoints import latest_checkpoint
from tests.helpers.faults import assert_checkpoint_loads, cli_env, spawn
from tests.helpers.tiny import SETS
from tests.helpers.waiting import CEILING_S, wait_until

LEAVE_ALT_SCREEN = "\x1b[?1049l"


class ConsoleInPty:
    """`python -m searchgrpo ARGS` on the slave side of a fresh pty (its controlling terminal);
    a thread drains the master side, so the console never blocks on a full terminal."""

    def __init__(self, *args: str, cwd: Path) -> None:
        master, slave = pty.openpty()
        env = cli_env(TERM="xterm-256color", COLUMNS="120", LINES="40")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "searchgrpo", *args],
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,  # its own session, so that the pty becomes its controlling terminal
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.master: int | None = master
        self.output = bytearray()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while self.master is not None:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def hang_up(self) -> None:
        """Close the terminal (the master side), as closing a terminal window does."""
        master, self.master = self.master, None
        if master is not None:
            os.close(master)

    def wait(self, timeout: float = 240) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"the console did not end within {timeout} s:\n{self.text[-3000:]}")
        finally:
            # The process has ended: the reader gets the rest of its output, then end of file.
            self._reader.join(timeout=CEILING_S)
            self.hang_up()


def steps_written(run_dir: Path) -> int:
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return 0
    return sum('"StepFinished"' in line for line in path.read_text().splitlines())


def lock_released(run_dir: Path) -> bool:
    """The lock file names no holder (a clean release empties it) and nobody holds the flock."""
    path = run_dir / "run.lock"
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return path.read_text() == ""


def start_console(tmp_path: Path) -> tuple[ConsoleInPty, Path]:
    run_dir = tmp_path / "runs" / "sig"
    console = ConsoleInPty(
        "tui",
        "--start",
        *SETS,
        "--set",
        f"train.output_dir={tmp_path / 'runs'}",
        "--set",
        "train.run_name=sig",
        "--set",
        "train.max_steps=500",
        cwd=tmp_path,
    )
    wait_until(lambda: steps_written(run_dir) >= 1, "the console's first step written", proc=console.proc)
    return console, run_dir


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_console_stops_the_run_with_a_checkpoint(sig, tmp_path):
    console, run_dir = start_console(tmp_path)
    console.proc.send_signal(sig)
    code = console.wait()
    text = console.text
    assert code == 0, text[-3000:]
    assert "Traceback" not in text
    assert LEAVE_ALT_SCREEN in text  # the terminal is given back
    tail = text[text.rindex(LEAVE_ALT_SCREEN) :]
    assert "continue it with:" in tail and f"searchgrpo tui --resume --run-dir {run_dir}" in tail, tail
    info = latest_checkpoint(run_dir)
    assert info is not None and info.step >= 1
    assert_checkpoint_loads(info)
    assert lock_released(run_dir)
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert any(e.get("type") == "CheckpointSaved" for e in events)


def test_a_hung_up_terminal_still_ends_with_a_checkpoint(tmp_path):
    console, run_dir = start_console(tmp_path)
    console.hang_up()  # the kernel sends SIGHUP to the session; writes to the terminal now fail
    console.wait()
    info = latest_checkpoint(run_dir)
    assert info is not None and info.step >= 1
    assert_checkpoint_loads(info)
    assert lock_released(run_dir)


def test_sighup_to_a_headless_run_stops_it_like_sigterm(tmp_path):
    run_dir = tmp_path / "runs" / "h"
    proc = spawn(
        "train",
        "--headless",
        *SETS,
        "--set",
        f"train.output_dir={tmp_path / 'runs'}",
        "--set",
        "train.run_name=h",
        "--set",
        "train.max_steps=500",
        cwd=tmp_path,
    )
    wait_until(lambda: steps_written(run_dir) >= 1, "the first step written", proc=proc)
    proc.send_signal(signal.SIGHUP)
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    assert "SIGHUP: stopping after this step with a checkpoint" in out
    info = latest_checkpoint(run_dir)
    assert info is not None and info.step >= 1 and lock_released(run_dir)

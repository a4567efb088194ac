"""One writer per run folder: a lock that names its holder, and run ids that never collide.

`RunLock.acquire(run_dir)` takes an exclusive `flock` on `run_dir/run.lock` and writes who holds it
(pid, host, start time). A second trainer on the same folder is refused with one line naming the
holder. The kernel drops the lock when its process dies however it dies (SIGKILL included), so a
lock file that still names a holder but is not locked is a stale one: it is taken over, and
`stale` says whose it was, for the notice. `release()` empties the file and unlocks it.

`claim_new_run_dir` creates a fresh run's folder with an exclusive mkdir, adding `-2`, `-3`, ...
to the id when another run took the same second, so two runs never share a folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from searchgrpo.errors import UserError

LOCK_FILE = "run.lock"


class RunLocked(UserError):
    """The run folder is being written by another live trainer."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a run's lock."""

    pid: int
    host: str
    started: float

    def __str__(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        return f"pid {self.pid} on {self.host}, started {when}"

    @staticmethod
    def me() -> Holder:
        return Holder(os.getpid(), socket.gethostname(), time.time())

    @staticmethod
    def parse(text: str) -> Holder | None:
        try:
            data = json.loads(text)
            return Holder(int(data["pid"]), str(data["host"]), float(data["started"]))
        except (ValueError, KeyError, TypeError):
            return None


class RunLock:
    """An exclusive lock on one run folder (see the module docstring)."""

    def __init__(self, path: Path, fd: int, holder: Holder, stale: Holder | None) -> None:
        self.path = path
        self.holder = holder
        self.stale = stale
        """The holder named by a lock that its process never released (it died); None if clean."""
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Lock `run_dir` (created if missing) or raise RunLocked naming the live holder."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Holder.parse(_read_all(fd))
                who = str(holder) if holder else "a process that has not written its name yet"
                raise RunLocked(
                    f"{run_dir}: another trainer is writing this run ({who}); wait for it to end "
                    "or stop it: two writers would mix their checkpoints"
                ) from None
            stale = Holder.parse(_read_all(fd))
            me = Holder.me()
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": me.pid, "host": me.host, "started": me.started}).encode(), 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, me, stale)

    @property
    def notice(self) -> str | None:
        """The words for a stale lock that was taken over (None when there was none)."""
        if self.stale is None:
            return None
        return f"{self.path.parent}: took over the lock of {self.stale}, which ended without releasing it"

    def release(self) -> None:
        """Empty the lock file (a clean end leaves no holder named) and unlock it."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # a full disk cannot stop the unlock: the next taker sees a stale name, no more
        finally:
            os.close(fd)


def _read_all(fd: int) -> str:
    return os.pread(fd, 4096, 0).decode("utf-8", "replace")


def new_run_id() -> str:
    """A fresh run's id: the time it started (`claim_new_run_dir` makes it unique)."""
    return time.strftime("%Y%m%d-%H%M%S")


def claim_new_run_dir(output_dir: Path, run_id: str) -> Path:
    """Create `output_dir/run_id` exclusively (or `run_id-2`, `-3`, ... when taken) and return it."""
    output_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        candidate = output_dir / (run_id if n == 1 else f"{run_id}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise UserError(f"{output_dir}: no free run id from {run_id}; set train.run_name")


def claim(run_dir: Path, *, fresh_id: bool, resume: bool) -> tuple[Path, RunLock]:
    """Lock the folder a run writes: `run_dir` made unique first when its id is a fresh timestamp;
    a new run may not take a folder that already holds one (`config.yaml`)."""
    if fresh_id:
        run_dir = claim_new_run_dir(run_dir.parent, run_dir.name)
    lock = RunLock.acquire(run_dir)
    if not resume and (run_dir / "config.yaml").is_file():
        lock.release()
        raise UserError(
            f"{run_dir} already holds a run; continue it with --resume, or choose another train.run_name (or --run-dir)"
        )
    return run_dir, lock

"""One writer per run folder: a lock that names its holder, and run ids that never collide.

`RunLock.acquire(run_dir)` takes an exclusive `flock` on `run_dir/run.lock` and writes who holds it
(pid, host, start time). A second trainer on the same folder is refused with one line naming the
holder. The kernel drops the lock when its process dies however it dies (SIGKILL included), so a
lock file that still names a holder but is not locked is a stale one: it is taken over, and
`stale` says whose it was, for the notice. `release()` empties the file and unlocks it.

`is_run_folder` is the one definition of a run folder (our markers, not just any config.yaml), and
`check_run_folder` refuses a folder a run may not use before anything, the lock included, is
written there. `claim_new_run_dir` creates a fresh run's folder with an exclusive mkdir, adding `-2`, `-3`, ...
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
from searchgrpo.train.run_history import HISTORY_FILE

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


UNSTARTED_FILES = frozenset({LOCK_FILE, "events.jsonl"})
"""What a start that stopped before writing its config leaves in a run folder (taken again freely)."""


def is_run_folder(path: Path) -> bool:
    """A folder a trainer started: its `config.yaml` beside `config_history.jsonl` (runs older than
    the history: beside `checkpoints/step-*`). A folder that merely holds a config.yaml, such as a
    checkout of this project, is not one."""
    if path.is_symlink() or not (path / "config.yaml").is_file():
        return False
    if (path / HISTORY_FILE).is_file():
        return True
    checkpoints = path / "checkpoints"
    return checkpoints.is_dir() and any(p.name.startswith("step-") for p in checkpoints.iterdir())


def check_run_folder(run_dir: Path, *, resume: bool) -> None:
    """Refuse, before anything is written there (not even a lock), a folder a run may not use: on
    resume, one that is not a run; for a new run, one that holds a run or anything else."""
    if resume:
        if not is_run_folder(run_dir):
            raise UserError(
                f"{run_dir}: not a run folder (a run holds config.yaml beside {HISTORY_FILE}); give the "
                "folder of a run to resume (--run-dir runs/<id>, or train.run_name)"
            )
        return
    if not os.path.lexists(run_dir):
        return
    if run_dir.is_symlink() or not run_dir.is_dir():
        raise UserError(f"{run_dir}: is not a folder; choose another train.run_name (or --run-dir)")
    if is_run_folder(run_dir) or ((run_dir / "config.yaml").is_file() and (run_dir / LOCK_FILE).is_file()):
        raise UserError(
            f"{run_dir} already holds a run; continue it with --resume, or choose another train.run_name (or --run-dir)"
        )
    others = sorted(p.name for p in run_dir.iterdir() if p.name not in UNSTARTED_FILES)
    if others:
        raise UserError(
            f"{run_dir}: the folder holds files that are not a run ({', '.join(others[:3])}"
            f"{', ...' if len(others) > 3 else ''}); give a new or empty folder (--run-dir) or another train.run_name"
        )


def claim(run_dir: Path, *, fresh_id: bool, resume: bool) -> tuple[Path, RunLock]:
    """Lock the folder a run writes, once `check_run_folder` accepts it: `run_dir` made unique first
    when its id is a fresh timestamp."""
    try:
        if fresh_id:
            run_dir = claim_new_run_dir(run_dir.parent, run_dir.name)
        else:
            check_run_folder(run_dir, resume=resume)
        return run_dir, RunLock.acquire(run_dir)
    except OSError as exc:  # a read-only working folder, no permission, a full disk
        raise UserError(unwritable_run_folder(run_dir, exc.strerror or str(exc))) from None


def unwritable_run_folder(run_dir: Path, reason: str) -> str:
    """The one line for a run folder that cannot be written, naming the settings that move it."""
    return (
        f"{run_dir}: cannot write the run folder there ({reason}); give a writable folder with --run-dir, "
        "or --set train.output_dir=DIR"
    )

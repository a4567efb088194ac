"""Atomic file and folder writes: a crash never leaves a half-written file where a complete one is
expected.

Files are written to a temporary sibling, flushed and fsynced, then renamed over the target (an
atomic step on POSIX). Folders are filled under a temporary name and renamed when complete.

What they leave behind has the permissions any file gets (0666 / 0777 less the umask), not the
owner-only mode of `tempfile`'s temporaries (nor of the libraries that write through one of their
own, such as safetensors): a merged model or a checkpoint must be readable by a server that runs as
another user wherever the umask allows it. Temporary names hold the writer's
pid (`<name>.tmp-<pid>-<random>`), so that leftovers of a killed writer can be told from the
temporaries of one still running (`remove_stale_temporaries(..., only_dead=True)`).
`save_model_here` writes a transformers model's folder on any rank of a distributed job.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

TMP_MARK = ".tmp-"


def current_umask() -> int:
    """The process umask, read without changing it (Linux: /proc/self/status; elsewhere the
    classic set-and-restore, which is racy only against threads creating files at that instant)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _tmp_prefix(name: str) -> str:
    return f"{name}{TMP_MARK}{os.getpid()}-"


def _writer_alive(name: str) -> bool:
    """Whether the process whose pid a temporary's name holds is still running on this machine
    (names without a pid, or with one that is gone, are leftovers)."""
    pid_text = name.split(TMP_MARK, 1)[1].split("-", 1)[0]
    if not pid_text.isdigit():
        return False
    if int(pid_text) == os.getpid():  # this process: another thread may be writing it
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, as another user
        return True
    return True


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_with(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Let `write` fill a temporary sibling of `path`, then rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(path.name), dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            # mkstemp makes it 0600; a rewritten file keeps its mode, a new one gets the umask's.
            try:
                mode = path.stat().st_mode & 0o7777
            except OSError:
                mode = 0o666 & ~current_umask()
            os.fchmod(fh.fileno(), mode)
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write_with(path, lambda fh: fh.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


@contextmanager
def atomic_dir(target: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder beside `target`; on success it is renamed to `target`.

    On any exception the temporary folder is removed and `target` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(target.name), dir=target.parent))
    try:
        tmp.chmod(0o777 & ~current_umask())  # mkdtemp makes it 0700
        yield tmp
        # Whatever wrote the files, they end with the umask's permissions: safetensors (0.8) writes
        # through an owner-only temporary of its own, which would keep another user's server out.
        file_mode, dir_mode = 0o666 & ~current_umask(), 0o777 & ~current_umask()
        for f in tmp.rglob("*"):
            if f.is_symlink():
                continue
            if f.is_file():
                f.chmod(file_mode)
                with f.open("rb") as fh:
                    os.fsync(fh.fileno())
            elif f.is_dir():
                f.chmod(dir_mode)
        if target.exists():
            if not overwrite:
                raise FileExistsError(f"{target} already exists")
            old = target.with_name(target.name + TMP_MARK + "old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
        fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove_stale_temporaries(folder: Path, *, only_dead: bool = False) -> list[Path]:
    """Delete leftovers of interrupted atomic writes in `folder` (not recursive). With `only_dead`,
    the temporaries of a writer still running on this machine are left alone (a folder that
    several processes may write into, such as merge's output folder)."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for p in folder.iterdir():
        if TMP_MARK in p.name and not (only_dead and _writer_alive(p.name)):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def save_model_here(model: Any, folder: Path) -> None:
    """A transformers model's `save_pretrained(folder)` on this process, whatever its rank in a distributed job.

    transformers writes nothing (silently) on a torch.distributed rank other than 0. The caches
    built here (a converted GGUF, the tiny model) are per machine: under a multi-machine launch
    without a shared filesystem, the first process of machine 1 builds its own, and a folder
    without weights or config would be taken as complete by every later run.
    """
    if hasattr(model, "should_save_on_this_rank"):  # transformers >= 5
        model.should_save_on_this_rank = lambda is_main_process: True
    try:
        model.save_pretrained(folder, safe_serialization=True)
    finally:
        model.__dict__.pop("should_save_on_this_rank", None)
    if not (Path(folder) / "config.json").is_file():
        raise RuntimeError(f"{folder}: save_pretrained wrote no config.json")


def json_safe(obj: Any) -> Any:
    """`obj` with NaN and infinities (no data for a metric) as None, so that it writes as strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj

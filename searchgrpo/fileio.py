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

`claim_output` is the one check every writer of a path the user named makes before any work: what
is already there must be absent, or one of ours of the same kind (a file only with `--overwrite`
when it is not), never a device, a FIFO, a symbolic link or a folder where a file goes.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from searchgrpo.errors import UserError, printable

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


def atomic_write_with(path: Path, write: Callable[[BinaryIO], object]) -> None:
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


def _rename_into(tmp: Path, target: Path) -> None:
    """Rename the finished folder `tmp` to `target`. Another process may have renamed its own copy
    there since `target` was looked at (two runs building the same cache folder): the kernel then
    says ENOTEMPTY or EEXIST, raised here as FileExistsError ("finished first by someone else")."""
    try:
        os.replace(tmp, target)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(errno.EEXIST, "already exists", str(target)) from exc
        raise


@contextmanager
def atomic_dir(target: Path, *, overwrite: bool = False, first_wins: bool = False) -> Iterator[Path]:
    """Yield a temporary folder beside `target`; on success it is renamed to `target`.

    On any exception the temporary folder is removed and `target` is untouched. If `target` is
    there when the body ends: with `overwrite` it is replaced; with `first_wins` (a cache that
    several processes may build at once, each writing the same thing) it is kept and this writer's
    folder is dropped; otherwise FileExistsError.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(target.name), dir=target.parent))
    try:
        tmp.chmod(0o777 & ~current_umask())  # mkdtemp makes it 0700
        yield tmp
        _settle_modes(tmp)
        try:
            _publish(tmp, target, overwrite=overwrite and not first_wins)
        except FileExistsError:
            if not first_wins:
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # finished first by another writer: theirs stays
            return
        fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _settle_modes(tmp: Path) -> None:
    """Give every file and folder under `tmp` the umask's permissions and flush each file.

    Whatever wrote the files, they end with the umask's permissions: safetensors (0.8) writes
    through an owner-only temporary of its own, which would keep another user's server out."""
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


def _publish(tmp: Path, target: Path, *, overwrite: bool) -> None:
    """Move the finished folder `tmp` to `target`; FileExistsError if `target` is taken and not `overwrite`."""
    if target.is_dir() and not target.is_symlink() and not any(target.iterdir()):
        _rename_into(tmp, target)  # an empty folder is replaced in one rename (POSIX allows it)
    elif target.exists():
        if not overwrite:
            raise FileExistsError(f"{target} already exists")
        old = target.with_name(target.name + TMP_MARK + "old")
        if old.exists():
            shutil.rmtree(old)
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        _rename_into(tmp, target)


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


# --------------------------------------------------------------------------- claiming an output path


@dataclass(frozen=True)
class OutputKind:
    """What a command writes at a path the user named, and how to tell one it wrote before."""

    name: str
    """In messages: "eval report", "merged model folder"."""
    option: str
    """The option that names the path (`--output`), so the message says what to change."""
    folder: bool = False
    """A folder (written whole, or into) rather than one file."""
    ours: Callable[[Path], bool] | None = None
    """Whether an existing file or non-empty folder is one of ours of this kind (None: never)."""
    reused: bool = False
    """Folders only: one of ours is written into again (collect resumes), not replaced, so it
    needs no --overwrite."""


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a file" if stat.S_ISREG(mode) else "not a regular file"


def _writable_parent(path: Path, kind: OutputKind) -> None:
    """The nearest existing ancestor of `path` must be a folder this process may create files in."""
    shown = printable(path)
    parent = path.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(f"{kind.option} {shown}: {printable(parent)} is not a folder; give a path inside a folder")
    reason = unwritable_reason(parent)
    if reason:
        raise UserError(f"{kind.option} {shown}: cannot write there ({reason}); give a writable folder")


def unwritable_reason(folder: Path) -> str:
    """Why this process cannot create files in the existing `folder` ("Read-only file system",
    "Permission denied"), or "" when it can."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "Read-only file system"
    except OSError:
        pass
    return "" if os.access(folder, os.W_OK | os.X_OK) else "Permission denied"


def claim_output(path: str | os.PathLike[str], kind: OutputKind, *, overwrite: bool = False) -> Path:
    """`path`, once it is safe to write a `kind` there; else one line naming the path, what is in
    the way and the fix (UserError). Call it before any work, so nothing is computed for nothing.

    Refused always: a symbolic link (`/dev/stdout`, or one pointing anywhere else: its target is
    not the path the user named), a device, a FIFO or a socket, a folder where a file goes and a
    file where a folder goes, a folder that holds what is not ours, a parent that cannot be
    written. An existing file that is not one of ours needs `overwrite`; so does a folder of ours
    that is replaced (not one that is written into again, `kind.reused`).
    """
    p = Path(path).expanduser()
    shown = printable(p)
    if p.is_symlink():
        raise UserError(
            f"{kind.option} {shown}: is a symbolic link (to {printable(os.readlink(p))}); give the path of "
            f"the {kind.name} itself"
        )
    try:
        st = p.stat()
    except FileNotFoundError:
        _writable_parent(p, kind)
        return p
    except OSError as exc:  # ENOTDIR: a file where a folder of the path should be
        raise UserError(f"{kind.option} {shown}: cannot be used ({exc.strerror or exc})") from None
    what = _file_type(st.st_mode)
    if kind.folder:
        if not stat.S_ISDIR(st.st_mode):
            raise UserError(f"{kind.option} {shown}: is {what}, not a folder; give the path of a folder")
        if not any(p.iterdir()):
            return p
        if kind.ours is None or not kind.ours(p):
            raise UserError(
                f"{kind.option} {shown}: the folder holds files that are not a {kind.name}; give a new or empty folder"
            )
        if not kind.reused and not overwrite:
            raise UserError(f"{kind.option} {shown}: a {kind.name} is already there; pass --overwrite to replace it")
        reason = unwritable_reason(p)
        if reason:
            raise UserError(f"{kind.option} {shown}: cannot write there ({reason}); give a writable folder")
        return p
    if stat.S_ISDIR(st.st_mode):
        raise UserError(
            f"{kind.option} {shown}: is a folder; give the path of a file, for example {printable(p / 'report.json')}"
        )
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{kind.option} {shown}: is {what}, not a regular file; give the path of a new file")
    if not overwrite and (kind.ours is None or not kind.ours(p)):
        raise UserError(
            f"{kind.option} {shown}: exists and is not a {kind.name}; pass --overwrite to replace it, "
            "or give another path"
        )
    _writable_parent(p, kind)
    return p


def json_head_matches(path: Path, pattern: str, head_bytes: int = 4096) -> bool:
    """Whether the first `head_bytes` of `path` match `pattern` (a regex over text): how a JSON
    file we wrote with its format key first is recognised without reading it whole."""
    try:
        with path.open("rb") as fh:
            head = fh.read(head_bytes).decode("utf-8", "replace")
    except OSError:
        return False
    return re.search(pattern, head) is not None


# --------------------------------------------------------------------------- the cache root

CACHE_ROOT_FIX = "give a writable cache root: paths.cache_root, or the SEARCHGRPO_HOME environment variable"
"""How to move what searchgrpo caches (converted models, demo worlds, indexes, verdicts)."""


@contextmanager
def writing_cache(target: Path, what: str) -> Iterator[None]:
    """While inside, an OSError writing `what` at `target` under the cache root (read-only, no
    permission, a full disk, a file in the way) becomes one line naming the path, the reason and
    the settings that move the cache root."""
    try:
        yield
    except OSError as exc:
        where = printable(exc.filename) if getattr(exc, "filename", None) else printable(target)
        reason = exc.strerror or type(exc).__name__
        free = "free space there, or " if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        raise UserError(f"{where}: cannot write the {what} ({reason}); {free}{CACHE_ROOT_FIX}") from None


def writable_folder(folder: Path, fix: str) -> Path:
    """`folder`, created if missing, once a probe file can be written in it; else one line naming
    it, the reason and `fix`."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{printable(folder)}: cannot write there ({exc.strerror or exc}); {fix}") from None
    return folder

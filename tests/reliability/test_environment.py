"""The environment and external services: a verdict cache that is a folder or not SQLite, a
read-only or full cache root (SEARCHGRPO_HOME, or HOME), a read-only working folder each give one
line naming the path and the setting that moves it, exit 2; a tracker whose server does not
answer is cut off at `train.tracker_timeout_s` and switched off with a notice, and one that
cannot write its records says so in our words, while training goes on.

Read-only and full file systems are real ones: a tmpfs mounted in a private mount namespace
(`unshare -m`, skipped where mounts are not allowed).
"""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from searchgrpo.agents.verdict_cache import CacheKey, VerdictCache
from searchgrpo.errors import UserError
from tests.helpers.faults import FaultServer, assert_one_error_line, cli_env, main_in_process
from tests.helpers.tiny import SETS
from tests.helpers.waiting import CEILING_S


def can_mount() -> bool:
    return (
        shutil.which("unshare") is not None
        and subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    )


needs_mounts = pytest.mark.skipif(not can_mount(), reason="needs unshare -m (root)")


def in_namespace(setup: str, args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """`setup` (mounts) then `python -m searchgrpo ARGS`, in a private mount namespace."""
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "searchgrpo", *args])
    proc = subprocess.run(
        ["unshare", "-m", "bash", "-c", f"{setup} && cd {shlex.quote(str(cwd))} && {command}"],
        capture_output=True,
        text=True,
        timeout=CEILING_S,
        env=env,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture
def server():
    with FaultServer() as s:
        yield s


# --------------------------------------------------------------------------- the verdict cache


@pytest.mark.parametrize("kind", ["folder", "not sqlite"])
def test_a_verdict_cache_that_cannot_be_one_is_one_line(kind, server, tmp_path, capsys, monkeypatch):
    cache = tmp_path / "verdicts.sqlite"
    if kind == "folder":
        cache.mkdir()
    else:
        cache.write_text("these are my notes, not a database\n" * 100)
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(
        [
            "eval",
            "--baseline",
            "--limit",
            "1",
            *SETS,
            "--set",
            "checker.backend=llm",
            "--set",
            f"checker.server={server.url}",
            "--set",
            f"checker.cache_path={cache}",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 2
    why = "is a folder" if kind == "folder" else "file is not a database"
    assert_one_error_line(out, f"{cache}: the verdict cache cannot be used ({why})", "checker.cache_path")
    if kind == "not sqlite":
        assert cache.read_text().startswith("these are my notes")


@needs_mounts
def test_a_full_verdict_cache_disk_is_one_line(tmp_path):
    """The real cache on a real full disk (a 256 KiB tmpfs), written until the disk is full."""
    small = tmp_path / "small"
    small.mkdir()
    script = (
        "import sys\n"
        "from searchgrpo.agents.verdict_cache import CacheKey, VerdictCache\n"
        "from searchgrpo.errors import UserError\n"
        f"cache = VerdictCache({str(small / 'v.sqlite')!r})\n"
        "try:\n"
        "    for i in range(100000):\n"
        "        cache.put_many([(CacheKey('q' * 200 + str(i), 'd', 'm', 'p'), 'IMPORTANT', 'x' * 2000)])\n"
        "except UserError as exc:\n"
        "    print('USERERROR', exc); sys.exit(0)\n"
        "print('never full'); sys.exit(1)\n"
    )
    proc = subprocess.run(
        [
            "unshare",
            "-m",
            "bash",
            "-c",
            f"mount -t tmpfs -o size=256k tmpfs {shlex.quote(str(small))} && "
            f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}",
        ],
        capture_output=True,
        text=True,
        timeout=CEILING_S,
        env=cli_env(),
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"USERERROR {small / 'v.sqlite'}: the verdict cache cannot be used (database or disk is full)" in out
    assert "checker.cache_path" in out and "Traceback" not in out


def test_a_healthy_cache_still_round_trips(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    key = CacheKey("q", "d", "m", "p")
    cache.put_many([(key, "IMPORTANT", "because")])
    assert cache.get_many([key]) == {key: ("IMPORTANT", "because")}
    cache.close()
    with pytest.raises(UserError, match="is a folder"):
        VerdictCache(tmp_path)


# --------------------------------------------------------------------------- cache root and working folder


@needs_mounts
@pytest.mark.parametrize("variable", ["SEARCHGRPO_HOME", "HOME"])
def test_a_read_only_cache_root_is_one_line_naming_the_setting(variable, tmp_path):
    root = tmp_path / "ro"
    root.mkdir()
    env = cli_env()
    env.pop("SEARCHGRPO_HOME", None)
    env[variable] = str(root)
    code, out = in_namespace(
        f"mount -t tmpfs -o ro,size=64k tmpfs {shlex.quote(str(root))}",
        ["eval", "--baseline", "--limit", "1", *SETS],
        tmp_path,
        env,
    )
    assert code == 2, out
    assert_one_error_line(out, str(root), "(Read-only file system)", "paths.cache_root", "SEARCHGRPO_HOME")


@needs_mounts
def test_a_full_cache_root_is_one_line(tmp_path):
    root = tmp_path / "full"
    root.mkdir()
    code, out = in_namespace(
        f"mount -t tmpfs -o size=16k tmpfs {shlex.quote(str(root))}",
        ["eval", "--baseline", "--limit", "1", *SETS],
        tmp_path,
        cli_env(SEARCHGRPO_HOME=str(root)),
    )
    assert code == 2, out
    assert_one_error_line(out, str(root), "(No space left on device)", "free space there", "SEARCHGRPO_HOME")


@needs_mounts
def test_a_read_only_working_folder_is_one_line_before_the_model_loads(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    code, out = in_namespace(
        f"mount --bind {shlex.quote(str(work))} {shlex.quote(str(work))} && "
        f"mount -o remount,ro,bind {shlex.quote(str(work))}",
        ["train", "--headless", *SETS],
        work,
        cli_env(),
    )
    assert code == 2, out
    assert_one_error_line(
        out, f"cannot write the run folder there (Read-only file system: {work})", "--run-dir", "train.output_dir"
    )
    assert "Loading weights" not in out


# --------------------------------------------------------------------------- trackers


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_tracker_whose_server_does_not_answer_is_cut_off(tmp_path, capsys, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{closed_port()}")
    # MLflow's own retries sleep 0 and 2 s (at least 2 s, past the 1 s deadline whatever the
    # machine's speed) and then end, so the abandoned call's thread ends soon after the test; its
    # defaults retry for minutes, into later tests (the conftest waits for it either way).
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    code, out = main_in_process(
        [
            "train",
            "--headless",
            *SETS,
            "--set",
            "train.max_steps=2",
            "--set",
            "train.report_to=[mlflow]",
            "--set",
            "train.tracker_timeout_s=1",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, out
    flat = " ".join(out.split())
    assert "mlflow: stopped logging (no answer within 1 s (train.tracker_timeout_s); is its server up?" in flat
    assert "training goes on; events.jsonl keeps every metric" in flat


def test_a_tracker_that_cannot_write_says_so_in_our_words(tmp_path, capsys, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "blocker").write_text("a file where MLflow's store would go")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"file:{tmp_path / 'blocker' / 'mlruns'}")
    code, out = main_in_process(
        ["train", "--headless", *SETS, "--set", "train.max_steps=1", "--set", "train.report_to=[mlflow]"],
        capsys,
        monkeypatch,
    )
    assert code == 0, out
    flat = " ".join(out.split())
    assert "mlflow: stopped logging (cannot write its records (" in flat, flat[-2000:]
    assert "training goes on; events.jsonl keeps every metric" in flat

"""Weights that went bad, a disk that really fills, and the permissions of what is written.

Non-finite adapter weights are never saved: the run stops at that checkpoint and names the steps.
A real full file system (a small tmpfs in a private mount namespace, `unshare -m`: nothing outside
the test sees it) fills during a checkpoint: torch reports it only as "unexpected pos", with no
errno, and the run still says the disk is full and which checkpoint is intact; a disk too small
for the checkpoint's tensors is refused before anything is written. Checkpoints, configs,
reports and merged models get the umask's permissions, not owner-only ones.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import searchgrpo.train.step_runner as runner_module
from searchgrpo.train.checkpoints import list_checkpoints
from tests.helpers.faults import assert_checkpoint_loads, assert_one_error_line, cli_env, main_in_process
from tests.helpers.tiny import SETS
from tests.helpers.waiting import CEILING_S


def test_non_finite_adapter_weights_are_never_saved(tmp_path, capsys, monkeypatch):
    real_step = runner_module.update
    calls = {"n": 0}

    def step(cfg, policy, *args, **kw):
        outcome = real_step(cfg, policy, *args, **kw)
        calls["n"] += 1
        if calls["n"] == 2:  # the second update left the weights non-finite
            next(p for p in policy.model.parameters() if p.requires_grad).data.fill_(float("nan"))
        return outcome

    monkeypatch.setattr(runner_module, "update", step)
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(
        [
            "train",
            "--headless",
            *SETS,
            "--set",
            "train.run_name=nan",
            "--set",
            "train.max_steps=4",
            "--set",
            "train.save_every=1",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 2, out
    assert_one_error_line(
        out,
        "step 2: 1 of ",
        "adapter tensors hold NaN or inf (first: ",
        "went bad after step 1 (the newest complete checkpoint, step-000001) and by step 2",
        "checkpoint step-000002 not written",
    )
    run = tmp_path / "runs" / "nan"
    assert [c.step for c in list_checkpoints(run)] == [1]
    assert_checkpoint_loads(list_checkpoints(run)[0])


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


needs_mount = pytest.mark.skipif(not _can_mount(), reason="needs unshare -m and tmpfs mounts (root)")

FILL = """
import os, sys
path, leave = sys.argv[1], int(sys.argv[2])
st = os.statvfs(os.path.dirname(path))
free = st.f_bfree * st.f_frsize
with open(path, "wb") as fh:
    fh.write(b"\\0" * max(free - leave, 0))
"""


def _resume_on_a_full_disk(tmp_path: Path, leaves: list[int]) -> list[tuple[int, str, str]]:
    """Train 1 step on a 4 MiB tmpfs; then, for each of `leaves`, fill it to that many bytes free
    and resume for a second step: (exit code, output, checkpoints left) of each resume."""
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "fill.py").write_text(FILL)
    base = [
        sys.executable,
        "-m",
        "searchgrpo",
        "train",
        "--headless",
        *SETS,
        "--set",
        f"train.output_dir={disk}",
        "--set",
        "train.run_name=full",
        "--set",
        "train.save_every=1",
    ]
    quoted = " ".join(f"'{a}'" for a in base)
    script = f"mount -t tmpfs -o size=4m tmpfs '{disk}' && {quoted} --set train.max_steps=1 >/dev/null 2>&1 || exit 9\n"
    for leave in leaves:
        script += (
            f"rm -f '{disk}/filler'; '{sys.executable}' '{tmp_path / 'fill.py'}' '{disk}/filler' {leave}\n"
            f"{quoted} --set train.max_steps=2 --resume --allow-changes 2>&1; "
            f"echo \"exit=$? kept=$(ls '{disk}/full/checkpoints')\"; echo '=== next'\n"
        )
    proc = subprocess.run(
        ["unshare", "-m", "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=CEILING_S,
        cwd=tmp_path,
        env=cli_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = []
    for part in proc.stdout.split("=== next")[: len(leaves)]:
        code, kept = part.split("exit=", 1)[1].split()[:2]
        results.append((int(code), part, kept))
    return results


@needs_mount
def test_a_real_full_disk_is_reported_as_a_full_disk(tmp_path):
    # 150 kB free: less than the checkpoint's tensors need, refused before anything is written.
    # 460 kB free: room for the adapter (safetensors) but not for optimizer.pt, where torch.save
    # fails with "unexpected pos ..." and no errno; the free space tells it is the disk.
    (small_code, small, small_kept), (code, out, kept) = _resume_on_a_full_disk(tmp_path, [150_000, 460_000])
    assert small_code == 2, small
    assert_one_error_line(
        small,
        "step-000002: checkpoint not written (No space left on device: ",
        "MiB free, its tensors alone need",
        "step-000001, is intact",
    )
    assert small_kept == "kept=step-000001"
    assert code == 2, out
    line = assert_one_error_line(
        out,
        "step-000002: checkpoint not written (No space left on device",
        "the newest complete checkpoint, step-000001, is intact; free disk space",
    )
    assert "unexpected pos" not in line
    assert kept == "kept=step-000001"  # nothing partial left, the old one kept


def test_what_is_written_has_the_umasks_permissions(tmp_path, capsys, monkeypatch):
    """Checkpoints, the run's config and a merged model, written by the CLI under umask 027, are
    group-readable as that umask allows (a vLLM running as another user of the group can load
    them), not owner-only as tempfile and safetensors' own temporaries leave them."""
    file_mode, dir_mode = 0o640, 0o750
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o027)
    try:
        for args in (
            ["train", "--headless", *SETS, "--set", "train.run_name=p", "--set", "train.max_steps=1"],
            ["merge", "--run-dir", "runs/p", "--output-dir", "merged", "--dtype", "float32", *SETS],
        ):
            code, out = main_in_process(args, capsys, monkeypatch)
            assert code == 0, out
    finally:
        os.umask(old)
    ckpt = list_checkpoints(tmp_path / "runs" / "p")[0].path
    written = [
        tmp_path / "runs" / "p",
        ckpt,
        *ckpt.rglob("*"),
        tmp_path / "runs" / "p" / "config.yaml",
        *(tmp_path / "merged").rglob("*"),
    ]
    assert any(p.suffix == ".safetensors" for p in (tmp_path / "merged").rglob("*"))
    for p in written:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (dir_mode if p.is_dir() else file_mode), (p, oct(mode))

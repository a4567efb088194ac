"""Weights that went bad, a disk that really fills, and the permissions of what is written.

Non-finite adapter weights are never saved: the run stops at that checkpoint and names the steps.
A real full file system (a small tmpfs in a private mount namespace, `unshare -m`: nothing outside
the test sees it) fills during a checkpoint: torch reports it only as "unexpected pos", with no
errno, and the run still says the disk is full and which checkpoint is intact; a disk too small
for the checkpoint's tensors is refused before anything is written. Checkpoints, configs,
reports and merged models get the umask's permissions, not owner-only ones.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import searchgrpo.train.trainer as trainer_module
from searchgrpo.train.checkpoints import list_checkpoints
from tests.reliability.helpers import SETS, assert_checkpoint_loads, assert_one_error_line, cli_env, main_in_process


def test_non_finite_adapter_weights_are_never_saved(tmp_path, capsys, monkeypatch):
    real_step = trainer_module.grpo_step

    def step(cfg, policy, *args, step, **kw):
        outcome = real_step(cfg, policy, *args, step=step, **kw)
        if step == 2:  # an update that left the weights non-finite
            next(p for p in policy.model.parameters() if p.requires_grad).data.fill_(float("nan"))
        return outcome

    monkeypatch.setattr(trainer_module, "grpo_step", step)
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(["train", "--headless", *SETS, "--set", "train.run_name=nan", "--set", "train.max_steps=4",
                                 "--set", "train.save_every=1"], capsys, monkeypatch)
    assert code == 2, out
    assert_one_error_line(out, "step 2: 1 of ", "adapter tensors hold NaN or inf (first: ",
                          "went bad after step 1 (the newest complete checkpoint, step-000001) and by step 2",
                          "checkpoint step-000002 not written")
    run = tmp_path / "runs" / "nan"
    assert [c.step for c in list_checkpoints(run)] == [1]
    assert_checkpoint_loads(list_checkpoints(run)[0])


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, timeout=30)
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


def _full_disk_run(tmp_path: Path, leave: int) -> tuple[int, str, str]:
    """Train 1 step on a 4 MiB tmpfs, fill it to `leave` bytes free, resume for a second step."""
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "fill.py").write_text(FILL)
    base = [sys.executable, "-m", "searchgrpo", "train", "--headless", *SETS, "--set", f"train.output_dir={disk}",
            "--set", "train.run_name=full", "--set", "train.save_every=1"]
    quoted = " ".join(f"'{a}'" for a in base)
    script = (f"mount -t tmpfs -o size=4m tmpfs '{disk}' && {quoted} --set train.max_steps=1 >/dev/null 2>&1 && "
              f"'{sys.executable}' '{tmp_path / 'fill.py'}' '{disk}/filler' {leave} && "
              f"{quoted} --set train.max_steps=2 --resume --allow-changes; echo \"exit=$? kept=$(ls '{disk}/full/checkpoints')\"")
    proc = subprocess.run(["unshare", "-m", "bash", "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=cli_env())
    out = proc.stdout + proc.stderr
    code, kept = out.split("exit=", 1)[1].split()[:2]
    return int(code), out, kept


@needs_mount
def test_a_real_full_disk_in_torch_save_is_reported_as_a_full_disk(tmp_path):
    # Room for the adapter (safetensors) but not for optimizer.pt: torch.save fails with
    # "unexpected pos ..." and no errno; the free space tells it is the disk.
    code, out, kept = _full_disk_run(tmp_path, leave=460_000)
    assert code == 2, out
    line = assert_one_error_line(out, "step-000002: checkpoint not written (No space left on device",
                                 "the newest complete checkpoint, step-000001, is intact; free disk space")
    assert "unexpected pos" not in line
    assert kept == "kept=step-000001"  # nothing partial left, the old one kept


@needs_mount
def test_a_disk_too_small_for_the_tensors_is_refused_before_writing(tmp_path):
    code, out, kept = _full_disk_run(tmp_path, leave=150_000)
    assert code == 2, out
    assert_one_error_line(out, "step-000002: checkpoint not written (No space left on device: ",
                          "MiB free, its tensors alone need", "step-000001, is intact")
    assert kept == "kept=step-000001"


def test_what_is_written_has_the_umasks_permissions(tmp_path):
    """Checkpoints, the run's config and a merged model, written by the CLI under umask 027, are
    group-readable as that umask allows (a vLLM running as another user of the group can load
    them), not owner-only as tempfile and safetensors' own temporaries leave them."""
    umask, file_mode, dir_mode = 0o027, 0o640, 0o750
    (tmp_path / "umask.py").write_text(
        "import os, sys\nos.umask(int(sys.argv[1], 8))\nsys.argv = ['searchgrpo', *sys.argv[2:]]\n"
        "from searchgrpo.cli import main\nmain()\n")

    def cli(*args: str) -> None:
        proc = subprocess.run([sys.executable, str(tmp_path / "umask.py"), oct(umask), *args], cwd=tmp_path,
                              env=cli_env(), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    cli("train", "--headless", *SETS, "--set", "train.run_name=p", "--set", "train.max_steps=1")
    ckpt = list_checkpoints(tmp_path / "runs" / "p")[0].path
    cli("merge", "--checkpoint", str(ckpt), "--output-dir", "merged", "--dtype", "float32", *SETS)
    written = [tmp_path / "runs" / "p", ckpt, *ckpt.rglob("*"), tmp_path / "runs" / "p" / "config.yaml",
               *(tmp_path / "merged").rglob("*")]
    assert any(p.suffix == ".safetensors" for p in (tmp_path / "merged").rglob("*"))
    for p in written:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == (dir_mode if p.is_dir() else file_mode), (p, oct(mode))

"""`merge` and `eval` inputs that name the fix: merge checks its output folder and the adapter's
fit to the base before any weight loads, and a killed merge leaves no temporary folder after the
next run; eval refuses a limit, a seed or a temperature that cannot work.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys

import pytest
import transformers

from searchgrpo.policy.tiny import ensure_tiny_model
from searchgrpo.train.checkpoints import list_checkpoints
from searchgrpo.train.trainer import Trainer
from tests.helpers.faults import assert_one_error_line, cli_env, main_in_process, spawn
from tests.helpers.tiny import SETS, tiny_config
from tests.helpers.waiting import CEILING_S, wait_until


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("merge-inputs")
    summary = Trainer(tiny_config(root, "train.max_steps=1", "train.run_name=m")).train()
    return list_checkpoints(summary.run_dir)[0].path


@pytest.fixture
def weight_loads(monkeypatch):
    """Counts model weight loads (the real loader still runs)."""
    calls = []
    real = transformers.AutoModelForCausalLM.from_pretrained.__func__

    def counted(cls, *args, **kwargs):
        calls.append(args[:1])
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", classmethod(counted))
    return calls


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("--limit", "0", "--limit 0 is out of range: expected >= 1"),
        ("--limit", "-3", "--limit -3 is out of range"),
        ("--seed", "-1", "--seed -1 is out of range: expected >= 0"),
        ("--temperature", "0", "--temperature 0.0 is out of range: expected a finite number > 0"),
        ("--temperature", "-1", "--temperature -1.0 is out of range"),
        ("--temperature", "nan", "--temperature nan is out of range"),
    ],
)
def test_eval_refuses_options_that_cannot_work(option, value, words, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(["eval", "--baseline", option, value, *SETS], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, words)


def test_merge_into_a_file_is_refused_before_any_weight_loads(checkpoint, tmp_path, capsys, monkeypatch, weight_loads):
    target = tmp_path / "merged"
    target.write_text("not a folder")
    code, out = main_in_process(
        ["merge", "--checkpoint", str(checkpoint), "--output-dir", str(target), *SETS], capsys, monkeypatch
    )
    assert code == 2
    assert_one_error_line(out, f"--output-dir {target}: is a file, not a folder")
    assert weight_loads == []


def test_merge_onto_a_read_only_file_system_is_refused(checkpoint, tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("needs unshare -m (root)")
    ro = tmp_path / "ro"
    ro.mkdir()
    cmd = " ".join(
        f"'{a}'"
        for a in [
            sys.executable,
            "-m",
            "searchgrpo",
            "merge",
            "--checkpoint",
            str(checkpoint),
            "--output-dir",
            str(ro / "merged"),
            *SETS,
        ]
    )
    proc = subprocess.run(
        ["unshare", "-m", "bash", "-c", f"mount -t tmpfs -o ro,size=64k tmpfs '{ro}' && {cmd}"],
        capture_output=True,
        text=True,
        timeout=CEILING_S,
        env=cli_env(),
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert_one_error_line(
        proc.stdout + proc.stderr,
        f"--output-dir {ro / 'merged'}: cannot write there (Read-only file system); give a writable folder",
    )


def test_an_adapter_that_does_not_fit_the_base_is_refused_before_any_weight_loads(
    checkpoint, tmp_path, capsys, monkeypatch, weight_loads
):
    other = ensure_tiny_model(tmp_path / "tiny-32", hidden_size=32)  # the same layers, half the width
    ckpt = tmp_path / "step-000001"
    shutil.copytree(checkpoint, ckpt)
    state = json.loads((ckpt / "trainer_state.json").read_text())
    del state["base_model"]  # an adapter from elsewhere: only its shapes can tell
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    code, out = main_in_process(
        [
            "merge",
            "--checkpoint",
            str(ckpt),
            "--output-dir",
            str(tmp_path / "merged"),
            *SETS,
            "--set",
            f"model.base={other}",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 2, out
    assert_one_error_line(
        out,
        f"{ckpt}: the adapter's model.layers.0.",
        "which does not fit the base model's",
        "was it trained on another model?",
    )
    assert weight_loads == []


def test_a_killed_merge_leaves_no_temporary_folder_after_the_next_run(checkpoint, tmp_path, capsys, monkeypatch):
    out_dir = tmp_path / "merged"
    args = ["merge", "--checkpoint", str(checkpoint), "--output-dir", str(out_dir), "--dtype", "float32", *SETS]
    proc = spawn(*args, cwd=tmp_path, fault="slow_merge=60")
    wait_until(
        lambda: out_dir.is_dir() and any(".tmp-" in p.name for p in out_dir.iterdir()),
        "the merge's temporary output folder",
        proc=proc,
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    leftover = [p.name for p in out_dir.iterdir() if ".tmp-" in p.name]
    assert leftover  # what a kill leaves
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(args, capsys, monkeypatch)
    assert code == 0, out
    assert f"warning: removed {out_dir / leftover[0]}, left by a merge that was killed" in out
    assert [p.name for p in out_dir.iterdir()] == ["tiny-grpo-step1"]
    assert (out_dir / "tiny-grpo-step1" / "config.json").is_file()

"""A run folder is a run folder, and resume compares with what the run really ran.

A folder is a run only if it holds our run markers (config.yaml beside config_history.jsonl), not
any config.yaml (a checkout of this project has one); a refused start or resume writes nothing
there, not even run.lock. A hand edit of runs/<id>/config.yaml is not what the run ran: resume
compares with the history's last entry, and a changed LoRA rank is named against the newest
checkpoint's own adapter_config.json.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT
from tests.helpers.faults import assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A folder that looks like a checkout of this project: its config.yaml, README and package."""
    folder = tmp_path / "checkout"
    (folder / "searchgrpo").mkdir(parents=True)
    shutil.copy(ROOT / "config.yaml", folder / "config.yaml")
    (folder / "README.md").write_text("# searchgrpo\n")
    (folder / "searchgrpo" / "__init__.py").write_text("")
    return folder


def test_resume_into_a_checkout_is_refused_and_writes_nothing(checkout, capsys, monkeypatch):
    before = snapshot(checkout)
    monkeypatch.chdir(checkout)
    code, out = main_in_process(["train", "--headless", "--resume", "--run-dir", "."], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, ".: not a run folder (a run holds config.yaml beside config_history.jsonl)")
    assert snapshot(checkout) == before  # no run.lock, no checkpoints, config.yaml untouched


def test_a_new_run_into_a_folder_that_holds_other_things_is_refused(checkout, capsys, monkeypatch):
    before = snapshot(checkout)
    monkeypatch.chdir(checkout)
    code, out = main_in_process(["train", "--headless", "--run-dir", ".", *SETS], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, ".: the folder holds files that are not a run (README.md, config.yaml, searchgrpo)")
    assert snapshot(checkout) == before


@pytest.mark.parametrize("name", ["..", ".", "../elsewhere", "a/b", ""])
def test_a_run_name_that_is_not_a_folder_name_is_refused(name, checkout, capsys, monkeypatch):
    before = snapshot(checkout)
    monkeypatch.chdir(checkout)
    code, out = main_in_process(
        [
            "train",
            "--headless",
            *SETS,
            "--set",
            f"train.output_dir={checkout / 'runs'}",
            "--set",
            f"train.run_name={name}",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 2
    assert_one_error_line(out, "train.run_name =", "is out of range: expected a folder name")
    assert snapshot(checkout) == before and not (checkout / "runs").exists()


# --------------------------------------------------------------------------- resume against the history


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    from searchgrpo.train.trainer import Trainer
    from tests.helpers.tiny import tiny_config

    root = tmp_path_factory.mktemp("identity")
    return Trainer(tiny_config(root, "train.max_steps=1", "train.run_name=r")).train().run_dir


@pytest.fixture
def run(trained_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "runs" / "r"
    shutil.copytree(trained_run, copy)
    return copy


def resume(run: Path, capsys, monkeypatch, *extra: str) -> tuple[int, str]:
    monkeypatch.chdir(run.parent)
    return main_in_process(["train", "--headless", "--resume", "--run-dir", str(run), *extra], capsys, monkeypatch)


def test_a_hand_edited_config_yaml_is_compared_with_what_the_run_ran(run, capsys, monkeypatch):
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["grpo"]["num_generations"] == 3
    config["grpo"]["num_generations"] = 5
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    lock_before = (run / "run.lock").stat().st_mtime_ns
    code, out = resume(run, capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(
        out,
        "--resume would change what the run optimises: grpo.num_generations 3 -> 5",
        "config.yaml was edited after the run last started",
        "--allow-changes",
    )
    assert (run / "run.lock").stat().st_mtime_ns == lock_before  # refused before the lock


def test_a_changed_lora_rank_is_named_even_with_allow_changes(run, capsys, monkeypatch):
    code, out = resume(run, capsys, monkeypatch, "--set", "lora.r=8", "--allow-changes")
    assert code == 2
    line = assert_one_error_line(out, "lora.r changed (16 -> 8)", "resume with --set lora.r=16")
    assert "size mismatch" not in line


def test_an_unchanged_resume_still_goes_on(run, capsys, monkeypatch):
    code, out = resume(run, capsys, monkeypatch, "--set", "train.max_steps=2", "--allow-changes")
    assert code == 0, out
    assert (run / "checkpoints" / "step-000002").is_dir()

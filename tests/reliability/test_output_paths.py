"""Writing over what is not ours: every path a command writes (eval's report, merge's folders,
collect's and demo-world's folders) is checked before any work (`fileio.claim_output`). A device, a
FIFO, a symbolic link, a folder where a file goes, a file where a folder goes and a folder holding
what is not ours are refused in one line; an existing file that is not one of our reports needs
`--overwrite`; one of our reports is replaced. Numbers given on the command line are held to the
bounds of the config keys they stand for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import transformers

from tests.helpers.faults import assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS


@pytest.fixture
def weight_loads(monkeypatch: pytest.MonkeyPatch) -> list:
    """Counts model weight loads (the real loader still runs)."""
    calls: list = []
    real = transformers.AutoModelForCausalLM.from_pretrained.__func__

    def counted(cls, *args, **kwargs):
        calls.append(args[:1])
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", classmethod(counted))
    return calls


def eval_to(output: Path, capsys, monkeypatch, *extra: str) -> tuple[int, str]:
    monkeypatch.chdir(output.parent if output.parent.is_dir() else Path("/"))
    return main_in_process(
        ["eval", "--baseline", "--limit", "1", "--output", str(output), *extra, *SETS], capsys, monkeypatch
    )


# --------------------------------------------------------------------------- eval --output


def test_eval_refuses_a_character_device(tmp_path, capsys, monkeypatch, weight_loads):
    code, out = eval_to(Path("/dev/null"), capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "--output /dev/null: is a character device, not a regular file")
    assert weight_loads == []
    assert Path("/dev/null").is_char_device()


def test_eval_refuses_a_fifo_without_opening_it(tmp_path, capsys, monkeypatch, weight_loads):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, out = eval_to(fifo, capsys, monkeypatch)  # opening a FIFO to write would block forever
    assert code == 2
    assert_one_error_line(out, f"--output {fifo}: is a FIFO (named pipe), not a regular file")
    assert fifo.is_fifo() and weight_loads == []


@pytest.mark.parametrize("target", ["/dev/stdout", "data.json"])
def test_eval_refuses_a_symbolic_link_and_leaves_its_target(target, tmp_path, capsys, monkeypatch, weight_loads):
    if target == "data.json":
        (tmp_path / target).write_text('{"mine": 1}\n')
        target = str(tmp_path / target)
    link = tmp_path / "report.json"
    link.symlink_to(target)
    code, out = eval_to(link, capsys, monkeypatch, "--overwrite")  # --overwrite does not make a link ours
    assert code == 2
    assert_one_error_line(out, f"--output {link}: is a symbolic link (to {target})")
    assert link.is_symlink() and weight_loads == []
    if target.endswith("data.json"):
        assert Path(target).read_text() == '{"mine": 1}\n'


def test_eval_refuses_a_folder_before_scoring(tmp_path, capsys, monkeypatch, weight_loads):
    folder = tmp_path / "reports"
    folder.mkdir()
    code, out = eval_to(folder, capsys, monkeypatch)
    assert code == 2
    line = assert_one_error_line(out, f"--output {folder}: is a folder; give the path of a file")
    assert "IsADirectoryError" not in line and weight_loads == []


def test_eval_refuses_a_path_under_a_file(tmp_path, capsys, monkeypatch, weight_loads):
    (tmp_path / "notes.txt").write_text("x")
    code, out = eval_to(tmp_path / "notes.txt" / "report.json", capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "--output", "notes.txt")
    assert weight_loads == []


def test_eval_needs_overwrite_for_a_file_that_is_not_a_report(tmp_path, capsys, monkeypatch):
    data = tmp_path / "results.json"
    data.write_text('{"experiment": "keep me"}\n')
    code, out = eval_to(data, capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, f"--output {data}: exists and is not a searchgrpo eval report", "--overwrite")
    assert data.read_text() == '{"experiment": "keep me"}\n'
    code, out = eval_to(data, capsys, monkeypatch, "--overwrite")
    assert code == 0, out
    assert json.loads(data.read_text())["format"].startswith("searchgrpo-eval")


def test_eval_replaces_its_own_report(tmp_path, capsys, monkeypatch):
    report = tmp_path / "report.json"
    code, out = eval_to(report, capsys, monkeypatch)
    assert code == 0, out
    first = json.loads(report.read_text())["created"]
    code, out = eval_to(report, capsys, monkeypatch)  # no --overwrite needed: it is our report
    assert code == 0, out
    assert json.loads(report.read_text())["created"] > first


# --------------------------------------------------------------------------- merge, collect, demo-world


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from searchgrpo.train.checkpoints import list_checkpoints
    from searchgrpo.train.trainer import Trainer
    from tests.helpers.tiny import tiny_config

    root = tmp_path_factory.mktemp("output-paths")
    summary = Trainer(tiny_config(root, "train.max_steps=1", "train.run_name=o")).train()
    return list_checkpoints(summary.run_dir)[0].path


def test_merge_never_replaces_a_folder_that_is_not_a_merged_model(
    checkpoint, tmp_path, capsys, monkeypatch, weight_loads
):
    mine = tmp_path / "merged" / "tiny-grpo-step1"
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("years of work")
    code, out = main_in_process(
        ["merge", "--checkpoint", str(checkpoint), "--output-dir", str(tmp_path / "merged"), "--overwrite", *SETS],
        capsys,
        monkeypatch,
    )
    assert code == 2
    assert_one_error_line(out, f"--output-dir {mine}: the folder holds files that are not a merged model folder")
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert weight_loads == []


@pytest.mark.parametrize("kind", ["device", "symlink"])
def test_merge_refuses_an_output_dir_that_is_not_a_folder(kind, checkpoint, tmp_path, capsys, monkeypatch):
    target = Path("/dev/null")
    if kind == "symlink":
        (tmp_path / "real").mkdir()
        target = tmp_path / "link"
        target.symlink_to(tmp_path / "real")
    code, out = main_in_process(
        ["merge", "--checkpoint", str(checkpoint), "--output-dir", str(target), *SETS], capsys, monkeypatch
    )
    assert code == 2
    words = "is a character device, not a folder" if kind == "device" else "is a symbolic link"
    assert_one_error_line(out, f"--output-dir {target}: {words}")


def test_collect_refuses_a_folder_that_holds_other_things(tmp_path, capsys, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my project")
    code, out = main_in_process(["collect", "--out", str(project), "--limit", "1", *SETS], capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, f"--out {project}: the folder holds files that are not a collect folder")
    assert sorted(p.name for p in project.iterdir()) == ["README.md"]


@pytest.mark.parametrize("kind", ["file", "device", "symlink"])
def test_collect_refuses_an_out_that_is_not_a_folder(kind, tmp_path, capsys, monkeypatch):
    target = {"file": tmp_path / "corpus.txt", "device": Path("/dev/null"), "symlink": tmp_path / "link"}[kind]
    if kind == "file":
        target.write_text("data")
    if kind == "symlink":
        target.symlink_to(tmp_path)
    code, out = main_in_process(["collect", "--out", str(target), "--limit", "1", *SETS], capsys, monkeypatch)
    assert code == 2
    words = {"file": "is a file, not a folder", "device": "is a character device", "symlink": "is a symbolic link"}
    assert_one_error_line(out, f"--out {target}: {words[kind]}")
    if kind == "file":
        assert target.read_text() == "data"


def test_collect_resumes_its_own_folder(tmp_path, capsys, monkeypatch):
    out_dir = tmp_path / "c"
    for _ in range(2):
        code, out = main_in_process(["collect", "--out", str(out_dir), "--limit", "1", *SETS], capsys, monkeypatch)
        assert code == 0, out
    assert (out_dir / "collect.json").is_file() and (out_dir / "traces").is_dir()


def test_demo_world_into_an_empty_folder_writes_it(tmp_path, capsys, monkeypatch):
    """It used to print the paths and write nothing (the rename onto the folder was taken for
    another process having finished first)."""
    out_dir = tmp_path / "world"
    out_dir.mkdir()
    code, out = main_in_process(
        ["demo-world", "--out", str(out_dir), "--questions", "3", "--distractors", "2"], capsys, monkeypatch
    )
    assert code == 0, out
    assert (out_dir / "corpus.jsonl").is_file() and (out_dir / "traces").is_dir()


@pytest.mark.parametrize("kind", ["file", "device", "non-empty"])
def test_demo_world_refuses_what_is_in_the_way(kind, tmp_path, capsys, monkeypatch):
    target = {"file": tmp_path / "x", "device": Path("/dev/null"), "non-empty": tmp_path}[kind]
    if kind == "file":
        target.write_text("keep")
    if kind == "non-empty":
        (target / "notes.md").write_text("keep")
    code, out = main_in_process(["demo-world", "--out", str(target), "--questions", "3"], capsys, monkeypatch)
    assert code == 2
    words = {
        "file": "is a file, not a folder",
        "device": "is a character device, not a folder",
        "non-empty": "the folder holds files that are not a demo world",
    }
    assert_one_error_line(out, f"--out {target}: {words[kind]}")


# --------------------------------------------------------------------------- numbers out of range


@pytest.mark.parametrize(
    "args, words",
    [
        (["demo-world", "--out", "w", "--top-k", "0"], "--top-k 0 is out of range: expected >= 1 and <= 10000"),
        (
            ["demo-world", "--out", "w", "--questions", "100000000"],
            "--questions 100000000 is out of range: expected >= 1 and <= 1000000",
        ),
        (["demo-world", "--out", "w", "--distractors", "-1"], "--distractors -1 is out of range: expected >= 0"),
        (["train", "--headless", "--epochs", "0"], "--epochs 0 is out of range: expected >= 1"),
        (["train", "--headless", "--num-processes", "0"], "--num-processes 0 is out of range: expected >= 1"),
        (["collect", "--out", "c", "--max-rounds", "0"], "--max-rounds 0 is out of range: expected in [1, 50]"),
        (["collect", "--out", "c", "--limit", "0"], "--limit 0 is out of range: expected >= 1"),
    ],
)
def test_command_line_numbers_are_held_to_their_bounds(args, words, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process([*args, *SETS] if args[0] != "demo-world" else args, capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, words)
    assert list(tmp_path.iterdir()) == []  # nothing written

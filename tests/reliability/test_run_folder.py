"""One writer per run folder, and an honest --resume, through the real CLI.

A second trainer on a run that is being written is refused naming the holder; the lock of a killed
trainer is taken over with a notice; two runs that start in the same second get two folders; a run
that fails its checks leaves no folder and prints its error once. `--resume` refuses changes that
alter the optimisation or the data unless `--allow-changes` (then recorded), is a no-op for a
finished run, and announces a fall back past a damaged checkpoint, naming both.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

import searchgrpo.train.trainer as trainer_module
from searchgrpo.train.checkpoints import list_checkpoints
from tests.helpers.faults import assert_checkpoint_loads, assert_one_error_line, main_in_process, spawn, tiny_world
from tests.helpers.tiny import SETS
from tests.helpers.waiting import wait_until


def train_args(*extra: str) -> list[str]:
    return ["train", "--headless", *SETS, "--set", "train.run_name=r", *extra]


def history(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "config_history.jsonl").read_text().splitlines()]


def test_a_second_trainer_is_refused_and_a_dead_ones_lock_taken_over(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = train_args("--set", "train.max_steps=40", "--set", "train.save_every=1")
    proc = spawn(*args, cwd=tmp_path, fault="slow_save=0.3")
    run = tmp_path / "runs" / "r"
    wait_until(lambda: list_checkpoints(run), "the first checkpoint", proc=proc)
    code, out = main_in_process([*args, "--resume"], capsys, monkeypatch)
    assert code == 2, out
    assert_one_error_line(
        out,
        f"{Path('runs/r')}: another trainer is writing this run (pid {proc.pid} on ",
        ", started ",
        "two writers would mix their checkpoints",
    )
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    done = list_checkpoints(run)[-1].step
    code, out = main_in_process(
        [
            *train_args("--set", f"train.max_steps={done + 1}", "--set", "train.save_every=1"),
            "--resume",
            "--allow-changes",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, out
    assert f"took over the lock of pid {proc.pid} on " in out and "which ended without releasing it" in out
    assert list_checkpoints(run)[-1].step == done + 1
    assert (run / "run.lock").read_text() == ""  # released at the end


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(trainer_module, "new_run_id", lambda: "20250101-120000")  # both runs start "in the same second"
    args = ["train", "--headless", *SETS, "--set", "train.max_steps=1"]
    for _ in range(2):
        code, out = main_in_process(args, capsys, monkeypatch)
        assert code == 0, out
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert runs == ["20250101-120000", "20250101-120000-2"]
    assert all(len(list_checkpoints(tmp_path / "runs" / r)) == 1 for r in runs)


@pytest.mark.parametrize(
    "override, words",
    [
        ("train.states_per_step=10000", ["train states, fewer than train.states_per_step = 10000"]),
        ("model.base=./no-such-model", ["model.base: folder no-such-model not found"]),
        ("lora.r=100", ["lora.r = 100 is above the hidden size of tiny (64)"]),
        (
            "grpo.max_prompt_tokens=4090",
            ["grpo.max_prompt_tokens + grpo.max_new_tokens = 4090 + 12", "context of tiny (4096 tokens)"],
        ),
    ],
)
def test_a_run_that_fails_its_checks_leaves_no_folder_and_says_so_once(override, words, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out = main_in_process(["train", "--headless", *SETS, "--set", override], capsys, monkeypatch)
    assert code == 2, out
    line = assert_one_error_line(out, *words)
    assert out.count(line[len("error: ") :]) == 1, out  # not also as a "run failed" line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_new_run_never_takes_a_folder_that_holds_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main_in_process(train_args("--set", "train.max_steps=1"), capsys, monkeypatch)[0] == 0
    before = (tmp_path / "runs" / "r" / "events.jsonl").read_bytes()
    code, out = main_in_process(train_args("--set", "train.max_steps=1"), capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "runs/r already holds a run; continue it with --resume")
    assert (tmp_path / "runs" / "r" / "events.jsonl").read_bytes() == before


def test_resume_refuses_optimisation_changes_unless_allowed_and_records_them(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "r"
    assert (
        main_in_process(train_args("--set", "train.max_steps=2", "--set", "train.save_every=1"), capsys, monkeypatch)[0]
        == 0
    )
    for change, words in (
        ("train.lr=0.5", "train.lr 0.01 -> 0.5"),
        ("grpo.num_generations=4", "grpo.num_generations 3 -> 4"),
        ("reward.new_important=2", "reward.new_important 1.0 -> 2.0"),
        ("train.max_steps=3", "train.max_steps 2 -> 3"),
    ):
        code, out = main_in_process(
            [*train_args("--set", "train.max_steps=2", "--set", change), "--resume"], capsys, monkeypatch
        )
        assert code == 2, out
        assert_one_error_line(out, "--resume would change what the run optimises", words, "--allow-changes")
    assert len(history(run)) == 1 and [c.step for c in list_checkpoints(run)] == [1, 2]
    code, out = main_in_process(
        [
            *train_args("--set", "train.max_steps=3", "--set", "train.save_every=1", "--set", "train.eval_every=1"),
            "--resume",
            "--allow-changes",
        ],
        capsys,
        monkeypatch,
    )
    assert code == 0, out
    assert "resuming under a changed config (--allow-changes, recorded): train.max_steps 2 -> 3" in out
    entries = history(run)
    assert [e["start_step"] for e in entries] == [0, 2] and entries[1]["allowed_changes"] is True
    assert {c["key"] for c in entries[1]["changes"]} == {"train.max_steps", "train.eval_every"}
    assert entries[1]["config"]["train"]["max_steps"] == 3 and list_checkpoints(run)[-1].step == 3


def test_resume_refuses_changed_data_unless_allowed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    traces, corpus = tiny_world(tmp_path)
    data = ["--set", f"data.traces={traces}", "--set", f"data.corpus={corpus}"]
    assert main_in_process(train_args(*data, "--set", "train.max_steps=1"), capsys, monkeypatch)[0] == 0
    lines = corpus.read_text().splitlines()
    doc = json.loads(lines[0])
    doc["text"] += " An edit."
    corpus.write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n")
    resume = [*train_args(*data, "--set", "train.max_steps=1"), "--resume"]
    code, out = main_in_process(resume, capsys, monkeypatch)
    assert code == 2
    assert_one_error_line(out, "the corpus changed since the run last started", f"data.corpus = {corpus}")
    code, out = main_in_process([*resume, "--allow-changes"], capsys, monkeypatch)
    assert code == 0, out
    assert (
        "resuming on changed data: the corpus changed since the run last started" in out
        and "already finished at step 1" in out
    )


def test_a_finished_run_resumed_is_a_no_op_that_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "r"
    args = train_args("--set", "train.max_steps=2", "--set", "train.eval_every=2", "--set", "train.eval_states=2")
    assert main_in_process(args, capsys, monkeypatch)[0] == 0
    files = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    code, out = main_in_process([*args, "--resume"], capsys, monkeypatch)
    assert code == 0, out
    assert (
        "run r already finished at step 2 of 2; nothing to do" in out and "eval" not in out.lower().split("nothing")[0]
    )
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == files  # no event, checkpoint or history added


def test_a_fall_back_past_a_damaged_checkpoint_is_announced(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "r"
    assert (
        main_in_process(train_args("--set", "train.max_steps=3", "--set", "train.save_every=1"), capsys, monkeypatch)[0]
        == 0
    )
    (run / "checkpoints" / "step-000003" / "adapter" / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    code, out = main_in_process(
        [*train_args("--set", "train.max_steps=4", "--set", "train.save_every=1"), "--resume", "--allow-changes"],
        capsys,
        monkeypatch,
    )
    assert code == 0, out
    assert "step-000003 (" in out and "damaged; resuming from the older step-000002 instead" in out
    assert [c.step for c in list_checkpoints(run)][-2:] == [3, 4]
    assert_checkpoint_loads(list_checkpoints(run)[-1])

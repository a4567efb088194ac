"""Evaluation that is held out: `eval --checkpoint` under another split (or on a question set its
run trained on) names how many eval questions the checkpoint trained on and refuses without
`--allow-overlap`; the report records the overlap, or that it could not be told.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import transformers

from searchgrpo.config import load_config
from searchgrpo.data.states import split_by_question
from searchgrpo.world import load_dataset
from tests.helpers.faults import assert_one_error_line, main_in_process
from tests.helpers.tiny import SETS, TINY_OVERRIDES


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    from searchgrpo.train.trainer import Trainer
    from tests.helpers.tiny import tiny_config

    root = tmp_path_factory.mktemp("held-out")
    return Trainer(tiny_config(root, "train.max_steps=1", "train.run_name=h")).train().run_dir


@pytest.fixture
def weight_loads(monkeypatch):
    calls: list = []
    real = transformers.AutoModelForCausalLM.from_pretrained.__func__

    def counted(cls, *args, **kwargs):
        calls.append(args[:1])
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", classmethod(counted))
    return calls


def checkpoint_of(run: Path) -> Path:
    return run / "checkpoints" / "step-000001"


def expected_overlap(split_seed: int) -> int:
    """Questions in the eval split under `split_seed` that the run (split seed 0) trained on."""
    ds = load_dataset(load_config(None, list(TINY_OVERRIDES)))
    states = [*ds.train, *ds.eval]
    trained = {s.question_id for s in split_by_question(states, 0.2, 0)[0]}
    held = {s.question_id for s in split_by_question(states, 0.2, split_seed)[1]}
    return len(trained & held)


def evaluate(ckpt: Path, tmp_path: Path, capsys, monkeypatch, *extra: str) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    return main_in_process(
        ["eval", "--checkpoint", str(ckpt), "--output", str(tmp_path / "r.json"), *SETS, *extra], capsys, monkeypatch
    )


def test_another_split_seed_is_refused_before_any_weight_loads(run, tmp_path, capsys, monkeypatch, weight_loads):
    overlap = expected_overlap(1)
    assert overlap > 0  # the case the issue found: most "held-out" questions trained on
    code, out = evaluate(checkpoint_of(run), tmp_path, capsys, monkeypatch, "--set", "data.split_seed=1")
    assert code == 2
    assert_one_error_line(
        out,
        f"{overlap} of the",
        f"eval questions are training questions of its run {run}",
        "--set data.split_seed=0 --set data.eval_fraction=0.2",
        "--allow-overlap",
    )
    assert weight_loads == [] and not (tmp_path / "r.json").exists()


def test_allow_overlap_scores_and_the_report_records_it(run, tmp_path, capsys, monkeypatch):
    code, out = evaluate(
        checkpoint_of(run),
        tmp_path,
        capsys,
        monkeypatch,
        "--set",
        "data.split_seed=1",
        "--allow-overlap",
        "--limit",
        "2",
    )
    assert code == 0, out
    report = json.loads((tmp_path / "r.json").read_text())
    held = report["held_out"]["step-000001"]
    assert held["known"] and held["run"] == str(run) and held["overlap_questions"] >= 1
    assert "scored anyway (--allow-overlap)" in " ".join(out.split())


def test_the_runs_own_split_is_held_out(run, tmp_path, capsys, monkeypatch):
    code, out = evaluate(checkpoint_of(run), tmp_path, capsys, monkeypatch, "--limit", "2")
    assert code == 0, out
    held = json.loads((tmp_path / "r.json").read_text())["held_out"]["step-000001"]
    assert held["known"] and held["overlap_questions"] == 0


def test_a_run_older_than_the_record_is_split_again_from_its_history(run, tmp_path, capsys, monkeypatch):
    old = tmp_path / "runs" / "h"
    shutil.copytree(run, old)
    history = old / "config_history.jsonl"
    entries = [json.loads(line) for line in history.read_text().splitlines()]
    for entry in entries:
        entry.pop("train_questions")
    history.write_text("".join(json.dumps(e) + "\n" for e in entries))
    code, out = evaluate(checkpoint_of(old), tmp_path, capsys, monkeypatch, "--set", "data.split_seed=1")
    assert code == 2
    assert_one_error_line(out, f"{expected_overlap(1)} of the", "training questions of its run")


def test_a_checkpoint_outside_any_run_is_scored_with_a_notice(run, tmp_path, capsys, monkeypatch):
    loose = tmp_path / "loose" / "step-000001"
    shutil.copytree(checkpoint_of(run), loose)
    code, out = evaluate(loose, tmp_path, capsys, monkeypatch, "--limit", "1")
    assert code == 0, out
    assert "cannot tell whether the eval questions are held out (not inside a run's checkpoints/ folder)" in " ".join(
        out.split()
    )
    held = json.loads((tmp_path / "r.json").read_text())["held_out"]["step-000001"]
    assert held["known"] is False and held["run"] is None

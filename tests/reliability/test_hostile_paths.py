"""Paths from the data: hostile question and checkpoint ids (`../`, absolute names, separators) write
nothing outside the collect folder, the run or the merge's output folder (the rest of the security
suite: `test_security.py`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from searchgrpo.data.states import load_states
from searchgrpo.episodes.collect import collect_to_folder, question_dir_name
from searchgrpo.errors import UserError
from searchgrpo.train.checkpoints import latest_checkpoint
from tests.helpers.tiny import tiny_config

# --------------------------------------------------------------------------- paths from the data


HOSTILE_IDS = [
    "../../escape",
    "/abs/evil",
    "..",
    ".",
    "a/../../b",
    "~root",
    "C:\\evil\\x",
    "nul\u0000byte",
    "a/b",
    "a_b",
    "a b",
    "question",
]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_hostile_question_ids_stay_inside_the_collect_folder(tmp_path):
    """Question ids are used to name folders: none may climb out, and ids that share a safe name
    (`a/b`, `a_b`, `a b`; `..` and `.` both fall back to `question`) must all be collected."""
    records = [
        {
            "id": qid,
            "question": f"Who founded firm {i}?",
            "answers": ["x"],
            "docs": [
                {"docid": f"d{i}", "title": f"Firm {i}", "text": f"Firm {i} was founded by Ada.", "gold": True},
                {"docid": f"e{i}", "title": "Ada", "text": "Ada was born in Paris."},
            ],
        }
        for i, qid in enumerate(HOSTILE_IDS)
    ]
    work = tmp_path / "work"
    work.mkdir()
    source = work / "q.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    around = tmp_path.parent
    home = Path(os.environ["SEARCHGRPO_HOME"]).resolve()  # the cache root (search indexes) may grow
    before = _tree(around)
    out = work / "deep" / "out"
    result = collect_to_folder(tiny_config(tmp_path), str(source), out)
    assert result.stats.written == len(HOSTILE_IDS) and not result.issues
    created = {c for c in _tree(around) - before if not (around / c).resolve().is_relative_to(home)}
    assert created and all(c.startswith(str((work / "deep").relative_to(around))) for c in created), created
    assert not Path("/abs").exists()
    for qid in HOSTILE_IDS:
        name = question_dir_name(qid)
        assert "/" not in name and name not in ("", ".", "..")
    loaded = load_states(out / "traces", min_clues_per_round=1)
    assert {s.question_id for s in loaded.states} <= set(HOSTILE_IDS) and not loaded.issues.issues
    metas = {json.loads(p.read_text())["question_id"] for p in (out / "traces").glob("*/run_001/meta.json")}
    assert metas == set(HOSTILE_IDS)  # every id collected once, none lost to a shared folder name
    again = collect_to_folder(tiny_config(tmp_path), str(source), out)
    assert (again.stats.written, again.stats.skipped_existing) == (0, len(HOSTILE_IDS))


def test_hostile_ids_in_checkpoints_write_nothing_outside_the_run(tmp_path, monkeypatch):
    """Training and eval on checkpoints whose question ids are paths write only under the run
    folder, the eval report and the cache root."""
    from searchgrpo.train.trainer import Trainer
    from tests.helpers.faults import tiny_world

    ckpts, corpus = tiny_world(tmp_path)
    for i, meta in enumerate(sorted(ckpts.glob("*/run_001/meta.json"))):
        data = json.loads(meta.read_text())
        data["question_id"] = ["../../../escape", "/abs/evil", "..", "~/x"][i % 4] + str(i)
        meta.write_text(json.dumps(data))
    monkeypatch.chdir(tmp_path)
    around = tmp_path.parent
    home = Path(os.environ["SEARCHGRPO_HOME"]).resolve()
    before = _tree(around)
    cfg = tiny_config(
        tmp_path,
        f"data.traces={ckpts}",
        f"data.corpus={corpus}",
        "train.max_steps=2",
        "train.save_every=1",
        "train.eval_every=2",
        "train.eval_states=2",
        "train.run_name=r",
    )
    summary = Trainer(cfg).train()
    assert summary.step == 2
    from searchgrpo.evaluate import run_eval
    from searchgrpo.evaluate.inputs import EvalRequest

    run_eval(
        cfg,
        EvalRequest(
            checkpoints=[str(latest_checkpoint(summary.run_dir).path)], limit=2, output=str(tmp_path / "report.json")
        ),
    )
    created = {c for c in _tree(around) - before if not (around / c).resolve().is_relative_to(home)}
    allowed = (str((tmp_path / "runs").relative_to(around)), str((tmp_path / "report.json").relative_to(around)))
    assert created and all(c.startswith(allowed) for c in created), sorted(created)
    assert not Path("/abs").exists()


def test_merge_outputs_stay_in_the_output_folder_whatever_the_checkpoint_says(tmp_path):
    from searchgrpo.export.merge import MergeRequest, plan

    cfg = tiny_config(tmp_path)
    out = tmp_path / "merged"
    checkpoints = []
    for i, state in enumerate(
        [
            {"step": "../../../etc/x"},
            {"step": -5},
            {"step": 1e999},
            {"step": [1]},
            ["not", "an", "object"],
            {"step": 7, "base_model": "tiny"},
        ]
    ):
        ckpt = tmp_path / f"c{i}" / f"step-{i:06d}"
        (ckpt / "adapter").mkdir(parents=True)
        (ckpt / "adapter" / "adapter_config.json").write_text("{}")
        (ckpt / "adapter" / "adapter_model.safetensors").write_bytes(b"")
        (ckpt / "trainer_state.json").write_text(json.dumps(state).replace("Infinity", "1e999"))
        checkpoints.append(str(ckpt))
    jobs = plan(cfg, MergeRequest(checkpoints, output_dir=str(out)), "tiny")
    assert [j.output.name for j in jobs] == [
        "tiny-grpo-step0",
        "tiny-grpo-step-5",
        "tiny-grpo-step2",
        "tiny-grpo-step3",
        "tiny-grpo-step4",
        "tiny-grpo-step7",
    ]
    assert all(j.output.resolve().parent == out.resolve() for j in jobs)
    (Path(checkpoints[0]) / "trainer_state.json").write_text("{broken")
    with pytest.raises(UserError, match=r"trainer_state.json: not valid JSON"):
        plan(cfg, MergeRequest(checkpoints[:1], output_dir=str(out)), "tiny")

"""The trackers tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/test_trackers.py`."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from searchgrpo.config import load_config
from searchgrpo.events import LogMessage
from tests.helpers import ROOT
from tests.helpers.tiny import tiny_config
from tests.helpers.waiting import CEILING_S
from tests.unit.test_trackers import expected, needs, play, wandb_records


def test_wandb_offline_run_holds_the_steps_and_a_completions_table(tmp_path, monkeypatch):
    needs("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    cfg = load_config(None, ["train.report_to=[wandb]"])
    assert play(cfg, tmp_path) == []
    wandb = needs("wandb")
    wandb.teardown()  # the run file is written by wandb's service process: wait until it has ended
    (path,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "run-*.wandb"))
    history = [
        {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in r.history.item}
        for r in wandb_records(path)
        if r.WhichOneof("record_type") == "history"
    ]
    steps = {h["_step"]: h for h in history}
    assert sorted(steps) == [1, 2, 3, 4]
    for step in range(1, 5):
        assert steps[step]["train/reward"] == pytest.approx(expected(step)["train/reward"])
        assert steps[step]["completions/_type"] == "table-file" and steps[step]["completions/nrows"] == 8
    assert steps[2]["eval/reward_mean"] == pytest.approx(0.2)
    (run,) = [r.run for r in wandb_records(path) if r.WhichOneof("record_type") == "run"]
    assert run.display_name == "20260101-000000"


def test_trackio_local_database_holds_the_steps(tmp_path):
    needs("trackio")
    # trackio fixes its folder when imported, so it runs in a process of its own.
    script = (
        "from pathlib import Path; from searchgrpo.config import load_config; import tests.unit.test_trackers as t\n"
        "cfg = load_config(None, ['train.report_to=[trackio]', 'train.tracker_project=grpo-tests'])\n"
        "assert t.play(cfg, Path('.')) == []\n"
        "from trackio.sqlite_storage import SQLiteStorage\n"
        "import json; print('LOGS', json.dumps(SQLiteStorage.get_logs('grpo-tests', '20260101-000000')))\n"
    )
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=CEILING_S
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("LOGS ")]
    logs = json.loads(line[5:])
    rewards = {row["step"]: row["train/reward"] for row in logs if "train/reward" in row}
    assert rewards == {s: pytest.approx(expected(s)["train/reward"]) for s in range(1, 5)}


def test_training_feeds_the_trackers_from_the_same_events_as_events_jsonl(tmp_path, monkeypatch):
    needs("tensorboard")
    needs("mlflow")
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from searchgrpo import runs
    from searchgrpo.sinks import read_events

    uri = f"file:{tmp_path / 'mlruns'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    cfg = tiny_config(tmp_path, "train.max_steps=2", "train.run_name=tracked", "train.report_to=[tensorboard, mlflow]")
    seen: list = []
    runs.train(cfg, seen.append)
    run_dir = tmp_path / "runs" / "tracked"
    steps = [e for e in read_events(run_dir / "events.jsonl") if type(e).__name__ == "StepFinished"]
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == [
        (e.step, pytest.approx(e.metrics["loss/total"], rel=1e-6, abs=1e-12)) for e in steps
    ]
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("searchgrpo").experiment_id])
    grad = client.get_metric_history(run.info.run_id, "train/grad_norm")
    assert [(m.step, m.value) for m in grad] == [(e.step, pytest.approx(e.metrics["grad/norm"])) for e in steps]
    assert not [e for e in seen if isinstance(e, LogMessage) and "stopped logging" in e.text]

"""The experiment trackers of `train.report_to`, each run offline and read back from what it wrote:
TensorBoard's event file, W&B's offline run file, MLflow's file store, trackio's local database.
A tracker whose package is not installed is skipped with the extra that brings it."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from searchgrpo.config import load_config
from searchgrpo.errors import UserError
from searchgrpo.events import LogMessage
from searchgrpo.trackers import (
    TRL_NAMES,
    TrackerSink,
    WandbTracker,
    check_trackers,
    open_trackers,
    tracker_metrics,
    wandb_key_missing,
)
from tests.helpers.scripted_events import scripted_run, step_events


def needs(module: str):
    return pytest.importorskip(
        module, reason=f"the {module} extra is not installed: pip install 'searchgrpo[{module}]'"
    )


def play(cfg, run_dir: Path, steps: int = 4) -> list[LogMessage]:
    """The scripted run's events through the trackers of `cfg`, as runs.train wires them."""
    notes: list[LogMessage] = []
    sinks = open_trackers(cfg.train, run_dir, notes.append)
    for event in scripted_run(steps=steps, total=steps, eval_every=2):
        for sink in sinks:
            sink(event)
    for sink in sinks:
        sink.close()
    return notes


def expected(step: int) -> dict[str, float]:
    *groups, finished = step_events(step, total=4)
    return tracker_metrics(finished, groups)


def test_metric_names_follow_trl():
    *groups, finished = step_events(3, total=4)
    m = tracker_metrics(finished, groups)
    mapped = [(ours, trl) for ours, trl in TRL_NAMES.items() if ours in finished.metrics]
    assert len(mapped) >= 9
    for ours, trl in mapped:
        assert m[f"train/{trl}"] == finished.metrics[ours]
    assert m["train/rewards/new_important/mean"] == finished.metrics["reward/new_important"]
    # TRL 1.16's reward_std is the std of every reward of the batch: our reward/std.
    assert m["train/reward_std"] == finished.metrics["reward/std"]
    assert m["train/rewards/total/mean_group_std"] == pytest.approx(sum(g.reward_std for g in groups) / len(groups))
    assert "train/reward/mean" not in m and m["train/time/step"] == 10.0
    assert not [k for k in m if any(other.startswith(k + "/") for other in m)]  # no name is another's folder


def test_the_kl_penalty_is_logged_beside_trls_kl():
    *groups, finished = step_events(1, total=4)
    finished.metrics.update({"loss/kl": 0.01, "loss/kl_penalty": 0.02})
    m = tracker_metrics(finished, groups)
    assert m["train/kl"] == 0.01 and m["train/kl_penalty"] == 0.02


def test_our_train_metrics_get_the_prefix_once():
    """Issue 26: `train/nonfinite_skipped` reached TensorBoard as `train/train/nonfinite_skipped`."""
    *groups, finished = step_events(1, total=4)
    finished.metrics["train/nonfinite_skipped"] = 1.0
    m = tracker_metrics(finished, groups)
    assert m["train/nonfinite_skipped"] == 1.0 and m["train/learning_rate"] == finished.metrics["train/lr"]
    assert not [k for k in m if k.startswith("train/train/")]


def test_a_wandb_without_a_key_is_said_at_once_with_the_fix(tmp_path, monkeypatch):
    netrc = tmp_path / "netrc"
    assert wandb_key_missing({}, netrc)  # no file
    netrc.write_text("machine api.wandb.ai\n  login user\n  password 0123\n")
    assert not wandb_key_missing({}, netrc)
    assert wandb_key_missing({"WANDB_BASE_URL": "https://wandb.example.org"}, netrc)  # another host
    assert not wandb_key_missing({"WANDB_API_KEY": "x"}, tmp_path / "none")
    assert not wandb_key_missing({"WANDB_MODE": "offline"}, tmp_path / "none")
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    notes: list[LogMessage] = []
    open_trackers(load_config(None, ["train.report_to=[wandb]"]).train, tmp_path, notes.append)
    (note,) = notes
    assert note.level == "warning" and "no W&B API key found" in note.text and "WANDB_MODE=offline" in note.text


def test_a_wandb_that_stops_logging_says_how_to_log_offline():
    class Refused:
        name, hint = "wandb", WandbTracker.hint

        def start(self, event):
            raise PermissionError("api_key not configured (no-tty)")

        def close(self, failed):
            pass

    notes: list[LogMessage] = []
    sink = TrackerSink(Refused(), notes.append)
    for event in scripted_run(steps=1):
        sink(event)
    (note,) = notes
    assert note.text.startswith("wandb: stopped logging (PermissionError: api_key not configured (no-tty));")
    assert "WANDB_MODE=offline" in note.text


def test_a_new_metric_never_becomes_the_folder_of_another():
    *groups, finished = step_events(1, total=4)
    finished.metrics["loss/policy"] = 0.5  # "loss/total" is logged as "loss"
    assert tracker_metrics(finished, groups)["train/loss_policy"] == 0.5


def test_a_missing_tracker_package_is_one_line_naming_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "wandb", None)  # an import of it now fails, as when absent
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "wandb" else object())
    cfg = load_config(None, ["train.report_to=[wandb]"])
    with pytest.raises(UserError, match=r"pip install 'searchgrpo\[wandb\]'"):
        check_trackers(cfg.train)


def test_a_failing_tracker_is_switched_off_with_one_warning(tmp_path):
    class Broken:
        name = "broken"

        def start(self, event):
            raise ConnectionError("no route to host")

        def close(self, failed):
            pass

    notes: list[LogMessage] = []
    sink = TrackerSink(Broken(), notes.append)
    for event in scripted_run(steps=2):
        sink(event)  # never raises
    sink.close()
    assert [n.text for n in notes] == ["broken: stopped logging (ConnectionError: no route to host)"]


def test_tensorboard_reads_back_every_step(tmp_path):
    needs("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = load_config(None, ["train.report_to=[tensorboard]"])
    assert play(cfg, tmp_path) == []
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    reward = [(e.step, e.value) for e in acc.Scalars("train/reward")]
    assert reward == [(s, pytest.approx(expected(s)["train/reward"])) for s in range(1, 5)]
    assert [e.step for e in acc.Scalars("eval/reward_mean")] == [2, 4]
    assert {
        "train/kl",
        "train/clip_ratio/region_mean",
        "train/learning_rate",
        "train/reward_std",
        "train/rewards/new_important/mean",
    } <= set(acc.Tags()["scalars"])


def wandb_records(path: str) -> list:
    """The records of a W&B run file (`run-<id>.wandb`): a 7-byte header, then 32 KiB blocks of
    chunks, each with a 7-byte header (crc, length, type: 1 whole, 2 first, 3 middle, 4 last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B"
    pos, chunk, records = 7, b"", []
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            break
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(chunk)
            records.append(record)
            chunk = b""
    return records


def test_mlflow_file_store_holds_the_steps(tmp_path, monkeypatch):
    needs("mlflow")
    from mlflow.tracking import MlflowClient

    uri = f"file:{tmp_path / 'mlruns'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    cfg = load_config(None, ["train.report_to=[mlflow]", "train.tracker_project=grpo-tests"])
    assert play(cfg, tmp_path) == []
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("grpo-tests").experiment_id])
    assert run.info.run_name == "20260101-000000" and run.info.status == "FINISHED"
    history = client.get_metric_history(run.info.run_id, "train/kl")
    assert [(m.step, m.value) for m in history] == [(s, pytest.approx(expected(s)["train/kl"])) for s in range(1, 5)]
    assert run.data.params["model.base"] == "tiny"

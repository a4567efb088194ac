"""Experiment trackers: TensorBoard, Weights & Biases, MLflow and trackio, fed from the same events
as events.jsonl.

`train.report_to` lists the trackers of a run; `runs.train` opens one `TrackerSink` per tracker
on rank 0 and puts them beside the JSONL sink, so every tracker sees exactly the events the
console and `events.jsonl` see. Each tracker is an optional extra (`pip install
'searchgrpo[wandb]'`, ...) imported only when listed; a missing one is one clear line before
training starts. All four work offline: TensorBoard and trackio write local files, W&B honours
WANDB_MODE=offline, MLflow writes to `file:{output_dir}/mlruns` unless MLFLOW_TRACKING_URI says
otherwise.

Metric names follow TRL's GRPOTrainer where it logs the same quantity (`tracker_metrics`), with
the `train/` and `eval/` prefixes that transformers' tracker callbacks add, so a searchgrpo run
and a TRL run overlay in the same dashboard. A tracker that fails while logging, or does not answer
within `train.tracker_timeout_s` (an MLflow server at a closed port retries for minutes), is
switched off with one warning; training goes on.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from searchgrpo.config import RewardConfig, TrainConfig
from searchgrpo.errors import UserError, one_line
from searchgrpo.events import EvalFinished, EventSink, GroupScored, LogMessage, RunFailed, RunStarted, StepFinished
from searchgrpo.tracker_backends import (
    WANDB_OFFLINE,
    MlflowTracker,
    TensorBoardTracker,
    Tracker,
    TrackioTracker,
    WandbTracker,
)

TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "trackio": "trackio"}
"""Tracker name to the module it needs (each the extra of the same name)."""

TRL_NAMES = {
    "reward/mean": "reward",
    "reward/std": "reward_std",
    "reward/frac_zero_std": "frac_reward_zero_std",
    "loss/total": "loss",
    "loss/kl": "kl",
    "loss/clip_frac": "clip_ratio/region_mean",
    "loss/clip_low": "clip_ratio/low_mean",
    "loss/clip_high": "clip_ratio/high_mean",
    "grad/norm": "grad_norm",
    "train/lr": "learning_rate",
    "rollout/completion_tokens": "completions/mean_length",
    "rollout/truncated_frac": "completions/clipped_ratio",
}
"""searchgrpo's step metric to the name TRL's GRPOTrainer (trl 1.16) logs the same quantity under,
with TRL's definition (docs/console.md has the table): `reward_std` is the std of every reward of
the batch (TRL 1.16's `nanstd(rewards)`; earlier TRL versions logged the mean within-group std,
which goes to `rewards/total/mean_group_std` here); `kl` is the token mean of the k3 estimate whatever
`grpo.kl_estimator` is (the penalty beta multiplies is `kl_penalty`); the clip ratios are token
means over every completion token of the batch. Reward components become `rewards/<name>/mean`:
weighted, as TRL logs a reward function of weight 1 that returns the weighted component, so they
add up to `reward`. TRL's `entropy` has no counterpart here."""

OWN_NAMES = {
    "reward/min": "rewards/total/min",
    "reward/max": "rewards/total/max",
    "loss/kl_penalty": "kl_penalty",
}
"""Our own metrics under names beside TRL's: reward statistics moved out of `reward/` because
`reward` is a metric itself (no name may be the folder of another: MLflow's file store keeps each
metric in a file of that path), and the KL penalty, which TRL does not log."""

COMPONENTS = frozenset(f.name for f in dataclasses.fields(RewardConfig) if f.type in ("float", float))


def tracker_metrics(event: Any, groups: list[GroupScored]) -> dict[str, float]:
    """What a tracker logs for a StepFinished (with the step's groups) or an EvalFinished;
    non-finite values are left out (no tracker plots them usefully)."""
    out: dict[str, float] = {}
    if isinstance(event, StepFinished):
        for key, value in event.metrics.items():
            name = key.split("/", 1)[1] if key.startswith("reward/") else ""
            trl = f"rewards/{name}/mean" if name in COMPONENTS else TRL_NAMES.get(key) or OWN_NAMES.get(key, key)
            out[f"train/{trl.removeprefix('train/')}"] = value  # train/x, never train/train/x
        if groups:
            out["train/rewards/total/mean_group_std"] = sum(g.reward_std for g in groups) / len(groups)
        out["train/epoch"] = float(event.epoch)
    elif isinstance(event, EvalFinished):
        out = {k if k.startswith("eval/") else f"eval/{k}": v for k, v in event.metrics.items()}
    out = {k: float(v) for k, v in out.items() if isinstance(v, (int, float)) and math.isfinite(v)}
    return _no_folder_clashes(out)


def _no_folder_clashes(metrics: dict[str, float]) -> dict[str, float]:
    """`a/b/c` becomes `a/b_c` when `a/b` is a metric too (a metric added to the core later
    must not break a file-based tracker)."""
    out = {}
    for key, value in metrics.items():
        parts = key.split("/")
        for i in range(len(parts) - 1, 0, -1):
            if "/".join(parts[:i]) in metrics:
                key = "/".join(parts[:i]) + "_" + "_".join(parts[i:])
                break
        out[key] = value
    return out


def check_trackers(train: TrainConfig) -> None:
    """One line naming the extra to install when a listed tracker's package is missing."""
    import importlib.util

    for name in train.report_to:
        if importlib.util.find_spec(TRACKERS[name]) is None:
            raise UserError(
                f"train.report_to lists {name!r} but its package is not installed: pip install 'searchgrpo[{name}]'"
            )


def wandb_key_missing(environ: Mapping[str, str], netrc: Path) -> bool:
    """Whether W&B would run online without any credentials it reads: no WANDB_API_KEY or
    WANDB_IDENTITY_TOKEN_FILE, no `machine` entry for its host in `netrc` (`wandb login` writes one),
    and WANDB_MODE not offline or disabled.

    >>> wandb_key_missing({"WANDB_MODE": "offline"}, Path("/nonexistent"))
    False
    >>> wandb_key_missing({}, Path("/nonexistent"))
    True
    """
    if environ.get("WANDB_MODE", "").strip().lower() in ("offline", "disabled", "dryrun"):
        return False
    if environ.get("WANDB_API_KEY") or environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return False
    host = re.sub(r"^https?://", "", environ.get("WANDB_BASE_URL", "api.wandb.ai")).split("/")[0].split(":")[0]
    try:
        text = netrc.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return not re.search(rf"(?m)\bmachine\s+{re.escape(host)}\b", text)


def open_trackers(train: TrainConfig, run_dir: Path, notify: EventSink) -> list[TrackerSink]:
    """One sink per tracker of `train.report_to`, logging the run in `run_dir`; a W&B without a key
    is said at once, with the fix (it would otherwise fail at the first step and go untracked)."""
    check_trackers(train)
    if "wandb" in train.report_to and wandb_key_missing(
        os.environ, Path(os.environ.get("NETRC", "~/.netrc")).expanduser()
    ):
        notify(LogMessage("warning", f"wandb: no W&B API key found (WANDB_API_KEY, ~/.netrc); {WANDB_OFFLINE}"))
    kinds = {
        "tensorboard": TensorBoardTracker,
        "wandb": WandbTracker,
        "mlflow": MlflowTracker,
        "trackio": TrackioTracker,
    }
    return [TrackerSink(kinds[name](train, run_dir), notify, train.tracker_timeout_s) for name in train.report_to]


TRACKER_THREAD_PREFIX = "tracker-"
"""The name of each tracker call's daemon thread starts with this (then the tracker's name)."""


class TrackerTimeout(Exception):
    """A tracker call did not return within its deadline (`train.tracker_timeout_s`)."""


GOES_ON = "training goes on; events.jsonl keeps every metric"


class TrackerSink:
    """An EventSink for one tracker: collects the step's groups, hands each step's and eval's
    metrics to the tracker, and closes it. Never raises and never stalls training: each call to
    the tracker runs in a daemon thread and is given `deadline_s` (a tracker whose server is
    unreachable retries for minutes); one that fails or is late is switched off with one warning
    sent to `notify`, in our words when it cannot write its records or does not answer."""

    def __init__(self, tracker: Tracker, notify: EventSink, deadline_s: float = 30.0) -> None:
        self.tracker, self.notify, self.deadline_s = tracker, notify, deadline_s
        self.error = ""
        self._groups: list[GroupScored] = []
        self._failed = False
        self._late = False

    def _call(self, fn: Any, *args: Any) -> None:
        """`fn(*args)` in a daemon thread, waited for at most `deadline_s` (TrackerTimeout after)."""
        done, errors = threading.Event(), []

        def run() -> None:
            try:
                fn(*args)
            except BaseException as exc:  # handed to the caller's thread
                errors.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name=f"{TRACKER_THREAD_PREFIX}{self.tracker.name}", daemon=True).start()
        if not done.wait(self.deadline_s):
            self._late = True
            raise TrackerTimeout(f"no answer within {self.deadline_s:g} s (train.tracker_timeout_s)")
        if errors:
            raise errors[0]

    def __call__(self, event: Any) -> None:
        if self.error:
            return
        try:
            if isinstance(event, RunStarted):
                self._call(self.tracker.start, event)
            elif isinstance(event, GroupScored):
                self._groups.append(event)
            elif isinstance(event, (StepFinished, EvalFinished)):
                metrics = tracker_metrics(event, self._groups)
                groups = self._groups if isinstance(event, StepFinished) else []
                self._call(self.tracker.log, metrics, event.step, groups)
                if isinstance(event, StepFinished):
                    self._groups = []
            elif isinstance(event, RunFailed):
                self._failed = True
        except Exception as exc:  # a tracker must never stop training
            self.error = tracker_failure(exc)
            hint = f"; {self.tracker.hint}" if getattr(self.tracker, "hint", "") else ""
            self.notify(LogMessage("warning", f"{self.tracker.name}: stopped logging ({self.error}){hint}"))

    def close(self) -> None:
        if self._late:
            return  # its last call may still be waiting on the server: closing would wait as long
        try:
            self._call(self.tracker.close, self._failed or bool(self.error))
        except Exception as exc:
            self.notify(LogMessage("warning", f"{self.tracker.name}: could not close ({tracker_failure(exc)})"))


def tracker_failure(exc: BaseException) -> str:
    """Why a tracker stopped, in our words where the library's would not say what to do."""
    if isinstance(exc, TrackerTimeout):
        return f"{exc}; is its server up? {GOES_ON}"
    if isinstance(exc, OSError) and exc.strerror and exc.errno is not None:
        where = f": {exc.filename}" if exc.filename else ""
        return f"cannot write its records ({exc.strerror}{where}); {GOES_ON}"
    return f"{type(exc).__name__}: {one_line(exc, 300)}"


def close_all(sinks: list[TrackerSink]) -> None:
    for sink in sinks:
        sink.close()

"""The four experiment trackers behind `train.report_to`: TensorBoard, Weights & Biases, MLflow and
trackio, each a `Tracker` (`start`, `log`, `close`) that imports its library only when opened.

`trackers.py` opens them, feeds them the run's events and switches off one that fails.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from searchgrpo.config import TrainConfig
from searchgrpo.events import GroupScored, RunStarted

if TYPE_CHECKING:  # each library is imported only when its tracker starts
    import trackio
    import wandb
    from torch.utils.tensorboard import SummaryWriter

WANDB_OFFLINE = "set WANDB_MODE=offline to log the run locally (then `wandb sync` it), or run `wandb login`"
"""What to do when W&B cannot log in."""


class Tracker:
    """One tracker's calls: `start` at RunStarted, `log` per step and eval, `close` at the end."""

    name = ""
    hint = ""
    """Said when the tracker stops logging: how to keep the run tracked anyway."""

    def __init__(self, train: TrainConfig, run_dir: Path) -> None:
        self.train, self.run_dir = train, run_dir
        self.project = train.tracker_project

    def start(self, event: RunStarted) -> None:
        raise NotImplementedError

    def log(self, metrics: dict[str, float], step: int, groups: list[GroupScored]) -> None:
        raise NotImplementedError

    def close(self, failed: bool) -> None:
        raise NotImplementedError


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested config as dotted keys and short string values (trackers' parameter tables)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat_config(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)[:250]
    return out


class TensorBoardTracker(Tracker):
    """Scalars in `{run_dir}/tensorboard/` (torch's SummaryWriter). A resumed run purges the
    steps after its checkpoint, so the curves do not double back."""

    name = "tensorboard"
    writer: SummaryWriter | None = None

    def start(self, event: RunStarted) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.close(False)
        self.writer = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=event.start_step + 1)

    def log(self, metrics: dict[str, float], step: int, groups: list[GroupScored]) -> None:
        assert self.writer is not None, "log before start"
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self, failed: bool) -> None:
        writer = self.writer
        if writer is not None:
            writer.close()
            self.writer = None


class WandbTracker(Tracker):
    """A W&B run with the searchgrpo run's id (a resumed run continues it) under
    `{run_dir}/wandb/`; each step's groups also go to a `completions` table, as TRL's do."""

    name = "wandb"
    hint = WANDB_OFFLINE
    run: wandb.Run | None = None

    def start(self, event: RunStarted) -> None:
        import wandb

        if self.run is not None:
            return
        run_id = re.sub(r"[^A-Za-z0-9_-]", "-", event.run_id)[:64]
        self.run = wandb.init(
            project=self.project,
            name=event.run_id,
            id=run_id,
            resume="allow",
            dir=str(self.run_dir),
            config=event.config,
            reinit="create_new",
        )

    def log(self, metrics: dict[str, float], step: int, groups: list[GroupScored]) -> None:
        import wandb

        row: dict[str, Any] = dict(metrics)
        if groups:
            columns: list[str | int] = ["step", "state", "question", "sample", "clues", "reward", "advantage"]
            data = [
                [step, g.state_id, g.question, s.index, " | ".join(s.clues), s.reward, s.advantage]
                for g in groups
                for s in g.samples
            ]
            row["completions"] = wandb.Table(columns=columns, data=data)
        assert self.run is not None, "log before start"
        self.run.log(row, step=step)

    def close(self, failed: bool) -> None:
        run = self.run
        if run is not None:
            run.finish(exit_code=1 if failed else 0)
            self.run = None


class MlflowTracker(Tracker):
    """An MLflow run named after the searchgrpo run (a resumed run is a new MLflow run), through
    MlflowClient so no global MLflow state changes. Default store: `file:{output_dir}/mlruns`."""

    name = "mlflow"

    def start(self, event: RunStarted) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"file:{Path(self.train.output_dir).resolve()}/mlruns"
        if uri.startswith("file:"):
            # MLflow 3 only writes its file store when asked to; it is the store that needs no server.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        experiment = self.client.get_experiment_by_name(self.project)
        experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(self.project)
        name = event.run_id + (f" (resumed at step {event.start_step})" if event.start_step else "")
        self.run_id = self.client.create_run(experiment_id, run_name=name).info.run_id
        params = [Param(k, v) for k, v in flat_config(event.config).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 parameters a batch
            self.client.log_batch(self.run_id, params=params[i : i + 100])

    def log(self, metrics: dict[str, float], step: int, groups: list[GroupScored]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def close(self, failed: bool) -> None:
        if getattr(self, "run_id", None):
            self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")
            self.run_id = None


class TrackioTracker(Tracker):
    """A trackio run (local: a SQLite database under TRACKIO_DIR, its dashboard with `trackio
    show`); a resumed run continues the same trackio run."""

    name = "trackio"
    run: trackio.Run | None = None

    def start(self, event: RunStarted) -> None:
        import trackio

        if self.run is not None:
            return
        self.run = trackio.init(
            project=self.project, name=event.run_id, config=event.config, resume="allow", embed=False
        )

    def log(self, metrics: dict[str, float], step: int, groups: list[GroupScored]) -> None:
        assert self.run is not None, "log before start"
        self.run.log(metrics, step=step)

    def close(self, failed: bool) -> None:
        run = self.run
        if run is not None:
            run.finish()
            self.run = None

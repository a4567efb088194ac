"""The one boundary between the console and the core: train, eval, merge and audit requests in,
typed results out.

The console never calls `searchgrpo.runs` (or anything that imports torch) itself: it holds a
`Backend`. `CoreBackend` is the real one and imports the core lazily, inside each call, so the
console opens at once; tests give the app a scripted backend with the same methods. The eval,
merge and audit requests are the core's own (`searchgrpo.evaluate.inputs.EvalRequest`,
`searchgrpo.export.merge.MergeRequest`, `searchgrpo.evaluate.checker_audit.AuditRequest`: none of
these modules imports torch), so the console and the CLI
ask for the same thing in the same words; results are small dataclasses of plain data. Each method
runs in a worker thread, sends core events to `sink` while it works, and returns a typed result
(the job panes post it to themselves as a message, see `tui.screens.job_pane`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from searchgrpo.config import Config
from searchgrpo.evaluate.checker_audit import AuditRequest
from searchgrpo.evaluate.inputs import EvalRequest
from searchgrpo.events import EventSink
from searchgrpo.export.merge import MergeRequest
from searchgrpo.train.control import TrainerControl

__all__ = [
    "AuditDone",
    "AuditRequest",
    "Backend",
    "CoreBackend",
    "EvalDone",
    "EvalRequest",
    "MergeDone",
    "MergeRefused",
    "MergeRequest",
    "TrainRequest",
]


@dataclass(frozen=True)
class TrainRequest:
    """Train with the app's config: a new run, or `resume` the run in `run_dir` (or the newest)."""

    run_dir: Path | None = None
    resume: bool = False


@dataclass(frozen=True)
class AuditDone:
    """The audit wrote its JSON report (and its plot, when matplotlib is there) here."""

    path: str


@dataclass(frozen=True)
class EvalDone:
    """Eval wrote its JSON report here."""

    path: str


@dataclass(frozen=True)
class MergeDone:
    """Merge wrote these model folders; `refused` lists the merges that failed their parity check
    (checkpoint, output, reason with its remedy): the job went on past them."""

    outputs: list[str]
    refused: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class MergeRefused:
    """Merge wrote nothing: these outputs exist and the request did not say overwrite."""

    existing: list[str]


class Backend(Protocol):
    """What the console asks of the core. Each job method runs in a worker thread and may raise;
    the caller shows the error."""

    def train(self, cfg: Config, request: TrainRequest, sink: EventSink, control: TrainerControl) -> None:
        """Train to the end (or until `control` stops it), sending events to `sink`."""

    def evaluate(self, cfg: Config, request: EvalRequest, sink: EventSink, stop: threading.Event) -> EvalDone:
        """Run eval; returns where the report is."""

    def merge(
        self, cfg: Config, request: MergeRequest, sink: EventSink, stop: threading.Event
    ) -> MergeDone | MergeRefused:
        """Run merge; an existing output is refused, not replaced, unless `request.overwrite`."""

    def audit(self, cfg: Config, request: AuditRequest, sink: EventSink, stop: threading.Event) -> AuditDone:
        """Run the checker audit; returns where the report is."""

    def newest_run(self, output_dir: str | Path) -> Path | None:
        """The newest run folder under `output_dir`."""

    def checkpoints(self, run_dir: Path | None) -> list[tuple[str, str]]:
        """(name, path) of the run's complete checkpoints, oldest first (only reads)."""


class CoreBackend:
    """The real core, imported on first use (`searchgrpo.runs` is the front door)."""

    def train(self, cfg: Config, request: TrainRequest, sink: EventSink, control: TrainerControl) -> None:
        from searchgrpo import runs

        runs.train(cfg, sink, control, run_dir=request.run_dir, resume=request.resume)

    def evaluate(self, cfg: Config, request: EvalRequest, sink: EventSink, stop: threading.Event) -> EvalDone:
        from searchgrpo import runs

        return EvalDone(str(runs.evaluate(cfg, request, sink, stop)))

    def merge(
        self, cfg: Config, request: MergeRequest, sink: EventSink, stop: threading.Event
    ) -> MergeDone | MergeRefused:
        from searchgrpo import runs
        from searchgrpo.export.merge import MergesRefused, OutputExists

        try:
            return MergeDone([str(p) for p in runs.merge(cfg, request, sink, stop)])
        except OutputExists as exc:
            return MergeRefused(list(exc.paths))
        except MergesRefused as exc:
            return MergeDone(exc.outputs, exc.refused)

    def audit(self, cfg: Config, request: AuditRequest, sink: EventSink, stop: threading.Event) -> AuditDone:
        import dataclasses
        import importlib.util

        from searchgrpo import runs

        # The plot is optional in the console: without matplotlib the tables still show.
        core = dataclasses.replace(request, plot=request.plot and importlib.util.find_spec("matplotlib") is not None)
        return AuditDone(str(runs.audit_checker(cfg, core, sink, stop)))

    def newest_run(self, output_dir: str | Path) -> Path | None:
        from searchgrpo import runs

        return runs.newest_run(output_dir)

    def checkpoints(self, run_dir: Path | None) -> list[tuple[str, str]]:
        from searchgrpo import runs

        return [(info.path.name, str(info.path)) for info in runs.run_checkpoints(run_dir)]

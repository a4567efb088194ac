"""The console's model of a run and its jobs, fed by core events; plain Python, no Textual.

One `ConsoleModel` serves a live run, an attached run and a replayed one alike: whatever the
source, events go through `apply`. Histories are bounded deques, so a week-long run costs the
same memory as an hour-long one. Widgets read the model on a timer and redraw only what changed,
which they tell by the version counters.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from searchgrpo import events as ev
from tui.sources import SourceStalled

HISTORY = 20_000
"""Steps of metric history kept (older steps fall off the plots)."""
RECENT_GROUPS = 200
"""Scored groups kept for browsing."""
LOG_LINES = 5_000

TRAIN_EVENTS = (
    ev.RunStarted,
    ev.GroupScored,
    ev.StepFinished,
    ev.EvalFinished,
    ev.CheckpointSaved,
    ev.TrainEvalProgress,
    ev.RunPaused,
    ev.RunResumed,
    ev.RunFinished,
    ev.RunFailed,
)


@dataclass
class JobModel:
    """An eval, merge or audit job: its state, progress per unit, result and error."""

    name: str
    status: str = "idle"
    """idle | running | done | failed | cancelled"""
    progress: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Units (a policy, a checkpoint, the audit's verdicts) to (done, total), in arrival order."""
    stages: dict[str, str] = field(default_factory=dict)
    """A merged checkpoint's current stage (load, reference, merge, save, parity; done at the end),
    or the audit's verdict rate so far."""
    result: Any = None
    """EvalReportWritten, MergeFinished or AuditReportWritten."""
    started: Any = None
    """EvalStarted, MergeStarted or AuditStarted."""
    error: str = ""
    version: int = 0

    def reset(self) -> None:
        self.status, self.progress, self.result, self.started, self.error = "running", {}, None, None, ""
        self.stages = {}
        self.version += 1

    def fail(self, error: str, status: str = "failed") -> None:
        self.status, self.error = status, error
        self.version += 1


@dataclass
class RunModel:
    """A training run as the events tell it."""

    status: str = "idle"
    """idle | starting | running | pausing | paused | stopping | completed | stopped | failed"""
    info: ev.RunStarted | None = None
    step: int = 0
    epoch: int = 0
    total_steps: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    """The last step's metrics (and the last eval's, under eval/...)."""
    history: dict[str, deque[tuple[int, float]]] = field(default_factory=dict)
    """Metric key to (step, value) points, oldest first."""
    groups: deque[ev.GroupScored] = field(default_factory=lambda: deque(maxlen=RECENT_GROUPS))
    checkpoints: list[ev.CheckpointSaved] = field(default_factory=list)
    error: str = ""
    traceback: str = ""
    version: int = 0
    """Bumped on every change."""
    steps_version: int = 0
    """Bumped when metric history changes (plots redraw on it)."""
    groups_added: int = 0
    """Groups ever received; tells the group browser that new ones arrived."""
    stalled_s: float = 0.0
    """An attached run's file has not grown for this many seconds (0: it is growing, or done)."""
    first_step: int = 0
    """The first step after the latest (re)start: it warms up, so the ETA leaves it out."""
    eval_progress: tuple[int, int] | None = None
    """The in-training eval's (done, total) states while it runs."""

    def clear(self) -> None:
        """Forget everything: another run starts in this console (widgets keep this object)."""
        fresh = RunModel()
        for f in dataclasses.fields(self):
            if f.name not in ("version", "steps_version", "groups_added"):
                setattr(self, f.name, getattr(fresh, f.name))
        self.version += 1
        self.steps_version += 1
        self.groups_added += 1  # the group browser redraws (and finds no group)

    def record(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.history.setdefault(key, deque(maxlen=HISTORY)).append((step, value))
        self.metrics.update(metrics)
        self.steps_version += 1

    def rewind(self, step: int) -> None:
        """Forget what happened after `step`: a resumed run repeats those steps."""
        for key, points in list(self.history.items()):
            while points and points[-1][0] > step:
                points.pop()
            if not points:  # a metric with no step left is no metric at all
                del self.history[key]
                self.metrics.pop(key, None)
        kept = [g for g in self.groups if g.step <= step]
        self.groups.clear()
        self.groups.extend(kept)
        self.checkpoints = [c for c in self.checkpoints if c.step <= step]
        self.steps_version += 1

    def last(self, key: str, n: int) -> list[float]:
        """The last `n` values of a metric, oldest first (without copying the whole history)."""
        return [v for _, v in islice(reversed(self.history.get(key, ())), n)][::-1]

    def eta_seconds(self) -> float | None:
        """Remaining steps times the mean step time of the last ten steps, leaving out the first
        step after a (re)start, which warms up (83 s where the next took 17 s); None until a step
        after it is done."""
        points = [(s, t) for s, t in islice(reversed(self.history.get("time/step", ())), 11) if s != self.first_step]
        times = [t for _, t in points[:10]]
        if not times or not self.total_steps:
            return None
        return max(self.total_steps - self.step, 0) * sum(times) / len(times)

    @property
    def active(self) -> bool:
        return self.status in ("starting", "running", "pausing", "paused", "stopping")

    def apply(self, event: Any) -> None:
        self.version += 1
        if isinstance(event, ev.RunStarted):
            if self.info is not None and event.run_id != self.info.run_id:
                self.clear()  # another run: nothing of the last one applies
            elif event.start_step or self.info is not None:
                self.rewind(event.start_step)
            self.info, self.total_steps, self.step = event, event.total_steps, event.start_step
            self.epoch = event.start_step // max(event.steps_per_epoch, 1)
            self.status, self.error, self.traceback = "running", "", ""
            self.first_step, self.eval_progress = event.start_step + 1, None
        elif isinstance(event, ev.GroupScored):
            self.groups.append(event)
            self.groups_added += 1
        elif isinstance(event, ev.StepFinished):
            self.step, self.epoch, self.total_steps = event.step, event.epoch, event.total_steps
            self.record(event.step, event.metrics)
        elif isinstance(event, ev.TrainEvalProgress):
            self.eval_progress = (event.done, event.total)
        elif isinstance(event, ev.EvalFinished):
            self.eval_progress = None
            self.record(event.step, {k if k.startswith("eval/") else f"eval/{k}": v for k, v in event.metrics.items()})
        elif isinstance(event, ev.CheckpointSaved):
            self.checkpoints.append(event)
        elif isinstance(event, ev.RunPaused):
            self.status = "paused" if self.status != "stopping" else self.status
        elif isinstance(event, ev.RunResumed):
            self.status = "running" if self.status != "stopping" else self.status
        elif isinstance(event, ev.RunFinished):
            self.step, self.status, self.eval_progress = event.step, event.reason, None
        elif isinstance(event, ev.RunFailed):
            self.status, self.error, self.traceback = "failed", event.error, event.traceback
            self.eval_progress = None


@dataclass(frozen=True)
class Earlier:
    """An event from the run's history (`tui --resume` replays its events.jsonl first): it fills the
    curves, groups and log, but never changes the state of the run this console is starting."""

    event: Any


@dataclass(frozen=True)
class Compared:
    """An event of the `index`-th run the console compares the main run with."""

    index: int
    event: Any


@dataclass
class ConsoleModel:
    """Everything the console shows: the run, the runs it is compared with, the eval and merge
    jobs, and the log."""

    run: RunModel = field(default_factory=RunModel)
    compare: list[RunModel] = field(default_factory=list)
    """Other runs (`--replay A --replay B`): only their curves are drawn, over the main run's."""
    eval: JobModel = field(default_factory=lambda: JobModel("eval"))
    merge: JobModel = field(default_factory=lambda: JobModel("merge"))
    audit: JobModel = field(default_factory=lambda: JobModel("audit"))
    log: deque[ev.LogMessage] = field(default_factory=lambda: deque(maxlen=LOG_LINES))
    logged: int = 0
    """Log lines ever added (the log pane writes the ones it has not shown)."""

    def note(self, level: str, text: str, time: float | None = None) -> None:
        self.log.append(ev.LogMessage(level, text) if time is None else ev.LogMessage(level, text, time))
        self.logged += 1

    def apply(self, event: Any) -> None:
        """Fold one core event into the model."""
        if isinstance(event, Earlier):
            run = self.run
            status, error, trace = run.status, run.error, run.traceback
            self.apply(event.event)
            run.status, run.error, run.traceback, run.eval_progress = status, error, trace, None
            run.version += 1
        elif isinstance(event, TRAIN_EVENTS):
            self.run.apply(event)
            line = _log_line(event)
            if line:
                self.note(*line, time=event.time)
        elif isinstance(event, ev.LogMessage):
            self.log.append(event)
            self.logged += 1
        elif isinstance(event, (ev.EvalStarted, ev.EvalProgress, ev.EvalReportWritten)):
            self._job(self.eval, event)
        elif isinstance(event, (ev.MergeStarted, ev.MergeProgress, ev.MergeFinished)):
            self._job(self.merge, event)
        elif isinstance(event, (ev.AuditStarted, ev.AuditProgress, ev.AuditReportWritten)):
            self._job(self.audit, event)
        elif isinstance(event, ev.JobFailed):
            job = {"eval": self.eval, "audit": self.audit}.get(event.job, self.merge)
            job.fail(event.error)
            self.note("error", f"{event.job} failed: {event.error}", time=event.time)
        elif isinstance(event, SourceStalled):
            if bool(event.idle_s) != bool(self.run.stalled_s):
                self.note(
                    "warning",
                    f"{event.path}: no new events for {event.idle_s:.0f}s; the run may have stopped"
                    if event.idle_s
                    else f"{event.path}: events arrive again",
                )
            self.run.stalled_s = event.idle_s
            self.run.version += 1
        elif isinstance(event, Compared):
            self._compared(event)

    def _compared(self, wrapped: Compared) -> None:
        while len(self.compare) <= wrapped.index:
            self.compare.append(RunModel())
        run, event = self.compare[wrapped.index], wrapped.event
        if isinstance(event, (ev.RunStarted, ev.StepFinished, ev.EvalFinished, ev.RunFinished, ev.RunFailed)):
            run.apply(event)
        elif isinstance(event, ev.LogMessage):
            name = run.info.run_id if run.info else f"run {wrapped.index + 2}"
            self.note(event.level, f"[{name}] {event.text}", time=event.time)

    def _job(self, job: JobModel, event: Any) -> None:
        job.version += 1
        if isinstance(event, (ev.EvalStarted, ev.MergeStarted, ev.AuditStarted)):
            job.status, job.started = "running", event
        elif isinstance(event, ev.EvalProgress):
            job.progress[event.policy] = (event.done, event.total)
        elif isinstance(event, ev.AuditProgress):
            job.progress["verdicts"] = (event.done, event.total)
            job.stages["verdicts"] = f"{event.done / event.seconds:.2f} per second" if event.seconds else ""
        elif isinstance(event, ev.MergeProgress):
            # `done` counts the stages finished before this one began.
            job.progress[event.checkpoint] = (event.done, event.total)
            job.stages[event.checkpoint] = event.stage
        else:
            job.status, job.result = "done", event
            if isinstance(event, ev.MergeFinished):
                refused = {r.get("checkpoint") for r in event.refused}
                job.progress = {unit: (total, total) for unit, (_, total) in job.progress.items()}
                job.stages = {unit: "refused" if unit in refused else "done" for unit in job.progress}
            if isinstance(event, (ev.EvalReportWritten, ev.AuditReportWritten)):
                where = event.path
            else:
                where = ", ".join(event.outputs) or "nothing written"
                if event.refused:
                    where += f"; {len(event.refused)} refused (reasons above)"
            self.note("info", f"{job.name} finished: {where}", time=event.time)


def _log_line(event: Any) -> tuple[str, str] | None:
    """The log pane's line for a training event, if it deserves one."""
    if isinstance(event, ev.RunStarted):
        verb = f"resumed at step {event.start_step}" if event.start_step else "started"
        return "info", f"run {event.run_id} {verb}: {event.base_model} on {event.device}, {event.total_steps} steps"
    if isinstance(event, ev.CheckpointSaved):
        return "info", f"checkpoint step {event.step} -> {event.path}"
    if isinstance(event, ev.StepFinished) and event.metrics.get("checker/unparsable", 0) > 0:
        m = event.metrics
        share = m.get("checker/unparsable_share")
        return "warning", (
            f"step {event.step}: {m['checker/unparsable']:.0f} checker replies were not exactly a label "
            "(labelled IRRELEVANT, not cached)" + (f"; {share:.1%} of all replies so far" if share is not None else "")
        )
    if isinstance(event, ev.EvalFinished):
        m = event.metrics
        return "info", (
            f"eval at step {event.step}: reward {m.get('eval/reward_mean', 0):+.3f}, "
            f"IMPORTANT discovery {m.get('eval/important_discovery', 0):.3f}"
        )
    if isinstance(event, ev.RunPaused):
        return "info", f"paused at step {event.step}"
    if isinstance(event, ev.RunResumed):
        return "info", f"resumed at step {event.step}"
    if isinstance(event, ev.RunFinished):
        return "info", f"run {event.reason} at step {event.step}"
    if isinstance(event, ev.RunFailed):
        return "error", f"run failed at step {event.step}: {event.error}"
    return None

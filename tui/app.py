"""The searchgrpo console: watch and steer GRPO training, then eval and merge, in one app.

The app is the shell: tabs, key bindings, and the training worker (the Eval and Merge tabs run
their own). Everything it asks of the core goes through a `Backend` (`tui.backend`; tests give a
scripted one). Training, eval and merge each run in a Textual thread worker that sends core
events into an `EventInbox`; the app folds them into the `ConsoleModel`, and timers redraw the
panes from the model (10 Hz for text, 2 Hz for plots), so a burst of events costs one redraw,
not one per event. Widgets are never touched from a worker. The Audit tab (the checker against gold)
runs its job as the Eval and Merge tabs do.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Header, TabbedContent, TabPane
from textual.worker import Worker, WorkerState, get_current_worker

from searchgrpo.config import Config
from searchgrpo.events import CheckpointSaved, RunFailed
from searchgrpo.train.control import TrainerControl
from tui.backend import Backend, CoreBackend, TrainRequest
from tui.failures import report_failure, traceback_text
from tui.inbox import EventInbox
from tui.keys import KeyFeedback
from tui.messages import EventsArrived
from tui.model import Compared, ConsoleModel, Earlier, RunModel
from tui.quitting import QuitFlow
from tui.run_controls import RunControls
from tui.screens.audit_pane import AuditPane
from tui.screens.config_pane import ConfigPane
from tui.screens.eval_pane import EvalPane
from tui.screens.log_pane import LogPane
from tui.screens.merge_pane import MergePane
from tui.screens.train_pane import TrainPane
from tui.sources import MAX_LINE, STALL_AFTER, events_file, follow_events
from tui.widgets.steady_footer import SteadyFooter

DRAIN = 2_000
"""Events folded into the model per turn of the event loop; input is handled between turns."""
TABS = ("train", "eval", "merge", "config", "log", "audit")
FIRST_FOCUS = {
    "train": "#group-table",
    "eval": "#eval-policies",
    "merge": "#merge-checkpoints",
    "config": "#config-table",
    "log": "#log-pane",
    "audit": "#audit-questions",
}
"""What a tab focuses when shown, so its keys work at once."""


class ConsoleApp(QuitFlow, KeyFeedback, RunControls, App[int]):
    """Train, eval, merge, config, log and audit tabs over one `ConsoleModel`.

    `source` is "live" (this app trains through `backend`), "attach" (follow the growing
    `events_path`) or "replay" (read `events_path` once, and the runs in `compare` to overlay
    their curves). The app's return value is the exit code: 1 when the run failed, else 0.
    """

    CSS_PATH = Path(__file__).parent / "app.tcss"
    FIRST_FOCUS = FIRST_FOCUS
    TITLE = "searchgrpo"
    AUTO_FOCUS = None
    """Focus is set in `on_mount`: Textual's automatic focus could come after a tab key pressed at
    once, and focusing into the hidden Train tab would switch back to it."""
    BINDINGS = [
        Binding("s", "start", "Start"),
        Binding("p", "pause", "Pause/Resume"),
        Binding("x", "stop", "Stop+ckpt"),
        Binding("c", "checkpoint", "Checkpoint"),
        Binding("v", "group('view')", "View"),  # early: the narrow layout's footer shows only the first keys
        Binding("d", "group('detail')", "Drill-down"),
        Binding("left_square_bracket", "group('older')", "Older group"),
        Binding("right_square_bracket", "group('newer')", "Newer"),
        Binding("f", "group('follow')", "Follow"),
        Binding("m", "group('smooth')", "Smooth"),
        *(Binding(str(i + 1), f"show_tab('{tab}')", tab.title(), show=False) for i, tab in enumerate(TABS)),
        # alt+1..6 switch tabs from a text field too (digits type into it; escape leaves it).
        *(Binding(f"alt+{i + 1}", f"show_tab('{tab}')", tab.title(), show=False) for i, tab in enumerate(TABS)),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        cfg: Config,
        config_source: str,
        *,
        source: str = "live",
        start: bool = False,
        run_dir: Path | None = None,
        resume: bool = False,
        events_path: Path | None = None,
        compare: Sequence[Path] = (),
        backend: Backend | None = None,
        text_interval: float = 0.1,
        plot_interval: float = 0.5,
        stall_after: float = STALL_AFTER,
        max_line: int = MAX_LINE,
    ) -> None:
        super().__init__()
        if source not in ("live", "attach", "replay"):
            raise ValueError(f"unknown source {source!r}")
        self.cfg, self.config_source, self.source = cfg, config_source, source
        self.start_at_once, self.run_dir, self.resume = start, run_dir, resume
        self.events_path, self.compare_paths = events_path, list(compare)
        self.backend: Backend = backend or CoreBackend()
        self.intervals = (text_interval, plot_interval)
        self.stall_after, self.max_line = stall_after, max_line
        self.model = ConsoleModel()
        self.model.compare.extend(RunModel() for _ in self.compare_paths)
        self.inbox = EventInbox(lambda: self.post_message(EventsArrived()))
        self.control: TrainerControl | None = None
        self._quit_when_stopped = False
        self._bindings_state: tuple[str, str] = ("", "")
        self.handle_stop_signals = False
        """SIGTERM and SIGHUP stop the run with a checkpoint and quit (`tui.signals`); set by
        `searchgrpo tui`, not by tests that run the app inside pytest."""
        self._remove_signal_handlers: Callable[[], None] | None = None
        self.training_done: threading.Event | None = None
        """Set when the training thread of the latest run has returned (its checkpoint written)."""
        self.quit_now = False
        self._job_panes: list[Any] = []
        """The user chose to quit without waiting: `tui.launch.let_go` gives the jobs' threads a few
        seconds to stop and then ends the process (the files they write are atomic)."""

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="tabs", initial="train"):
            with TabPane("Train", id="train"):
                yield TrainPane(self.model.run, self.source, self.model.compare, id="train-pane")
            with TabPane("Eval", id="eval"):
                yield EvalPane(self.model.eval, self.cfg, self.inbox.put, self.backend, id="eval-pane")
            with TabPane("Merge", id="merge"):
                yield MergePane(self.model.merge, self.cfg, self.inbox.put, self.backend, id="merge-pane")
            with TabPane("Config", id="config"):
                yield ConfigPane(self.cfg, self.config_source, id="config-pane")
            with TabPane("Log", id="log"):
                yield LogPane(self.model, id="log-pane")
            with TabPane("Audit", id="audit"):
                yield AuditPane(self.model.audit, self.cfg, self.inbox.put, self.backend, id="audit-pane")
        yield SteadyFooter()

    def on_mount(self) -> None:
        if self.handle_stop_signals:
            from tui.signals import install

            self._remove_signal_handlers = install(self)
        self.sub_title = {
            "live": "training console",
            "attach": f"attached to {self.events_path}",
            "replay": f"replay of {self.events_path}",
        }[self.source]
        self.set_interval(self.intervals[0], self.redraw_text)
        self.set_interval(self.intervals[1], self.redraw_plots)
        self.refresh_checkpoints()
        if self.source != "live":
            assert self.events_path is not None
            self._follow(self.events_path, self.source == "attach")
            for i, path in enumerate(self.compare_paths):
                self._follow_compared(i, path)
        elif self.start_at_once:
            self.action_start()
        self.query_one(FIRST_FOCUS["train"]).focus()
        self.redraw()

    # ------------------------------------------------------------------ events in, redraws out

    @on(EventsArrived)
    def _drain(self) -> None:
        batch, more = self.inbox.take(DRAIN)
        for event in batch:
            self.model.apply(event)
            if isinstance(event, CheckpointSaved):
                self.call_later(self.refresh_checkpoints)
        if more:
            self.post_message(EventsArrived())

    def drain_all(self) -> None:
        """Fold every waiting event in now (before acting on a worker's end)."""
        while True:
            batch, _ = self.inbox.take(DRAIN)
            if not batch:
                return
            for event in batch:
                self.model.apply(event)

    def redraw_text(self) -> None:
        with _panes_may_be_missing():
            active = self.query_one(TabbedContent).active
            self.query_one(TrainPane).update_from(plots=False)
            self.query_one(EvalPane).update_from()
            self.query_one(MergePane).update_from()
            self.query_one(AuditPane).update_from()
            if active == "log":
                self.query_one(LogPane).update_from()
            state = (self.model.run.status, active)
            if state != self._bindings_state:  # the footer re-renders on each refresh: only on change
                self._bindings_state = state
                self.refresh_bindings()

    def redraw_plots(self) -> None:
        with _panes_may_be_missing():
            if self.query_one(TabbedContent).active == "train":
                self.query_one(TrainPane).update_from(plots=True)

    def redraw(self) -> None:
        """Everything, at once (tests and snapshots call this instead of waiting for timers)."""
        self.drain_all()
        with _panes_may_be_missing():
            self.query_one(TrainPane).update_from(plots=True)
            self.query_one(LogPane).update_from()
        self.redraw_text()

    @on(TabbedContent.TabActivated)
    def _tab_shown(self, event: TabbedContent.TabActivated) -> None:
        with _panes_may_be_missing():
            if event.pane.id != self.query_one(TabbedContent).active:
                # A stale notice (tabs switched again since): focusing into a hidden tab would switch
                # back to it, and two stale notices would switch back and forth for ever.
                return
            if event.pane.id in ("eval", "merge"):
                self.refresh_checkpoints()
            self.redraw()
            self.query_one(FIRST_FOCUS[event.pane.id]).focus()

    def refresh_checkpoints(self) -> None:
        """Offer the current run's checkpoints (else the newest run's) to eval and merge."""
        info = self.model.run.info
        run_dir = Path(info.run_dir) if info else self.run_dir or self.backend.newest_run(self.cfg.train.output_dir)
        found = self.backend.checkpoints(run_dir)
        with _panes_may_be_missing():  # a run that ends while the console closes
            self.query_one(EvalPane).set_policies(run_dir, found)
            self.query_one(MergePane).set_checkpoints(run_dir, found)

    # ------------------------------------------------------------------ training controls

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out controls that do nothing in the current state (the footer shows it)."""
        run = self.model.run
        if action == "start":
            return (self.source == "live" and not run.active) or None
        if action in ("pause", "stop", "checkpoint"):
            return (self.source == "live" and run.status in ("running", "pausing", "paused")) or None
        if action == "group":  # the group browser's keys belong to the Train tab; v to the job tabs too
            active = self.query_one(TabbedContent).active
            return active == "train" or (parameters == ("view",) and active in ("eval", "merge", "audit"))
        return True

    def action_start(self) -> None:
        if self.source != "live" or self.model.run.active:
            return
        self.control = TrainerControl()
        self.training_done = threading.Event()
        if self.model.run.info is not None:  # a run ended here before: this one starts afresh
            self.model.run.clear()
        self.model.run.status = "starting"
        self.model.run.version += 1
        self.model.note("info", f"starting training ({self.config_source})")
        self._train(self.control, self.training_done)

    def action_group(self, move: str) -> None:
        """Browse the scored groups: older, newer, follow (the newest), or detail (full screen); `v`
        on a job tab switches between its form and its results."""
        active = self.query_one(TabbedContent).active
        if active != "train" and move == "view":
            pane = {"eval": EvalPane, "merge": MergePane, "audit": AuditPane}[active]
            self.query_one(pane).action_view()
            return
        getattr(self.query_one(TrainPane), f"action_{move}")()

    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab

    def job_panes(self) -> list[Any]:
        """The Eval, Merge and Audit panes (kept from the start: `launch.let_go` asks them about their
        jobs once the console has closed)."""
        if not self._job_panes:
            with _panes_may_be_missing():
                self._job_panes = [self.query_one(EvalPane), self.query_one(MergePane), self.query_one(AuditPane)]
        return self._job_panes

    def exit_code_for_run(self) -> int:
        return 1 if self.model.run.status == "failed" else 0

    def on_unmount(self) -> None:
        # A thread cannot be killed: ask the trainer and the jobs to end (`tui.launch.let_go` waits).
        if self.control is not None:
            self.control.stop.set()
        for pane in self.job_panes():
            pane.cancel()
        if self._remove_signal_handlers is not None:
            self._remove_signal_handlers()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Start training", "Run the trainer with this config", self.action_start)
        yield SystemCommand("Pause or resume training", "Between steps", self.action_pause)
        yield SystemCommand("Stop training", "Save a checkpoint and end the run", self.action_stop)
        yield SystemCommand("Save a checkpoint now", "After the current step", self.action_checkpoint)
        yield SystemCommand(
            "Smooth the plots", "Toggle a moving average of every curve", lambda: self.action_group("smooth")
        )
        for tab in TABS:
            yield SystemCommand(
                f"Show {tab}", f"Switch to the {tab.title()} tab", lambda t=tab: self.action_show_tab(t)
            )

    # ------------------------------------------------------------------ workers

    @work(thread=True, exclusive=True, group="train", exit_on_error=False, description="training")
    def _train(self, control: TrainerControl, done: threading.Event) -> None:
        try:
            if self.resume and self.run_dir is not None and not self.model.run.history:
                # The run's history first (`tui --resume` shows every step), then its new steps.
                follow_events(
                    events_file(self.run_dir),
                    lambda event: self.inbox.put(Earlier(event)),
                    get_current_worker().cancelled_event,
                    follow=False,
                    max_line=self.max_line,
                )
            self.backend.train(self.cfg, TrainRequest(self.run_dir, self.resume), self.inbox.put, control)
        finally:
            done.set()

    @work(thread=True, exclusive=True, group="source", exit_on_error=False, description="events file")
    def _follow(self, path: Path, follow: bool) -> None:
        follow_events(
            path,
            self.inbox.put,
            get_current_worker().cancelled_event,
            follow=follow,
            stall_after=self.stall_after,
            max_line=self.max_line,
        )

    @work(thread=True, group="source", exit_on_error=False, description="compared events file")
    def _follow_compared(self, index: int, path: Path) -> None:
        follow_events(
            path,
            lambda event: self.inbox.put(Compared(index, event)),
            get_current_worker().cancelled_event,
            follow=False,
            max_line=self.max_line,
        )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker, state = event.worker, event.state
        if worker.group not in ("train", "source") or state not in (
            WorkerState.SUCCESS,
            WorkerState.ERROR,
            WorkerState.CANCELLED,
        ):
            return  # eval, merge and audit workers belong to their tabs
        self.drain_all()
        error = worker.error if state == WorkerState.ERROR else None
        if worker.group == "train":
            self._train_finished(error)
        elif worker.group == "source" and error is not None:
            report_failure(self, "events file", error)
        self.redraw()

    def _train_finished(self, error: BaseException | None) -> None:
        run = self.model.run
        if error is not None and run.status != "failed":
            # The trainer reports its own errors as RunFailed; this one happened outside it.
            self.model.apply(RunFailed(run.step, f"{type(error).__name__}: {error}", traceback_text(error)))
        elif run.active:
            run.status = "stopped" if self.control and self.control.stop.is_set() else "completed"
            run.version += 1
        if run.status == "failed":
            self.model.note("error", run.traceback or run.error)
            self.notify(run.error, title="Training failed", severity="error", timeout=30, markup=False)
        self.refresh_checkpoints()
        if self._quit_when_stopped:
            self.exit(self.exit_code_for_run())


@contextlib.contextmanager
def _panes_may_be_missing() -> Iterator[None]:
    """Timers and tab events can come while the panes are not mounted yet, or already gone."""
    with contextlib.suppress(NoMatches):
        yield

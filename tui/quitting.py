"""What `q` does while something runs: the question, and the answer carried out.

While training it offers `s` (stop after this step with a checkpoint, then quit), `q` (quit now:
the step in progress is not saved) and `n`; while an eval, merge or audit runs, `y` (cancel it and
quit) and `n`. A job is cancelled through its cancel flag; "quit now" closes the console at once
and `tui.launch.let_go` gives the work left a few seconds before the process ends anyway. A mixin
of `tui.app.ConsoleApp`, which provides the model, the control, the job panes and `action_stop`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from tui.screens.confirm import ChoiceScreen

if TYPE_CHECKING:
    from textual.app import App

    _App = App[int]  # the mixin's methods run on the app: type them as its own
else:
    _App = object


class QuitFlow(_App):
    """`action_quit` and what follows it (see the module docstring)."""

    model: Any
    source: str
    control: Any
    quit_now: bool
    training_done: threading.Event | None
    _quit_when_stopped: bool

    if TYPE_CHECKING:  # `tui.app.ConsoleApp`'s

        def job_panes(self) -> list[Any]: ...

        def exit_code_for_run(self) -> int: ...

        def action_stop(self) -> None: ...

    async def action_quit(self) -> None:
        """Quit; while training or a job runs, ask first (see `_quit_answered`)."""
        jobs = [pane for pane in self.job_panes() if pane.running]
        run = self.model.run
        if self.source == "live" and run.active:
            newest = f"step {run.checkpoints[-1].step}" if run.checkpoints else "none yet"
            question = (
                f"Training is {run.status} (step {run.step}/{run.total_steps}).\n\n"
                "s: stop after this step, save a checkpoint, then quit\n"
                f"q: quit now; the step in progress is not saved (newest checkpoint: {newest})\n"
                "n: keep training"
            )
            if jobs:
                question += f"\n\nThe running {' and '.join(p.JOB for p in jobs)} is cancelled either way."
            choices = [("s", "Stop, then quit", "stop"), ("q", "Quit now", "now"), ("n", "Keep training", "keep")]
            self.push_screen(ChoiceScreen(question, choices), self._quit_answered)
            return
        if jobs:
            names = " and ".join(p.JOB for p in jobs)
            question = (
                f"The {names} is running.\n\nCancel it and quit? Nothing of it is kept: its "
                "report or folder is written only when it finishes."
            )
            choices = [("y", f"Cancel the {names} and quit", "now"), ("n", "Keep it running", "keep")]
            self.push_screen(ChoiceScreen(question, choices), self._quit_answered)
            return
        self.exit(self.exit_code_for_run())

    def _quit_answered(self, answer: str | None) -> None:
        if answer in (None, "keep"):
            return
        for pane in self.job_panes():
            if pane.running:
                pane.cancel()
        if answer == "stop":
            self.stop_and_quit()
            return
        self.quit_now = True
        if self.control is not None:
            self.control.stop.set()
        self.exit(self.exit_code_for_run())

    def unfinished_work(self) -> list[tuple[str, threading.Event]]:
        """(what, its end) of the training and the jobs that have not returned yet."""
        ends = [("training", self.training_done)] + [(p.JOB, p.job_ended) for p in self.job_panes()]
        return [(name, end) for name, end in ends if end is not None and not end.is_set()]

    def stop_and_quit(self) -> None:
        """Stop the run after this step with a checkpoint, then quit (a confirmed `q`; SIGTERM, SIGHUP);
        a running eval, merge or audit is cancelled."""
        for pane in self.job_panes():
            if pane.running:
                pane.cancel()
        self._quit_when_stopped = True
        self.action_stop()

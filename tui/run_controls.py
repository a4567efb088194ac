"""`p`, `x` and `c`: pause (PAUSING until the step in progress ends), stop with a checkpoint, and
a checkpoint after this step, each asked of the trainer through its `TrainerControl` and said in a
notification. A mixin of `tui.app.ConsoleApp` (which provides the model and the control).
"""

from __future__ import annotations

from typing import Any


class RunControls:
    """The training run's controls (see the module docstring)."""

    model: Any
    control: Any
    notify: Any

    def action_pause(self) -> None:
        run = self.model.run
        if self.control is None or not run.active:
            return
        if self.control.pause.is_set():
            self.control.pause.clear()
            if run.status == "pausing":  # not paused yet: it simply goes on
                run.status = "running"
            self.notify("Resuming." if run.status == "paused" else "Going on without a pause.")
        else:
            self.control.pause.set()
            if run.status == "running":
                run.status = "pausing"
            self.notify("Pausing after the current step.")
        run.version += 1

    def action_stop(self) -> None:
        if self.control is None or not self.model.run.active:
            return
        self.control.stop.set()
        self.model.run.status = "stopping"
        self.model.run.version += 1
        self.notify("Stopping after the current step, with a checkpoint.")

    def action_checkpoint(self) -> None:
        if self.control is None or not self.model.run.active:
            return
        self.control.save_now.set()
        self.notify("A checkpoint will be written after the current step.")

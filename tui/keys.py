"""Feedback for keys that do nothing where they are pressed, and escape out of a text field.

`s`, `p`, `x` and `c` say why they do nothing (a replay or an attached run is read-only; no run
is training; a stop is under way); the group browser's keys say they belong to the Train tab; in
a text field, where digits type, `escape` gives the focus back to the tab's first widget, so that
`1`-`6` switch tabs again (`alt+1`-`alt+6` work from the field itself). A mixin of
`tui.app.ConsoleApp`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import events
from textual.widgets import Input, TabbedContent

if TYPE_CHECKING:
    from textual.app import App

    _App = App[int]  # the mixin's methods run on the app: type them as its own
else:
    _App = object


class KeyFeedback(_App):
    """`on_key` and the words of each dead key (see the module docstring)."""

    model: Any
    source: str
    FIRST_FOCUS: dict[str, str]

    RUN_KEYS = {"s": "start", "p": "pause", "x": "stop", "c": "checkpoint"}
    GROUP_KEYS = {"d": "drill-down", "left_square_bracket": "older group", "right_square_bracket": "newer group"}
    GROUP_KEYS |= {"f": "follow the newest group", "m": "smoothing"}

    def on_key(self, event: events.Key) -> None:
        """Feedback for keys that do nothing here (a read-only console, no run, another tab), and
        escape out of a text field (where digits type: then 1-6 switch tabs again)."""
        if event.key == "escape" and isinstance(self.focused, Input):
            event.stop()
            self.query_one(self.FIRST_FOCUS[self.query_one(TabbedContent).active]).focus()
            return
        action = self.RUN_KEYS.get(event.key)
        if action is not None and not self.check_action(action, ()):
            self.notify(self.dead_run_key(action), severity="warning", timeout=4)
            return
        what = self.GROUP_KEYS.get(event.key) or ("views" if event.key == "v" else None)
        if what and not self.check_action("group", ("view",) if event.key == "v" else ()):
            where = "the Train, Eval, Merge and Audit tabs" if event.key == "v" else "the Train tab (1)"
            self.notify(f"{event.key}: {what} works on {where}.", severity="warning", timeout=4)

    def dead_run_key(self, action: str) -> str:
        """Why `s`, `p`, `x` or `c` does nothing right now, and what does."""
        if self.source != "live":
            mode = "replays" if self.source == "replay" else "follows"
            return (
                f"This console {mode} a run: read-only. s, p, x and c steer a run it trains "
                "(searchgrpo tui, or --resume)."
            )
        status = self.model.run.status
        if action == "start":
            return f"Training is {status} already; x stops it (s then starts a new run)."
        if status == "stopping":
            return "Training is stopping after the current step, with a checkpoint."
        return "No training is running: s starts it."

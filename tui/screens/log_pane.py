"""The Log tab: run notices, data warnings, job results and errors with their tracebacks.

Lines are wrapped to the pane's width when written, so the pane writes only while it is shown
and has its size (a hidden pane would wrap them at 80 columns), and writes them all again when
its width changes.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import events
from textual.widgets import RichLog

from searchgrpo.events import LogMessage
from tui.format import printable
from tui.model import ConsoleModel

LEVEL_STYLE = {"info": "cyan", "warning": "yellow", "error": "bold red"}


def log_line(entry: LogMessage) -> Text:
    """One entry: time, level, and its text drawn literally (no markup, no terminal escapes)."""
    stamp = time.strftime("%H:%M:%S", time.localtime(entry.time))
    line = Text.assemble((stamp + " ", "dim"), (f"{entry.level:<7} ", LEVEL_STYLE.get(entry.level, "")))
    line.append(printable(str(entry.text)))
    return line


class LogPane(RichLog):
    """Appends the model's log lines it has not shown yet."""

    def __init__(self, model: ConsoleModel, **kwargs) -> None:
        super().__init__(wrap=True, markup=False, max_lines=5000, **kwargs)
        self.model = model
        self._shown = 0
        self._width = 0

    def on_resize(self, event: events.Resize) -> None:
        if self.size.width != self._width and self._width:
            self.clear()
            self._shown = max(self.model.logged - len(self.model.log), 0)
        self.update_from()

    @property
    def line_width(self) -> int:
        """The width lines wrap at: the pane's, less the vertical scrollbar (there or to come)."""
        return max(self.content_region.width - self.styles.scrollbar_size_vertical, 20)

    def update_from(self) -> None:
        if not self.size.width or not self.display or not self.is_on_screen:
            return
        self._width = self.size.width
        log = self.model.log
        new = min(self.model.logged - self._shown, len(log))
        for entry in list(log)[len(log) - new :] if new else ():
            self.write(log_line(entry), width=self.line_width)
        self._shown = self.model.logged

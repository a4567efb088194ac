"""The Log tab: run notices, data warnings, job results and errors with their tracebacks."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import RichLog

from tui.model import ConsoleModel

LEVEL_STYLE = {"info": "cyan", "warning": "yellow", "error": "bold red"}


class LogPane(RichLog):
    """Appends the model's log lines it has not shown yet."""

    def __init__(self, model: ConsoleModel, **kwargs) -> None:
        super().__init__(wrap=True, markup=False, max_lines=5000, **kwargs)
        self.model = model
        self._shown = 0

    def update_from(self) -> None:
        log = self.model.log
        new = min(self.model.logged - self._shown, len(log))
        for entry in list(log)[len(log) - new:] if new else ():
            stamp = time.strftime("%H:%M:%S", time.localtime(entry.time))
            line = Text.assemble((stamp + " ", "dim"), (f"{entry.level:<7} ", LEVEL_STYLE.get(entry.level, "")))
            line.append(entry.text)
            self.write(line)
        self._shown = self.model.logged

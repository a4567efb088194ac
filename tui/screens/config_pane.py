"""The Config tab: the resolved configuration, read-only, with the file it came from."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from searchgrpo.config import Config, describe


class ConfigPane(Vertical):
    """Every config key with its value and documentation."""

    def __init__(self, cfg: Config, source: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cfg = cfg
        self.source = source

    def compose(self) -> ComposeResult:
        yield Static(
            Text.assemble(("config from ", "dim"), (self.source, "bold"), ("  (read-only)", "dim")), id="config-source"
        )
        yield DataTable(id="config-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_column("key", key="key")
        table.add_column("value", key="value")
        table.add_column("meaning", key="meaning")
        for key, value, doc in describe(self.cfg):
            table.add_row(Text(key, style="bold"), Text(repr(value)), Text(doc.split("\n")[0], style="dim"), key=key)

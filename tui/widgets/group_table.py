"""The K samples of one scored group: clues, reward, advantage and reward components."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from searchgrpo.events import GroupScored, SampleView
from tui.format import printable

SHORT = {
    "new_important": "imp", "new_relevant": "rel", "irrelevant": "irr", "already_discovered": "seen",
    "duplicate_clue": "dup", "unparsable": "unparsable", "clue_count_out_of_bounds": "count",
}
"""Short component names for the table (the detail view shows the full ones)."""


def components_text(sample: SampleView) -> Text:
    text = Text()
    for name, value in sample.components.items():
        if value:
            text.append(f"{SHORT.get(name, name)}", style="dim")
            text.append(f"{value:+.2f} ", style="green" if value > 0 else "red")
    return text


def docs_text(sample: SampleView) -> Text:
    important = sum(d.new and d.label == "IMPORTANT" for d in sample.docs)
    relevant = sum(d.new and d.label == "RELEVANT" for d in sample.docs)
    return Text.assemble((f"{important}I ", "bold green" if important else "dim"),
                         (f"{relevant}R ", "yellow" if relevant else "dim"), (f"/{len(sample.docs)}", "dim"))


COMPONENTS_WIDTH = 30


class GroupTable(DataTable):
    """One row per sample; the highlighted row is the one drilled into."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.group: GroupScored | None = None

    def _add_columns(self) -> None:
        # The clue column takes what the fixed columns leave (each cell pads 1 on both sides).
        clues = max(self.size.width - (2 + 7 + 6 + 9 + COMPONENTS_WIDTH) - 6 * 2 - 2, 16)
        for label, width in (("#", 2), ("reward", 7), ("adv", 6), ("new docs", 9), ("clues", clues),
                             ("components", COMPONENTS_WIDTH)):
            self.add_column(label, width=width)

    def on_resize(self) -> None:
        if self.group is not None:
            self.show(self.group, force=True)

    def show(self, group: GroupScored, force: bool = False) -> None:
        if group is self.group and not force:
            return
        row = self.cursor_row
        self.group = group
        self.clear(columns=True)
        self._add_columns()
        best = max(s.reward for s in group.samples) if group.samples else 0.0
        for s in group.samples:
            reward_style = "bold green" if s.reward == best and not group.zero_std else ""
            clues = (Text("unparsable completion", style="red") if s.unparsable
                     else Text(" │ ".join(printable(c, one_line=True) for c in s.clues)))
            self.add_row(
                Text(str(s.index), style="dim"),
                Text(f"{s.reward:+.3f}", style=reward_style, justify="right"),
                Text(f"{s.advantage:+.2f}", style="green" if s.advantage > 0 else "red" if s.advantage < 0 else "dim",
                     justify="right"),
                docs_text(s),
                clues,
                components_text(s),
            )
        self.move_cursor(row=min(max(row, 0), len(group.samples) - 1), animate=False)

    @property
    def sample(self) -> SampleView | None:
        if self.group is None or not 0 <= self.cursor_row < len(self.group.samples):
            return None
        return self.group.samples[self.cursor_row]

"""The K samples of one scored group: clues, reward, advantage and reward components."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from searchgrpo.events import GroupScored, SampleView
from tui.format import printable

SHORT = {
    "new_important": "imp",
    "new_relevant": "rel",
    "irrelevant": "irr",
    "already_discovered": "seen",
    "duplicate_clue": "dup",
    "unparsable": "unparsable",
    "clue_count_out_of_bounds": "count",
    "long_clue": "long",
    "question_copy": "copy",
    "empty_clue": "empty",
    "gain_over_original": "gain",
    "retrieved_doc": "doc",
    "redundant_clue": "redund",
    "invented_number": "invent",
    "cut_clue": "cut",
    "table_copy": "table",
    "goal_copy": "goal",
}
"""Short component names for the table (the drill-down shows the full ones)."""
FIXED = (("#", 2), ("reward", 7), ("adv", 6), ("new docs", 9))
MIN_COMPONENTS = 14
"""Narrower than this, the components column is left out (the drill-down shows them)."""


def components_text(sample: SampleView, width: int | None = None) -> Text:
    """The non-zero weighted components, largest first, as whole `name±value` words; when they do
    not all fit in `width`, the last word is `(+N)` (how many were left out), never half a word."""
    words = [
        (f"{SHORT.get(name, name)}", f"{value:+.2f}", value)
        for name, value in sorted(sample.components.items(), key=lambda kv: -abs(kv[1]))
        if value
    ]
    text, used = Text(), 0
    for i, (name, number, value) in enumerate(words):
        size = len(name) + len(number) + (1 if i else 0)
        rest = len(words) - i - 1
        room = width - used - (len(f" (+{rest})") if rest else 0) if width is not None else size
        if size > room:
            text.append(f"{' ' if i else ''}(+{len(words) - i})", style="dim")
            break
        text.append(" " if i else "")
        text.append(name, style="dim")
        text.append(number, style="green" if value > 0 else "red")
        used += size
    return text


def docs_text(sample: SampleView) -> Text:
    important = sum(d.new and d.label == "IMPORTANT" for d in sample.docs)
    relevant = sum(d.new and d.label == "RELEVANT" for d in sample.docs)
    return Text.assemble(
        (f"{important}I ", "bold green" if important else "dim"),
        (f"{relevant}R ", "yellow" if relevant else "dim"),
        (f"/{len(sample.docs)}", "dim"),
    )


def column_widths(width: int) -> tuple[int, int]:
    """(clues, components) widths for a table `width` columns wide; components 0: left out."""
    columns = len(FIXED) + 2
    rest = width - sum(w for _, w in FIXED) - columns * 2 - 2
    components = min(max(rest * 2 // 5, 0), 40)
    if components < MIN_COMPONENTS:
        return max(rest + 2, 16), 0
    return max(rest - components, 16), components


class GroupTable(DataTable):
    """One row per sample; the highlighted row is the one drilled into."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.group: GroupScored | None = None
        self._components = 0

    def _add_columns(self) -> None:
        clues, self._components = column_widths(self.size.width)
        for label, width in (*FIXED, ("clues", clues)):
            self.add_column(label, width=width)
        if self._components:
            self.add_column("components", width=self._components)

    def on_resize(self) -> None:
        if self.group is not None:
            self.show(self.group, force=True)

    def show(self, group: GroupScored | None, force: bool = False) -> None:
        if group is self.group and not force:
            return
        row = self.cursor_row
        self.group = group
        self.clear(columns=True)
        if group is None:
            return
        self._add_columns()
        best = max(s.reward for s in group.samples) if group.samples else 0.0
        for s in group.samples:
            reward_style = "bold green" if s.reward == best and not group.zero_std else ""
            clues = (
                Text("unparsable completion", style="red")
                if s.unparsable
                else Text(" │ ".join(printable(c, one_line=True) for c in s.clues))
            )
            cells = [
                Text(str(s.index), style="dim"),
                Text(f"{s.reward:+.3f}", style=reward_style, justify="right"),
                Text(
                    f"{s.advantage:+.2f}",
                    style="green" if s.advantage > 0 else "red" if s.advantage < 0 else "dim",
                    justify="right",
                ),
                docs_text(s),
                clues,
            ]
            if self._components:
                cells.append(components_text(s, self._components))
            self.add_row(*cells)
        if group.samples:
            self.move_cursor(row=min(max(row, 0), len(group.samples) - 1), animate=False)

    @property
    def sample(self) -> SampleView | None:
        if self.group is None or not 0 <= self.cursor_row < len(self.group.samples):
            return None
        return self.group.samples[self.cursor_row]

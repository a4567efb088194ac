"""Drill-down into one sample: its reward components, and for each clue the retrieved documents
with the checker's verdict (coloured by label) and, where the checker gives them, its label
probabilities, reason, and whether each was new."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from searchgrpo.events import DocView, SampleView
from tui.format import LABEL_STYLE, printable

PROB_NAMES = ("IMP", "REL", "IRR")
"""Short names of IMPORTANT, RELEVANT and IRRELEVANT (Label order) beside their probabilities."""


def verdict_cell(doc: DocView) -> Text:
    """The label, coloured, and under it each label's probability when the verdict has them; a
    document lazy judging never sent to the checker says so."""
    if not doc.label:
        return Text("not judged", style="dim italic")
    cell = Text(printable(doc.label, one_line=True), style=LABEL_STYLE.get(doc.label, ""))
    probs = doc.probs if isinstance(doc.probs, list) else []
    if len(probs) == len(PROB_NAMES) and all(isinstance(p, (int, float)) and math.isfinite(p) for p in probs):
        for name, p in zip(PROB_NAMES, probs):
            cell.append(f"\n{name} {p:.2f}", style="dim")
    return cell


def render_sample(sample: SampleView) -> RenderableType:
    parts: list[RenderableType] = []
    head = Text.assemble(
        ("sample ", "dim"),
        (f"#{sample.index}", "bold"),
        ("  reward ", "dim"),
        (f"{sample.reward:+.3f}", "bold"),
        ("  advantage ", "dim"),
        (f"{sample.advantage:+.3f}", "green" if sample.advantage > 0 else "red"),
        ("  ", ""),
        (f"{sample.completion_tokens} tokens", "dim"),
    )
    parts.append(head)
    comp = Text()
    for name, value in sample.components.items():
        comp.append(f"{printable(name, one_line=True)} ", style="dim")
        style = "green" if value > 0 else "red" if value < 0 else "dim"
        comp.append(f"{value + 0.0:+.2f}", style=style)  # + 0.0 turns -0.0 into 0.0
        comp.append(f" ({sample.counts.get(name, 0):g})   ", style="dim")
    parts.append(comp)
    if sample.unparsable:
        parts.append(Text("The completion could not be parsed into clues.", style="bold red"))
    parts.append(Text(f"completion: {printable(sample.completion.strip())}", style="dim italic", overflow="fold"))
    for i, clue in enumerate(sample.clues):
        parts.append(
            Text.assemble(
                ("\nclue ", "dim"), (f"{i + 1}", "bold"), (": ", "dim"), (printable(clue, one_line=True), "bold cyan")
            )
        )
        docs = sorted((d for d in sample.docs if d.clue_index == i), key=lambda d: d.rank)
        if not docs:
            parts.append(Text("  no documents retrieved", style="dim"))
            continue
        table = Table(box=None, show_header=True, header_style="dim", expand=True, pad_edge=False)
        table.add_column("#", width=2, justify="right")
        table.add_column("verdict", width=10)
        table.add_column("", width=4)
        # Ids are never wrapped: the column is as wide as the longest (the document text wraps).
        table.add_column("docid", min_width=max(len(d.docid) for d in docs), no_wrap=True)
        table.add_column("document", ratio=1, overflow="fold")
        for d in docs:
            body = Text.assemble((printable(d.title), "bold"), "\n", (printable(d.snippet), "dim"))
            if d.reason:
                body.append(f"\n↳ {printable(d.reason)}", style="italic")
            table.add_row(
                str(d.rank + 1),
                verdict_cell(d),
                Text("new", style="bold") if d.new else Text("seen", style="dim"),
                Text(printable(d.docid, one_line=True), no_wrap=True),
                body,
            )
        parts.append(table)
    return Group(*parts)


class SampleDetail(VerticalScroll):
    """Scrollable detail of the highlighted sample (maximizable: the Train tab's `d` or enter)."""

    ALLOW_MAXIMIZE = True
    BINDINGS = [Binding("enter", "screen.minimize", "Back", show=False)]

    def compose(self):
        yield Static("Select a sample to see its clues, documents and verdicts.", id="sample-body")

    def show(self, sample: SampleView | None) -> None:
        body = self.query_one("#sample-body", Static)
        body.update(render_sample(sample) if sample else "No sample selected.")

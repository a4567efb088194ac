"""Drill-down into one sample: its reward components (and under episode credit its return), and
for each clue its credit (its share of the set's finds, and what the set loses without it) and the
retrieved documents with the checker's verdict (coloured by label) and, where the checker gives
them, its label probabilities, reason, and whether each was new."""

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


def clue_credit_text(share: float, marginal: float) -> Text:
    """A clue's credit beside it: its share of the set's finds and, in brackets, what the set
    would lose without it (leave-one-out); dim when the clue adds nothing of its own."""
    return Text.assemble(
        ("   credit ", "dim"),
        (f"{share:.0%}", "bold green" if marginal > 0 else "dim"),
        (f" (without it {0.0 - marginal:+.2f})", "dim"),
    )


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
    if sample.episode_return is not None:
        head.append("  return ", style="dim")
        head.append(f"{sample.episode_return:+.3f}", style="bold")
        head.append(f" (later rounds {sample.continuation or 0.0:+.3f})", style="dim")
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
        line = Text.assemble(
            ("\nclue ", "dim"), (f"{i + 1}", "bold"), (": ", "dim"), (printable(clue, one_line=True), "bold cyan")
        )
        if i < min(len(sample.clue_shares), len(sample.clue_marginals)):  # a hand-edited log may hold fewer
            line.append_text(clue_credit_text(sample.clue_shares[i], sample.clue_marginals[i]))
        parts.append(line)
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
                unread = d.reason.startswith("unparsable reply")  # the checker's reply was not a label
                body.append(f"\n↳ {printable(d.reason)}", style="bold red" if unread else "italic")
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

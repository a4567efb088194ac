"""The Eval tab: choose the baseline and/or checkpoints, run eval in a worker, and compare.

The form builds a `tui.backend.EvalRequest` and the pane runs it through the backend in a thread
worker (`JobPane`), whose events go to the app's inbox like the trainer's: per round (single
SEARCH rounds), or per episode (whole multi-agent episodes of each question). When the report is
written (read back by `searchgrpo.evaluate.report`, as the CLI does), tables show it: aggregate
metrics with confidence intervals (the fixed-budget recall first), the paired gain of each
checkpoint over the baseline, the evidence recall after each round (episodes), and the headline
metric per question.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Button, Checkbox, DataTable, Input, Label, ProgressBar, SelectionList, Static

from searchgrpo.evaluate.report import (
    EvalReport,
    aggregate_rows,
    curve_rows,
    label,
    load_report,
    paired_rows,
    question_rows,
)
from tui.backend import EvalRequest
from tui.format import bar, plain, printable
from tui.screens.job_pane import JobPane
from tui.widgets.steady_bar import SteadyProgressBar

BASELINE = "baseline"


class EvalPane(JobPane):
    """Eval form on the left, the comparison on the right."""

    JOB, BUTTON, LABEL = "eval", "eval-run", "Run eval"

    def compose(self) -> ComposeResult:
        with Vertical(id="eval-form", classes="form"):
            with VerticalScroll(classes="fields"):
                yield Label("Policies to compare", classes="section")
                yield SelectionList[str](id="eval-policies")
                yield Static(id="eval-run-dir", classes="hint")
                yield Label("States (blank: the whole eval split)")
                yield Input(id="eval-limit", placeholder="all", type="integer")
                yield Label("Samples per state (1: greedy)")
                yield Input("1", id="eval-samples", type="integer")
                yield Checkbox("Whole episodes (per question)", id="eval-episodes")
                yield Label("Rounds per episode (blank: eval.episode_rounds)")
                yield Input(id="eval-rounds", placeholder="default", type="integer")
            with Vertical(classes="run-area"):
                yield Button(self.LABEL, id=self.BUTTON, variant="primary")
                yield Static(id="eval-status")
                yield SteadyProgressBar(total=1, show_eta=False, id="eval-progress")
        with VerticalScroll(id="eval-results", classes="results"):
            yield Static("Run eval to compare policies.", id="eval-report-title")
            yield DataTable(id="eval-aggregate", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="eval-paired", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="eval-curve", cursor_type="row", zebra_stripes=True)
            yield DataTable(id="eval-questions", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#eval-form").border_title = "eval"
        self.query_one("#eval-results").border_title = "comparison"
        self.set_policies(None, [])

    def set_policies(self, run_dir: Path | None, checkpoints: list[tuple[str, str]]) -> None:
        """Offer the baseline and these checkpoints, keeping what was chosen and the cursor."""
        policies = self.query_one("#eval-policies", SelectionList)
        chosen = set(policies.selected) if policies.option_count else {BASELINE}
        cursor = policies.highlighted
        policies.clear_options()
        policies.add_option(("baseline (no adapter)", BASELINE, BASELINE in chosen))
        for name, path in reversed(checkpoints):
            policies.add_option((plain(name), path, path in chosen))
        if cursor is not None and cursor < policies.option_count:
            policies.highlighted = cursor
        self.highlight_first(policies)
        where = (f"{len(checkpoints)} checkpoint(s) in {run_dir}" if run_dir else "no run yet") + (
            "" if checkpoints else ": only the baseline"
        )
        self.query_one("#eval-run-dir", Static).update(Text(printable(where, one_line=True)))

    @on(Button.Pressed, "#eval-run")
    def _run(self) -> None:
        chosen = self.query_one("#eval-policies", SelectionList).selected
        if not chosen:
            self.notify("Choose the baseline or at least one checkpoint.", severity="warning")
            return
        limit = _count(self.query_one("#eval-limit", Input).value, None)
        samples = _count(self.query_one("#eval-samples", Input).value, 1)
        rounds = _count(self.query_one("#eval-rounds", Input).value, None)
        episodes = self.query_one("#eval-episodes", Checkbox).value
        if limit == 0 or samples in (0, None) or rounds == 0:
            self.notify("States, samples and rounds must be whole numbers of at least 1.", severity="warning")
            return
        if episodes and samples != 1:
            self.notify("Episodes are played greedily: set samples to 1.", severity="warning")
            return
        self.start(
            EvalRequest(
                baseline=BASELINE in chosen,
                checkpoints=[p for p in chosen if p != BASELINE],
                num_samples=samples or 1,
                limit=limit,
                episodes=episodes,
                max_rounds=rounds if episodes else None,
            )
        )

    def describe(self, request: EvalRequest) -> str:
        policies = (["baseline"] if request.baseline else []) + [Path(c).name for c in request.checkpoints]
        if request.episodes:
            questions = f"{request.limit} questions" if request.limit else "every eval question"
            rounds = f"{request.max_rounds} rounds" if request.max_rounds else "the default rounds"
            return f"{', '.join(policies)}: whole episodes of {questions}, {rounds} each"
        states = f"{request.limit} states" if request.limit else "the whole eval split"
        samples = "greedy" if request.num_samples == 1 else f"{request.num_samples} samples per state"
        return f"{', '.join(policies)} on {states}, {samples}"

    def run_job(self, request: EvalRequest, stop: threading.Event) -> EvalReport:
        done = self.backend.evaluate(self.cfg, request, self.sink, stop)
        return load_report(done.path)

    def use_result(self, result: EvalReport) -> None:
        self.finish()
        self.show_report(result)

    def status_text(self) -> Text:
        job = self.job
        lines = self.status_head()
        for policy, (done, total) in job.progress.items():
            lines.append(f"{printable(policy, one_line=True)[-16:]:<16} {bar(done, total, 10)}\n")
        return lines

    def redraw_job(self) -> None:
        job = self.job
        units = max(len(job.started.policies) * job.started.states, 1) if job.started else 1
        done = sum(d for d, _ in job.progress.values())
        self.query_one("#eval-progress", ProgressBar).update(total=units, progress=done)

    def show_report(self, report: EvalReport) -> None:
        self.query_one("#eval-results").add_class("-has-report")
        unit = "questions, whole episodes" if report.mode == "episodes" else "states"
        self.query_one("#eval-report-title", Static).update(
            Text.assemble(
                ("report ", "dim"),
                (printable(report.path, one_line=True), "bold"),
                (f"   {report.units} {unit}, top-{report.top_k}", "dim"),
            )
        )
        agg = self.query_one("#eval-aggregate", DataTable)
        agg.clear(columns=True)
        agg.add_columns("metric", *map(plain, report.policies))
        for row in aggregate_rows(report):
            agg.add_row(*map(plain, row))
        agg.border_title = f"aggregate (95% CI); headline: {label(report.headline)}"
        paired = self.query_one("#eval-paired", DataTable)
        paired.clear(columns=True)
        gains = [n for n in report.policies if n in report.paired]
        paired.border_title = "paired gain over the baseline" if gains else "paired gain: needs the baseline"
        paired.add_columns("metric", *(plain(f"{n} − baseline") for n in gains))
        style = {1: "bold green", -1: "bold red", 0: ""}
        for name, cells in paired_rows(report):
            paired.add_row(plain(name), *(Text(text, style=style[sign]) for text, sign in cells))
        curve = self.query_one("#eval-curve", DataTable)
        curve.clear(columns=True)
        curve.display = report.mode == "episodes"
        if report.mode == "episodes":
            curve.border_title = "evidence recall after each round"
            curve.add_columns("round", *map(plain, report.policies))
            for row in curve_rows(report):
                curve.add_row(*map(plain, row))
        questions = self.query_one("#eval-questions", DataTable)
        questions.clear(columns=True)
        questions.border_title = f"{label(report.headline)} per question"
        gain = ["Δ last−first"] if len(report.policies) > 1 else []
        questions.add_columns("id", "question", *map(plain, report.policies), *gain)
        for row in question_rows(report):
            questions.add_row(*map(plain, row[:1]), Text(printable(row[1], one_line=True)[:60]), *map(plain, row[2:]))


def _count(text: str, blank: int | None) -> int | None:
    """A positive whole number typed in a field; `blank` when empty, 0 when not valid."""
    text = text.strip()
    if not text:
        return blank
    try:
        return max(int(text), 0)
    except ValueError:
        return 0

"""The Audit tab: audit the configured checker against gold labels in a worker, and show how it did.

The form names the data (a question set with gold evidence, or blank for the config's data), the
number of (state, document) pairs and the seed; the pane runs `searchgrpo audit-checker`'s job
through the backend in a thread worker (`JobPane`), with a bar of verdicts and their rate. When
the report is written (read back by `searchgrpo.evaluate.audit_report`, as the CLI does), tables
(mounted once there is a report, so the tab costs nothing at the console's start) show it:
agreement, kappa, IMPORTANT precision and recall with CIs and the speed; the confusion
matrix; each stratum; the IMPORTANT rate by document length and by overlap with the question beside
gold's; and the reliability of P(IMPORTANT) when the checker gives probabilities.
"""

from __future__ import annotations

import threading

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Button, DataTable, Input, Label, ProgressBar, Static

from searchgrpo.evaluate.audit_report import (
    AuditReport,
    bias_rows,
    calibration_rows,
    confusion_rows,
    headline_rows,
    load_audit_report,
    strata_rows,
)
from tui.backend import AuditRequest
from tui.format import bar, plain, printable
from tui.screens.job_pane import JobPane
from tui.widgets.steady_bar import SteadyProgressBar

TABLES = (
    ("audit-headline", "agreement with gold (95% CI over questions)", ["figure", "value"]),
    ("audit-confusion", "confusion (rows gold, columns checker)", None),
    ("audit-strata", "by stratum", ["stratum", "pairs", "agreement", "judge IMPORTANT", "gold IMPORTANT"]),
    ("audit-length", "IMPORTANT rate by document length (tokens)", ["bin", "pairs", "judge", "gold", "judge − gold"]),
    ("audit-overlap", "IMPORTANT rate by overlap with the question", ["bin", "pairs", "judge", "gold", "judge − gold"]),
    ("audit-calibration", "reliability of P(IMPORTANT)", ["P(IMPORTANT)", "pairs", "mean P", "gold IMPORTANT"]),
)


class AuditPane(JobPane):
    """Audit form on the left, the report on the right."""

    JOB, BUTTON, LABEL = "audit", "audit-run", "Run audit"

    def compose(self) -> ComposeResult:
        with Vertical(id="audit-form", classes="form"):
            with VerticalScroll(classes="fields"):
                yield Label("Checker audited", classes="section")
                yield Static(id="audit-checker", classes="hint")
                yield Label("Question set with gold (blank: the config's data)")
                yield Input(id="audit-questions", placeholder="the config's data")
                yield Label("Pairs (state, document)")
                yield Input("500", id="audit-pairs", type="integer")
                yield Label("Seed")
                yield Input("0", id="audit-seed", type="integer")
            with Vertical(classes="run-area"):
                yield Button(self.LABEL, id=self.BUTTON, variant="primary")
                yield Static(id="audit-status")
                yield SteadyProgressBar(total=1, show_eta=False, id="audit-progress")
        with VerticalScroll(id="audit-results", classes="results"):
            yield Static("Run the audit to see how the checker agrees with gold.", id="audit-report-title")

    def on_mount(self) -> None:
        self.query_one("#audit-form").border_title = "audit the checker"
        self.query_one("#audit-results").border_title = "agreement with gold"
        c = self.cfg.checker
        what = {
            "gold": "gold (labels from the data)",
            "llm": f"llm at {c.server}",
            "simulated": f"simulated: noise {c.judge_noise:g}, bias {c.judge_bias}",
        }.get(c.backend, c.backend)
        self.query_one("#audit-checker", Static).update(Text(printable(f"checker.backend: {what}", one_line=True)))

    @on(Button.Pressed, "#audit-run")
    def _run(self) -> None:
        questions = self.query_one("#audit-questions", Input).value.strip() or None
        pairs = _whole(self.query_one("#audit-pairs", Input).value)
        seed = _whole(self.query_one("#audit-seed", Input).value)
        if pairs is None or pairs < 1 or seed is None:
            self.notify("Pairs must be a whole number of at least 1, and the seed a whole number.", severity="warning")
            return
        self.start(AuditRequest(questions=questions, pairs=pairs, seed=seed))

    def describe(self, request: AuditRequest) -> str:
        where = request.questions or "the config's data"
        return f"{self.cfg.checker.backend} checker on {request.pairs} pairs of {where}, seed {request.seed}"

    def run_job(self, request: AuditRequest, stop: threading.Event) -> AuditReport:
        done = self.backend.audit(self.cfg, request, self.sink, stop)
        return load_audit_report(done.path)

    def use_result(self, result: AuditReport) -> None:
        self.finish()
        self.show_report(result)

    def status_text(self) -> Text:
        job = self.job
        lines = self.status_head()
        if "verdicts" in job.progress:
            done, total = job.progress["verdicts"]
            lines.append(f"verdicts {bar(done, total, 12)}  {job.stages.get('verdicts', '')}\n")
        return lines

    def redraw_job(self) -> None:
        done, total = self.job.progress.get("verdicts", (0, 1))
        self.query_one("#audit-progress", ProgressBar).update(total=max(total, 1), progress=done)

    def show_report(self, report: AuditReport) -> None:
        self.query_one("#audit-results").add_class("-has-report")
        self.query_one("#audit-report-title", Static).update(
            Text.assemble(
                ("report ", "dim"),
                (printable(report.path, one_line=True), "bold"),
                (f"   {printable(report.checker, one_line=True)}, {report.pairs} pairs", "dim"),
            )
        )
        labels = report.data["three_label"]["labels"]
        rows = {
            "audit-headline": headline_rows(report),
            "audit-confusion": confusion_rows(report),
            "audit-strata": strata_rows(report),
            "audit-length": bias_rows(report, "length"),
            "audit-overlap": bias_rows(report, "overlap"),
            "audit-calibration": calibration_rows(report),
        }
        tables: list[DataTable[str]] = []
        for table_id, title, columns in TABLES:
            if not rows[table_id]:
                continue  # no probabilities: no reliability table
            table: DataTable[str] = DataTable(id=table_id, cursor_type="row", zebra_stripes=True)
            table.border_title = title
            table.add_columns(*(columns or ["", *labels, "recall"]))
            for row in rows[table_id]:
                table.add_row(*map(plain, row))
            tables.append(table)
        self.call_later(self._replace_tables, tables)

    async def _replace_tables(self, tables: list[DataTable]) -> None:
        """The last report's tables out (their ids are reused), this one's in."""
        results = self.query_one("#audit-results", VerticalScroll)
        await results.remove_children(DataTable)
        await results.mount_all(tables)


def _whole(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None

"""The Audit tab: the form builds the request, the real core audits the tiny demo world, the tables
show the report, and a failure is shown in the pane."""

from __future__ import annotations

from textual.widgets import DataTable, Input

from searchgrpo.errors import UserError
from tests.helpers.console import SIZE, click_button, make_app, settle, show_tab, text_of
from tests.helpers.scripted import ScriptedBackend
from tests.helpers.waiting import until
from tui.backend import CoreBackend


class AuditingBackend(ScriptedBackend):
    """The scripted backend, with the real checker audit (it needs no model: the checker is gold or simulated)."""

    def __init__(self, error: BaseException | None = None) -> None:
        super().__init__()
        self.audit_requests: list = []
        self.audit_error = error

    def audit(self, cfg, request, sink, stop):
        self.audit_requests.append(request)
        if self.audit_error is not None:
            raise self.audit_error
        return CoreBackend().audit(cfg, request, sink, stop)


async def open_audit_tab(pilot) -> None:
    """Press 6 until the Audit tab shows (a key pressed while the app is still starting can be lost
    on a busy machine: the state is waited for, the key repeated, no time assumed)."""
    await show_tab(pilot, "6")


def cells(table: DataTable) -> dict[str, list[str]]:
    return {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)[1:]] for i in range(table.row_count)}


async def test_audit_of_a_simulated_judge_fills_the_tables(cfg):
    cfg = cfg.replace(**{"checker.backend": "simulated", "checker.judge_noise": 0.25})
    backend = AuditingBackend()
    app = make_app(cfg, backend=backend)
    async with app.run_test(size=SIZE) as pilot:
        await open_audit_tab(pilot)
        assert "simulated: noise 0.25" in text_of(app, "#audit-checker")
        app.query_one("#audit-pairs", Input).value = "150"
        app.query_one("#audit-seed", Input).value = "2"
        await click_button(pilot, "#audit-run")
        await until(pilot, lambda: app.model.audit.status in ("done", "failed"), "the audit's end")
        await settle(pilot)
        await until(pilot, lambda: bool(app.query("#audit-headline")), "the report's tables")
        (request,) = backend.audit_requests
        assert (request.questions, request.pairs, request.seed) == (None, 150, 2)
        assert app.model.audit.status == "done", app.model.audit.error
        assert app.model.audit.progress["verdicts"] == (150, 150)
        headline = cells(app.query_one("#audit-headline", DataTable))
        agreement = float(headline["agreement (3 labels)"][0].split()[0])
        assert 0.6 < agreement < 0.9
        assert headline["calibration"] == ["no probabilities from this checker"]
        confusion = cells(app.query_one("#audit-confusion", DataTable))
        assert (
            sum(int(c) for row in ("gold IMPORTANT", "gold RELEVANT", "gold IRRELEVANT") for c in confusion[row][:3])
            == 150
        )
        assert set(cells(app.query_one("#audit-strata", DataTable))) == {"gold", "distractor", "bm25"}
        assert app.query_one("#audit-length", DataTable).row_count == 4
        assert not app.query("#audit-calibration")  # no probabilities, no reliability table
        assert "audits/audit-" in text_of(app, "#audit-report-title")
        assert any("audit finished" in line.text for line in app.model.log)
        first = text_of(app, "#audit-report-title")
        app.query_one("#audit-pairs", Input).value = "60"
        await click_button(pilot, "#audit-run")
        await until(pilot, lambda: len(backend.audit_requests) == 2 and app.model.audit.status == "done", "a 2nd audit")
        await settle(pilot)
        await until(pilot, lambda: "60 pairs" in text_of(app, "#audit-report-title"), "the 2nd report")
        assert text_of(app, "#audit-report-title") != first
        assert len(app.query("#audit-headline")) == 1  # the first report's tables were replaced


async def test_audit_failure_and_bad_input_are_shown_in_the_pane(cfg):
    backend = AuditingBackend(UserError("data.traces x: no run's meta.json lists gold_docids; give --questions FILE"))
    app = make_app(cfg, backend=backend)
    async with app.run_test(size=SIZE) as pilot:
        await open_audit_tab(pilot)
        app.query_one("#audit-pairs", Input).value = "0"
        await click_button(pilot, "#audit-run")
        await until(pilot, lambda: any("Pairs must be" in n.message for n in app._notifications), "the refusal")
        assert backend.audit_requests == []  # refused by the form, never sent
        app.query_one("#audit-pairs", Input).value = "20"
        await click_button(pilot, "#audit-run")
        await until(pilot, lambda: app.model.audit.status == "failed", "the audit's failure")
        await settle(pilot)
        assert app.is_running and [r.pairs for r in backend.audit_requests] == [20]
        assert "gold_docids" in text_of(app, "#audit-status")
        assert any("audit failed" in line.text for line in app.model.log)

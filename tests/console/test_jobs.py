"""The Eval and Merge tabs over a scripted backend (tests/helpers/scripted.py)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable, Select, SelectionList

from tests.helpers.console import SIZE, click_button, make_app, make_checkpoint, settle, show_tab, text_of
from tests.helpers.scripted import ScriptedBackend, ScriptedRunner
from tests.helpers.waiting import until
from tui.screens.confirm import ConfirmScreen

RUN = Path("runs/20260101-000000")


async def test_eval_compares_baseline_and_a_checkpoint(cfg):
    make_checkpoint(RUN, 4)
    make_checkpoint(RUN, 8)
    backend = ScriptedBackend(ScriptedRunner(steps=2))
    app = make_app(cfg, backend=backend, start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await show_tab(pilot, "2")
        policies = app.query_one("#eval-policies", SelectionList)
        assert policies.option_count == 3 and policies.selected == ["baseline"]
        step8 = str(RUN / "checkpoints" / "step-000008")
        policies.select(step8)
        app.query_one("#eval-limit").value = "5"
        await click_button(pilot, "#eval-run")
        await settle(pilot)
        (request,) = backend.eval_requests
        assert (request.baseline, request.checkpoints, request.limit, request.num_samples) == (True, [step8], 5, 1)
        assert app.model.eval.status == "done"
        aggregate = app.query_one("#eval-aggregate", DataTable)
        assert [str(c.label) for c in aggregate.columns.values()] == ["metric", "baseline", "step-000008"]
        paired = app.query_one("#eval-paired", DataTable)
        rows = {str(paired.get_row_at(i)[0]): str(paired.get_row_at(i)[1]) for i in range(paired.row_count)}
        assert rows["mean reward"] == "+0.100 [+0.020, +0.200]"
        assert app.query_one("#eval-questions", DataTable).row_count == 3
        assert "evals/report.json" in text_of(app, "#eval-report-title")


async def test_eval_failure_is_shown_in_the_pane(cfg):
    backend = ScriptedBackend()
    backend.eval_error = FileNotFoundError("runs/x/checkpoints/step-000001: no adapter")
    app = make_app(cfg, backend=backend)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "2")
        await click_button(pilot, "#eval-run")
        await settle(pilot)
        assert app.is_running and app.model.eval.status == "failed"
        assert "no adapter" in text_of(app, "#eval-status")
        assert any("eval failed" in line.text for line in app.model.log)


async def test_eval_needs_a_policy(cfg):
    backend = ScriptedBackend()
    app = make_app(cfg, backend=backend)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "2")
        app.query_one("#eval-policies", SelectionList).deselect_all()
        await click_button(pilot, "#eval-run")
        await settle(pilot)
        assert backend.eval_requests == []


async def test_merge_asks_before_overwriting_and_reruns_only_when_confirmed(cfg):
    step4 = str(make_checkpoint(RUN, 4))
    Path("merged/tiny-grpo-step4").mkdir(parents=True)
    backend = ScriptedBackend()
    app = make_app(cfg, backend=backend, run_dir=RUN)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "3")
        app.query_one("#merge-checkpoints", SelectionList).select(step4)
        await click_button(pilot, "#merge-run")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "overwrite question")
        assert "merged/tiny-grpo-step4" in text_of(app, "#confirm-question")
        await pilot.press("n")
        await settle(pilot)
        assert [r.overwrite for r in backend.merge_requests] == [False]
        assert app.model.merge.status == "failed" and "output exists" in text_of(app, "#merge-status")

        await click_button(pilot, "#merge-run")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "overwrite question again")
        await pilot.press("y")
        await until(pilot, lambda: len(backend.merge_requests) == 3, "merge with overwrite")
        await settle(pilot)
        assert [r.overwrite for r in backend.merge_requests] == [False, False, True]
        assert backend.merge_requests[2].checkpoints == [step4] and backend.merge_requests[2].output_dir == "merged"
        assert app.model.merge.status == "done"
        outputs = app.query_one("#merge-outputs", DataTable)
        assert outputs.get_row_at(0)[0] == "merged/tiny-grpo-step4"
        assert [str(cell) for cell in outputs.get_row_at(0)[1:]] == ["3.12e-02", "4.10e-03", "99.2%", "1"]
        assert outputs.border_title == "parity against base + adapter in bfloat16"


async def test_merge_into_a_new_folder_needs_no_question(cfg):
    step4 = str(make_checkpoint(RUN, 4))
    backend = ScriptedBackend()
    app = make_app(cfg, backend=backend, run_dir=RUN)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "3")
        app.query_one("#merge-checkpoints", SelectionList).select(step4)
        app.query_one("#merge-output").value = "out"
        await click_button(pilot, "#merge-run")
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert [r.output_dir for r in backend.merge_requests] == ["out"] and Path("out/tiny-grpo-step4").is_dir()
        status = text_of(app, "#merge-status")
        assert "done" in status and "step-000004  ████████████████ 5/5  done" in status  # full bars once done


async def test_job_requests_are_logged_in_words(cfg):
    step8 = str(make_checkpoint(RUN, 8))
    app = make_app(cfg, run_dir=RUN)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "2")
        app.query_one("#eval-policies", SelectionList).select(step8)
        app.query_one("#eval-limit").value = "5"
        await click_button(pilot, "#eval-run")
        await settle(pilot)
        texts = [e.text for e in app.model.log]
        assert "eval requested: baseline, step-000008 on 5 states, greedy" in texts
        assert not [t for t in texts if "{" in t]  # no raw dicts


async def test_merge_offers_the_dtype_and_lists_the_merges_it_refused(cfg):
    """The Merge tab merges every checkpoint the CLI can: its dtype is the CLI's --dtype, and a
    checkpoint that fails parity is listed with its reason while the others are written."""
    step4, step8 = str(make_checkpoint(RUN, 4)), str(make_checkpoint(RUN, 8))
    backend = ScriptedBackend()
    backend.parity_fails = {step4}
    app = make_app(cfg, backend=backend, run_dir=RUN)
    async with app.run_test(size=SIZE) as pilot:
        await show_tab(pilot, "3")
        app.query_one("#merge-checkpoints", SelectionList).select_all()
        app.query_one("#merge-dtype", Select).value = "float16"
        await click_button(pilot, "#merge-run")
        await until(pilot, lambda: app.model.merge.status == "done", "merged")
        await settle(pilot)
        (request,) = backend.merge_requests
        assert request.dtype == "float16" and sorted(request.checkpoints) == sorted([step4, step8])
        outputs = app.query_one("#merge-outputs", DataTable)
        assert outputs.row_count == 1 and outputs.border_title == "parity against base + adapter in float16"
        status = text_of(app, "#merge-status")
        assert "step-000004  ████████████████ 5/5  refused" in status
        assert "✖ step-000004 refused: merged/tiny-grpo-step4: parity check failed (scripted)" in status
        assert "step-000008  ████████████████ 5/5  done" in status
        texts = [e.text for e in app.model.log]
        assert "merge requested: step-000008, step-000004 into merged/ in float16" in texts
        assert any("1 refused" in t for t in texts)

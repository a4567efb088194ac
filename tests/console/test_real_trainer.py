"""The console running the real trainer (tiny model, 2 steps) in its worker."""

from __future__ import annotations

from searchgrpo.sinks import read_events
from tests.helpers.console import SIZE, click_button, settle, show_tab
from tests.helpers.tiny import tiny_config
from tui.app import ConsoleApp
from tui.widgets import GroupTable


async def test_console_trains_the_tiny_model_for_two_steps(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=2", "train.run_name=console")
    app = ConsoleApp(cfg, "tiny", start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        run = app.model.run
        assert run.status == "completed", run.error
        assert run.step == 2 and run.groups_added == 4  # 2 states per step
        assert [s for s, _ in run.history["reward/mean"]] == [1, 2]
        table = app.query_one(GroupTable)
        assert table.row_count == cfg.grpo.num_generations and table.group is run.groups[-1]
        assert run.checkpoints and run.checkpoints[-1].step == 2
    events = list(read_events(tmp_path / "runs" / "console" / "events.jsonl"))  # so others can attach
    assert [type(e).__name__ for e in events].count("StepFinished") == 2


async def test_console_evaluates_and_merges_a_real_run(tmp_path, monkeypatch):
    """After training, the Eval and Merge tabs drive the real eval and merge on its checkpoint."""
    from textual.widgets import DataTable, SelectionList

    monkeypatch.chdir(tmp_path)
    cfg = tiny_config(tmp_path, "train.max_steps=1", "train.run_name=console")
    app = ConsoleApp(cfg, "tiny", start=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.model.run.status == "completed"
        checkpoint = str(tmp_path / "runs" / "console" / "checkpoints" / "step-000001")
        await show_tab(pilot, "2")
        await settle(pilot)
        policies = app.query_one("#eval-policies", SelectionList)
        policies.select(checkpoint)
        app.query_one("#eval-limit").value = "2"
        await click_button(pilot, "#eval-run")
        await settle(pilot)
        assert app.model.eval.status == "done", app.model.eval
        aggregate = app.query_one("#eval-aggregate", DataTable)
        assert [str(c.label) for c in aggregate.columns.values()] == ["metric", "baseline", "step-000001"]
        await show_tab(pilot, "3")
        await settle(pilot)
        app.query_one("#merge-checkpoints", SelectionList).select(checkpoint)
        app.query_one("#merge-output").value = str(tmp_path / "merged")
        await click_button(pilot, "#merge-run")
        await settle(pilot)
    assert (tmp_path / "merged" / "tiny-grpo-step1" / "config.json").is_file()

"""The console running the real trainer (tiny model, 2 steps) in its worker."""

from __future__ import annotations

from searchgrpo.sinks import read_events
from tests.conftest import tiny_config
from tests.tui.conftest import SIZE, settle
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

"""The agent log tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/data/test_agent_log.py`."""

from __future__ import annotations

import math

from searchgrpo.data.agent_log import import_agent_logs
from tests.helpers.tiny import tiny_config
from tests.unit.data.test_agent_log import EXAMPLE, EXAMPLE_CORPUS


def test_one_tiny_training_step_on_the_imported_example(tmp_path):
    from searchgrpo.events import StepFinished
    from searchgrpo.train.trainer import Trainer

    import_agent_logs([EXAMPLE], tmp_path / "traces")
    cfg = tiny_config(
        tmp_path, "train.max_steps=1", f"data.traces={tmp_path / 'traces'}", f"data.corpus={EXAMPLE_CORPUS}"
    )
    events: list = []
    summary = Trainer(cfg, sink=events.append).train()
    (step,) = [e for e in events if isinstance(e, StepFinished)]
    assert summary.step == 1 and summary.reason == "completed"
    assert math.isfinite(step.metrics["reward/mean"]) and math.isfinite(step.metrics["loss/total"])

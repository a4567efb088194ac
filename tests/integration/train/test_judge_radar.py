"""The judge radar tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/train/test_judge_radar.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchgrpo.agents.checker import GoldChecker
from searchgrpo.agents.simulated_checker import SimulatedChecker
from searchgrpo.events import EvalFinished, LogMessage, RunFinished, StepFinished
from searchgrpo.train import judge_radar
from searchgrpo.train.checkpoints import list_checkpoints
from tests.helpers.tiny import tiny_config
from tests.unit.train.test_judge_radar import expected_from_events, real_clues, steps_of, train_and_collect


@pytest.mark.parametrize("backend", ["simulated", "gold"])
def test_each_step_reports_the_radar_of_its_retrieved_documents(tmp_path, monkeypatch, backend):
    real_clues(monkeypatch)
    judge = ("checker.judge_noise=0.3", "checker.judge_seed=3") if backend == "simulated" else ()
    cfg = tiny_config(tmp_path, f"checker.backend={backend}", *judge, "train.max_steps=3", "grpo.dynamic_sampling=true")
    trainer, events = train_and_collect(cfg)
    steps = steps_of(events)
    assert len(steps) == 3
    for step, groups in steps:
        radar = {k: v for k, v in step.metrics.items() if k.startswith(("checker/important_rate", "checker/gold_"))}
        assert radar == pytest.approx(expected_from_events(groups, trainer.dataset)), step.step
        assert step.metrics["checker/judge_drift"] == 0.0  # 3 steps: fewer than two windows
    precisions = [s.metrics["checker/gold_precision"] for s, _ in steps]
    if backend == "gold":  # the gold checker agrees with gold, trivially
        assert all(p == 1.0 for p in precisions)
        assert all(s.metrics["checker/gold_recall"] == 1.0 for s, _ in steps)
        assert all(s.metrics["checker/important_rate_minus_gold"] == 0.0 for s, _ in steps)
    else:  # a judge with 30% noise: it calls some non-gold documents IMPORTANT and misses gold ones
        assert min(precisions) < 1.0
        assert any(s.metrics["checker/important_rate_minus_gold"] != 0.0 for s, _ in steps)


def test_judge_drift_warns_and_stops_with_the_best_checkpoint_named(tmp_path, monkeypatch):
    """The drift rule over 1-step windows: step 1 judged by gold, step 2 by a judge that calls every
    long document IMPORTANT (what a policy that learned to bring long documents shows the radar)."""
    real_clues(monkeypatch)
    monkeypatch.setattr(judge_radar, "DRIFT_WINDOW", 1)
    cfg = tiny_config(
        tmp_path,
        "train.max_steps=4",
        "train.eval_every=1",
        "train.save_every=1",
        "train.stop_on_judge_drift=true",
        "train.run_name=drift",
    )

    def swap_judge(trainer, event) -> None:
        if isinstance(event, StepFinished) and event.step == 1:
            gold = GoldChecker(trainer.dataset.corpus, trainer.dataset.labels)
            trainer.env.checker = SimulatedChecker(gold, bias="length", bias_rate=1.0)

    trainer, events = train_and_collect(cfg, swap_judge)
    (first, _), (second, _) = steps_of(events)
    assert second.metrics["checker/important_rate"] >= first.metrics["checker/important_rate"] + 0.05
    assert second.metrics["checker/gold_precision"] <= first.metrics["checker/gold_precision"] - 0.05
    assert (first.metrics["checker/judge_drift"], second.metrics["checker/judge_drift"]) == (0.0, 1.0)

    warnings = [e.text for e in events if isinstance(e, LogMessage) and e.level == "warning"]
    assert any(
        w.startswith("step 2: judge drift: the checker's IMPORTANT rate of retrieved documents rose") for w in warnings
    )
    (stop,) = [w for w in warnings if w.startswith("stopped on judge drift")]
    assert isinstance(events[-1], RunFinished) and (events[-1].step, events[-1].reason) == (2, "stopped")
    assert [c.step for c in list_checkpoints(trainer.run_dir)] == [1, 2]

    recall = {e.step: e.metrics["eval/recall_at_10"] for e in events if isinstance(e, EvalFinished)}
    assert sorted(recall) == [1, 2]
    best = min(recall, key=lambda s: (-recall[s], s))
    best_path = Path(trainer.run_dir) / "checkpoints" / f"step-{best:06d}"
    assert stop == (
        f"stopped on judge drift at step 2 (train.stop_on_judge_drift), checkpoint "
        f"{Path(trainer.run_dir) / 'checkpoints' / 'step-000002'}; "
        f"best checkpoint by held-out recall@10: {best_path} ({recall[best]:.3f})"
    )

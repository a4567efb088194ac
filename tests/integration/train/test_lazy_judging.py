"""The lazy judging tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/train/test_lazy_judging.py`."""

from searchgrpo.events import GroupScored, StepFinished
from searchgrpo.train.trainer import Trainer
from tests.helpers.tiny import tiny_config


def test_training_with_lazy_judging_takes_exactly_the_steps_of_judging_everything(tmp_path):
    common = ("train.max_steps=3", "train.states_per_step=3", "grpo.dynamic_filter=finds", "grpo.dynamic_max_retries=3")
    runs = {}
    for lazy in (False, True):
        events = []
        cfg = tiny_config(tmp_path / str(lazy), *common, f"grpo.lazy_judging={str(lazy).lower()}")
        Trainer(cfg, sink=events.append).train()
        runs[lazy] = events
    steps = {lazy: [e.metrics for e in ev if isinstance(e, StepFinished)] for lazy, ev in runs.items()}
    for off, on in zip(steps[False], steps[True]):
        for key in ("loss/total", "reward/mean", "dynamic/sampled_groups", "dynamic/replaced_groups"):
            assert on[key] == off[key], key
        assert on["checker/requests"] + on["checker/requests_skipped"] == off["checker/requests"]
    groups = {lazy: [e for e in ev if isinstance(e, GroupScored)] for lazy, ev in runs.items()}
    assert [(g.step, g.state_id, g.in_batch) for g in groups[True]] == [
        (g.step, g.state_id, g.in_batch) for g in groups[False]
    ]
    for a, b in zip(groups[True], groups[False]):
        if a.in_batch:
            assert [s.reward for s in a.samples] == [s.reward for s in b.samples]
        elif any(d.label == "" for s in a.samples for d in s.docs):  # never judged: shown without verdicts
            assert all(d.label == "" for s in a.samples for d in s.docs)

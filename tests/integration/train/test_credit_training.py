"""Episode credit, per-clue advantages and the informative pool in the trainer (issue 23): the
advantages follow the returns, the step logs the credit, and a resumed run (or a pipelined one)
trains as it should."""

import json
import statistics

import pytest

from searchgrpo.errors import UserError
from searchgrpo.events import GroupScored, StepFinished
from searchgrpo.train.checkpoints import latest_checkpoint
from searchgrpo.train.trainer import Trainer, TrainerControl
from tests.helpers.tiny import tiny_config

CREDIT = (
    "grpo.credit=episode",
    "grpo.credit_horizon=2",
    "reward.per_clue=true",
    "train.state_sampler=informative",
    "train.informative_retry=2",
    "grpo.dynamic_filter=finds",
    "train.max_steps=4",
)


def run(cfg, stop_after=None, **kw):
    control, events = TrainerControl(), []

    def sink(event):
        events.append(event)
        if stop_after is not None and isinstance(event, StepFinished) and event.step == stop_after:
            control.stop.set()

    return Trainer(cfg, sink=sink, control=control, **kw).train(), events


def metrics(events):
    return {
        e.step: {k: v for k, v in e.metrics.items() if not k.startswith("time/") and not k.endswith("time_share")}
        for e in events
        if isinstance(e, StepFinished)
    }


def test_episode_credit_trains_on_returns_and_resumes_exactly(tmp_path):
    summary, straight = run(tiny_config(tmp_path / "a", *CREDIT, "train.run_name=straight"))
    steps = {e.step: e.metrics for e in straight if isinstance(e, StepFinished)}
    for m in steps.values():
        assert m["credit/branches"] == m["dynamic/sampled_groups"] * 3  # every sampled group's K branches
        assert m["credit/return"] == pytest.approx(m["credit/own_value"] + m["credit/continuation_value"])
        assert 0 < m["credit/continuation_rounds"] <= 2
        assert 0 < m["credit/continuation_time_share"] < 1 and m["time/continuation"] > 0
    groups = [e for e in straight if isinstance(e, GroupScored)]
    assert all(s.episode_return is not None for g in groups for s in g.samples)
    for g in groups:
        returns = [s.episode_return for s in g.samples]
        assert returns == pytest.approx([s.reward + s.continuation for s in g.samples])
        assert g.zero_std == (max(returns) - min(returns) < 1e-6)  # judged on the returns
        if g.in_batch and not g.zero_std:  # the advantages are the returns', group-normalised
            mean, std = statistics.fmean(returns), statistics.stdev(returns)
            assert [s.advantage for s in g.samples] == pytest.approx(
                [(r - mean) / (std + 1e-4) for r in returns], abs=1e-4
            )
    # The checkpoint holds the pool's memory; a run stopped after step 2 and resumed takes the
    # same steps as the straight one.
    state = json.loads((latest_checkpoint(summary.run_dir).path / "trainer_state.json").read_text())
    assert "missed_at" in state["state_pool"]
    cfg = tiny_config(tmp_path / "b", *CREDIT, "train.run_name=split", "train.save_every=2")
    first_summary, first = run(cfg, stop_after=2)
    assert first_summary.step == 2
    # A hand-broken memory is refused in one line naming the file; restored, the run resumes.
    state_file = latest_checkpoint(first_summary.run_dir).path / "trainer_state.json"
    saved = state_file.read_text()
    state_file.write_text(json.dumps({**json.loads(saved), "state_pool": {"missed_at": {"s": "soon"}}}))
    with pytest.raises(UserError, match=r"trainer_state.json: state_pool cannot be read .*remove the key"):
        Trainer(cfg, resume=True, run_dir=first_summary.run_dir).train()
    state_file.write_text(saved)
    _, second = run(cfg, resume=True, run_dir=first_summary.run_dir)
    assert {**metrics(first), **metrics(second)} == metrics(straight)


def test_episode_credit_with_the_pipeline(tmp_path):
    summary, events = run(tiny_config(tmp_path, *CREDIT, "train.max_steps=3", "train.pipeline=on"))
    assert summary.step == 3 and summary.reason == "completed"
    steps = {e.step: e.metrics for e in events if isinstance(e, StepFinished)}
    # Every step's groups were paid their returns on the trainer's thread (the next step's after this
    # step's update), and the scoring thread still labelled the next step's documents.
    assert all(steps[s]["credit/branches"] >= 6 and "time/continuation" in steps[s] for s in (1, 2, 3))
    assert all("time/score_wait" in steps[s] for s in (2, 3))

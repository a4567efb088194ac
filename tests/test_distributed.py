"""Data parallelism on CPU: 2 gloo processes take the same steps as 1 process."""

import math

import pytest

from searchgrpo.sinks import read_events
from searchgrpo.train.checkpoints import latest_checkpoint
from tests.conftest import SETS, searchgrpo

pytestmark = pytest.mark.slow  # trains or runs the CLI: the full tier (`make test`), not `make test-fast`
COMMON = [*SETS, "--set", "train.states_per_step=4", "--set", "train.max_steps=3", "--set", "grpo.beta=0.05",
          "--set", "train.eval_every=3", "--set", "train.eval_states=6"]


def _metrics(run_dir):
    events = list(read_events(run_dir / "events.jsonl"))
    steps = {e.step: e.metrics for e in events if type(e).__name__ == "StepFinished"}
    groups = [(e.state_id, [s.clues for s in e.samples]) for e in events if type(e).__name__ == "GroupScored"]
    evals = [e.metrics for e in events if type(e).__name__ == "EvalFinished"]
    return steps, groups, evals


def test_two_processes_match_one(tmp_path):
    one = searchgrpo("train", "--headless", *COMMON, "--set", "train.run_name=one", cwd=tmp_path)
    out, _ = one.communicate(timeout=300)
    assert one.returncode == 0, out
    two = searchgrpo("train", *COMMON, "--set", "train.run_name=two", "--num-processes", "2", cwd=tmp_path)
    out, _ = two.communicate(timeout=300)
    assert two.returncode == 0, out
    steps1, groups1, evals1 = _metrics(tmp_path / "runs" / "one")
    steps2, groups2, evals2 = _metrics(tmp_path / "runs" / "two")
    # The same states, in the same order, with the same sampled clues; dynamic sampling's
    # replacements included (each step samples at least its 4 states).
    assert groups1 == groups2
    assert len(groups1) == sum(m["dynamic/sampled_groups"] for m in steps1.values()) >= 12
    assert sorted(steps1) == sorted(steps2) == [1, 2, 3]
    for step in steps1:
        for key, value in steps1[step].items():
            if key.startswith("time/"):
                continue
            # Gradients are summed in another order across processes: equal up to float rounding.
            assert math.isclose(value, steps2[step][key], rel_tol=1e-4, abs_tol=1e-6), (step, key)
    assert evals1 == evals2
    assert latest_checkpoint(tmp_path / "runs" / "two").step == 3

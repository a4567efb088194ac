"""The training loop's refreshed states and its pipeline (sampling the next step during this one's
update): refreshed states come from the current adapter, a pipelined run trains on samples one
update old and resumes bit for bit (the rest of the loop: `test_trainer.py`)."""

import pytest

from searchgrpo.events import (
    StepFinished,
)
from searchgrpo.train.checkpoints import latest_checkpoint
from searchgrpo.train.trainer import Trainer
from tests.helpers.tiny import tiny_config
from tests.integration.train.test_trainer import run, run_until, step_groups

REFRESH = (
    "train.refresh_states_every=2",
    "train.refresh_questions=4",
    "train.refresh_mix=1.0",
    "train.refresh_rounds=3",
    "train.max_steps=4",
)


def test_refreshed_states_come_from_the_current_adapter_and_survive_a_resume(tmp_path):
    _, _, straight = run(tiny_config(tmp_path / "a", *REFRESH, "train.run_name=straight"))
    m2 = next(e for e in straight if isinstance(e, StepFinished) and e.step == 2).metrics
    assert m2["refresh/questions"] == 4 and m2["refresh/states"] > 0
    assert all("/refresh-" not in g.state_id for g in step_groups(straight, 1) + step_groups(straight, 2))
    later = [g for g in step_groups(straight, 3) if g.in_batch]
    assert later and all("/refresh-000002/" in g.state_id for g in later)  # refresh_mix = 1
    assert (tmp_path / "a" / "runs" / "straight" / "refreshed" / "step-000002.json").is_file()

    cfg = tiny_config(tmp_path / "b", *REFRESH, "train.run_name=split", "train.save_every=3")
    summary, first = run_until(cfg, 3)
    _, _, second = run(cfg, resume=True, run_dir=summary.run_dir)

    def metrics(events):
        return {
            e.step: {k: v for k, v in e.metrics.items() if not k.startswith("time/") and k != "refresh/time_s"}
            for e in events
            if isinstance(e, StepFinished)
        }

    assert {**metrics(first), **metrics(second)} == metrics(straight)


def test_a_pipelined_run_trains_on_samples_one_update_old(tmp_path):
    common = ("train.max_steps=3", "grpo.beta=0.05")
    _, _, plain = run(tiny_config(tmp_path / "off", *common))
    trainer, summary, piped = run(tiny_config(tmp_path / "on", *common, "train.pipeline=on"))
    assert summary.step == 3 and summary.reason == "completed"
    steps = {e.step: e.metrics for e in piped if isinstance(e, StepFinished)}
    plain_steps = {e.step: e.metrics for e in plain if isinstance(e, StepFinished)}
    # Step 1 samples with the same weights and seeds either way; from step 2 on the samples were
    # drawn before the previous update, and their verdicts came on the scoring thread.
    assert steps[1]["reward/mean"] == plain_steps[1]["reward/mean"]
    assert steps[1]["loss/total"] == pytest.approx(plain_steps[1]["loss/total"], abs=1e-5)
    # Time goes to the step whose wall time it takes: step s draws step s+1's samples (and their old
    # log-probs); step s+1 waits for their verdicts.
    assert all("time/old_logprobs" in steps[s] for s in (1, 2)) and "time/old_logprobs" not in steps[3]
    assert all("time/score_wait" in steps[s] for s in (2, 3))
    assert "time/score_wait" not in plain_steps[2]
    # The old log-probs are the sampling weights': after an update the ratio moves off 1.
    assert steps[1]["loss/clip_frac"] == 0.0
    assert trainer.runner._scorer is None  # closed with the run


def test_pending_rollouts_score_on_a_thread_as_they_would_in_line(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from searchgrpo.train.rollouts import finish_rollout, start_rollout

    cfg = tiny_config(tmp_path, "train.max_steps=1")
    trainer = Trainer(cfg)
    trainer.setup()
    try:
        _, states = trainer.states_for_step(0)
        seed_of = trainer.runner._seed_of(0)
        kw = dict(prompt_of=trainer.prompts, seed_of=seed_of)
        inline = finish_rollout(
            start_rollout(cfg.grpo, trainer.policy, trainer.env, states, **kw),
            cfg.grpo,
            trainer.policy,
            trainer.env,
            **kw,
        )
        with ThreadPoolExecutor(1) as scorer:
            pending = start_rollout(cfg.grpo, trainer.policy, trainer.env, states, scorer=scorer, keep_old=True, **kw)
            threaded = finish_rollout(pending, cfg.grpo, trainer.policy, trainer.env, keep_old=True, **kw)
        assert [g.rewards for g in threaded.sampled] == [g.rewards for g in inline.sampled]
        assert all(g.old_logp is not None and g.old_logp.shape[0] == cfg.grpo.num_generations for g in threaded.batch)
        assert all(g.old_logp is None for g in inline.batch)
    finally:
        trainer.close()


def test_a_pipelined_run_trains_on_the_refreshed_states_right_after_a_refresh(tmp_path):
    """Pipelined, step 3's samples are drawn during step 2, before the refresh that ends step 2:
    the refresh must throw them away, so that step 3 trains on refreshed states (refresh_mix 1),
    sampled after the refresh, as an unpipelined run does."""
    _, _, events = run(tiny_config(tmp_path, *REFRESH, "train.pipeline=on"))
    later = [g for g in step_groups(events, 3) if g.in_batch]
    assert later and all("/refresh-000002/" in g.state_id for g in later), [g.state_id for g in later]


PIPELINED_REFRESH = (*REFRESH, "train.pipeline=on", "grpo.beta=0.05")


@pytest.fixture(scope="module")
def pipelined_straight(tmp_path_factory):
    """An uninterrupted pipelined run of 4 steps with a refresh after step 2."""
    _, _, events = run(tiny_config(tmp_path_factory.mktemp("straight"), *PIPELINED_REFRESH, "train.run_name=s"))
    return events


def metrics_by_step(events):
    return {
        e.step: {k: v for k, v in e.metrics.items() if not k.startswith("time/") and k != "refresh/time_s"}
        for e in events
        if isinstance(e, StepFinished)
    }


@pytest.mark.parametrize("stop_after", [3, 2])
def test_a_pipelined_run_resumes_bit_for_bit(tmp_path, pipelined_straight, stop_after):
    """Stopped after step 3, the checkpoint's step 4 was to train on samples drawn before update 3
    (with the weights of step 3): the resumed run draws them with those weights again. Stopped
    after step 2 (the refresh step), step 3 samples afresh either way. Both equal the
    uninterrupted run, every metric bit for bit (CPU)."""
    cfg = tiny_config(tmp_path, *PIPELINED_REFRESH, "train.run_name=split")
    summary, first = run_until(cfg, stop_after)
    assert summary.reason == "stopped" and latest_checkpoint(summary.run_dir).step == stop_after
    _, resumed, second = run(cfg, resume=True, run_dir=summary.run_dir)
    assert resumed.step == 4
    assert {**metrics_by_step(first), **metrics_by_step(second)} == metrics_by_step(pipelined_straight)


def test_a_pipelined_run_stopped_mid_step_resumes_bit_for_bit(tmp_path, pipelined_straight):
    """A stop asked for while step 3 runs: step 3 draws no samples for step 4 (the run is ending),
    yet the checkpoint keeps the weights step 4's samples were to be drawn with, so the resumed run
    still equals the uninterrupted one."""

    class StopDuringStep3(Trainer):
        def _wait_if_paused(self) -> bool:
            go = super()._wait_if_paused()
            if self.step == 2:  # step 3 is about to run: the stop arrives while it does
                self.control.stop.set()
            return go

    cfg = tiny_config(tmp_path, *PIPELINED_REFRESH, "train.run_name=split")
    events: list = []
    summary = StopDuringStep3(cfg, sink=events.append).train()
    assert summary.reason == "stopped" and latest_checkpoint(summary.run_dir).step == 3
    _, _, second = run(cfg, resume=True, run_dir=summary.run_dir)
    assert {**metrics_by_step(events), **metrics_by_step(second)} == metrics_by_step(pipelined_straight)

"""The training loop on the tiny model: learning, events, checkpoints, resume and control."""

import json
import threading

import pytest
import torch
from safetensors.torch import load_file

from searchgrpo.events import (
    CheckpointSaved,
    EvalFinished,
    GroupScored,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StepFinished,
    event_from_dict,
    event_to_dict,
)
from searchgrpo.train.checkpoints import latest_checkpoint, list_checkpoints
from searchgrpo.train.trainer import Trainer, TrainerControl
from tests.conftest import tiny_config

pytestmark = pytest.mark.slow  # trains or runs the CLI: the full tier (`make test`), not `make test-fast`


def run(cfg, **kw):
    events = []
    trainer = Trainer(cfg, sink=events.append, **kw)
    summary = trainer.train()
    return trainer, summary, events


def test_two_steps_change_lora_but_not_the_base(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=2", "grpo.beta=0.1", "train.eval_every=2", "train.eval_states=3")
    trainer = Trainer(cfg, sink=lambda e: None)
    trainer.setup()
    before = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}
    events = []
    trainer.sink = events.append
    trainer._loop()
    after = dict(trainer.policy.model.named_parameters())
    lora = [n for n in before if "lora_" in n]
    base = [n for n in before if "lora_" not in n]
    assert lora and base
    assert any(not torch.equal(before[n], after[n]) for n in lora)
    assert all(torch.equal(before[n], after[n]) for n in base)

    kinds = [type(e) for e in events]
    assert kinds[0] is RunStarted and kinds[-1] is RunFinished
    assert kinds.count(StepFinished) == 2 and kinds.count(GroupScored) == 4
    assert EvalFinished in kinds and CheckpointSaved in kinds
    group = next(e for e in events if isinstance(e, GroupScored))
    assert len(group.samples) == 3
    assert all(set(s.components) == set(s.counts) for s in group.samples)
    for e in events:  # every event survives a JSON round trip
        assert event_from_dict(json.loads(json.dumps(event_to_dict(e)))) == e
    step = next(e for e in events if isinstance(e, StepFinished)).metrics
    for key in ("reward/mean", "reward/frac_zero_std", "loss/kl", "loss/clip_frac", "train/lr", "time/step",
                "time/generate", "time/score", "time/loss", "tokens/completion", "reward/new_important"):
        assert key in step
    assert step["loss/kl"] >= 0


def test_checkpoint_holds_everything_to_resume(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=2", "train.save_every=1", "train.keep_last=1")
    trainer, summary, _ = run(cfg)
    found = list_checkpoints(summary.run_dir)
    assert [c.step for c in found] == [2]  # keep_last
    ckpt = found[0].path
    for name in ("adapter/adapter_model.safetensors", "adapter/adapter_config.json", "optimizer.pt",
                 "scheduler.pt", "rng.safetensors", "trainer_state.json"):
        assert (ckpt / name).is_file(), name
    assert "torch_cpu" in load_file(str(ckpt / "rng.safetensors"))
    state = json.loads((ckpt / "trainer_state.json").read_text())
    assert state["step"] == 2 and state["base_model"] == "tiny"
    assert torch.load(ckpt / "optimizer.pt", weights_only=True)["state"]
    assert (summary.run_dir / "config.yaml").is_file()


def test_resume_reproduces_an_uninterrupted_run(tmp_path):
    common = ("train.max_steps=4", "grpo.beta=0.05", "grpo.num_iterations=2")
    _, _, straight = run(tiny_config(tmp_path / "a", *common, "train.run_name=straight"))
    # The same run, stopped after step 2 (with a checkpoint), then resumed.
    cfg = tiny_config(tmp_path / "b", *common, "train.run_name=split")
    control = TrainerControl()
    first = []

    def stop_after_two(event):
        first.append(event)
        if isinstance(event, StepFinished) and event.step == 2:
            control.stop.set()

    summary = Trainer(cfg, sink=stop_after_two, control=control).train()
    assert summary.reason == "stopped" and summary.step == 2
    assert latest_checkpoint(summary.run_dir).step == 2
    _, resumed_summary, second = run(cfg, resume=True, run_dir=summary.run_dir)
    assert resumed_summary.step == 4 and resumed_summary.reason == "completed"
    assert next(e for e in second if isinstance(e, RunStarted)).start_step == 2

    def metrics(events):
        return {e.step: {k: v for k, v in e.metrics.items() if not k.startswith("time/")}
                for e in events if isinstance(e, StepFinished)}

    assert {**metrics(first), **metrics(second)} == metrics(straight)


def test_pause_resume_and_save_now(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=3")
    control = TrainerControl()
    control.pause.set()
    events = []
    trainer = Trainer(cfg, sink=events.append, control=control)
    thread = threading.Thread(target=trainer.train)
    thread.start()
    for _ in range(600):
        if any(isinstance(e, RunPaused) for e in events):
            break
        thread.join(0.05)
    assert any(isinstance(e, RunPaused) for e in events)
    assert not any(isinstance(e, StepFinished) for e in events)
    control.save_now.set()
    for _ in range(200):
        if any(isinstance(e, CheckpointSaved) for e in events):
            break
        thread.join(0.05)
    assert any(isinstance(e, CheckpointSaved) and e.step == 0 for e in events)
    control.pause.clear()
    thread.join(120)
    assert not thread.is_alive()
    assert any(isinstance(e, RunResumed) for e in events)
    assert isinstance(events[-1], RunFinished) and events[-1].step == 3


def test_resume_refuses_another_base_model(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=1", "train.run_name=r")
    _, summary, _ = run(cfg)
    state_file = latest_checkpoint(summary.run_dir).path / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state["base_model"] = "some/other-model"
    state_file.write_text(json.dumps(state))
    from searchgrpo.errors import UserError

    with pytest.raises(UserError, match="trained on 'some/other-model'"):
        Trainer(cfg, resume=True, run_dir=summary.run_dir).train()


def step_groups(events, step):
    return [e for e in events if isinstance(e, GroupScored) and e.step == step]


def test_dynamic_sampling_keeps_the_batch_full_of_informative_groups(tmp_path):
    cfg = tiny_config(tmp_path, "train.max_steps=3", "train.states_per_step=3")
    _, _, events = run(cfg)
    for step in (1, 2, 3):
        groups = step_groups(events, step)
        m = next(e for e in events if isinstance(e, StepFinished) and e.step == step).metrics
        trained = [g for g in groups if g.in_batch]
        assert len(trained) == 3  # the batch keeps its size
        assert m["dynamic/sampled_groups"] == len(groups) and m["dynamic/rounds"] >= 1
        # Replaced groups are exactly the zero-variance ones left out, and they are only left out
        # when an informative group took their place.
        replaced = [g for g in groups if not g.in_batch]
        assert all(g.zero_std for g in replaced) and m["dynamic/replaced_groups"] == len(replaced)
        assert m["reward/frac_zero_std"] == pytest.approx(sum(g.zero_std for g in trained) / 3)
        if replaced:
            assert not any(g.zero_std for g in trained)
        assert len({g.state_id for g in groups}) == len(groups)  # a refill never repeats a state of the step


def test_dynamic_sampling_gives_up_after_its_retries(tmp_path):
    # With every reward weight 0 each group has equal rewards: no round can find an informative one.
    zero = [f"reward.{name}=0" for name in ("new_important", "new_relevant", "retrieved_doc", "duplicate_clue",
                                             "unparsable", "clue_count_out_of_bounds", "long_clue", "question_copy",
                                             "empty_clue", "invented_number", "cut_clue")]
    cfg = tiny_config(tmp_path, "train.max_steps=1", "grpo.dynamic_max_retries=2", *zero)
    _, _, events = run(cfg)
    m = next(e for e in events if isinstance(e, StepFinished)).metrics
    assert m["dynamic/rounds"] == 3 and m["dynamic/sampled_groups"] > 2 and m["reward/frac_zero_std"] == 1.0
    assert sum(g.in_batch for g in step_groups(events, 1)) == 2
    off = tiny_config(tmp_path / "off", "train.max_steps=1", "grpo.dynamic_sampling=false", *zero)
    m = next(e for e in run(off)[2] if isinstance(e, StepFinished)).metrics
    assert m["dynamic/rounds"] == 1 and m["dynamic/sampled_groups"] == 2


REFRESH = ("train.refresh_states_every=2", "train.refresh_questions=4", "train.refresh_mix=1.0",
           "train.refresh_rounds=3", "train.max_steps=4")


def test_refreshed_states_come_from_the_current_adapter_and_survive_a_resume(tmp_path):
    _, _, straight = run(tiny_config(tmp_path / "a", *REFRESH, "train.run_name=straight"))
    m2 = next(e for e in straight if isinstance(e, StepFinished) and e.step == 2).metrics
    assert m2["refresh/questions"] == 4 and m2["refresh/states"] > 0
    assert all("/refresh-" not in g.state_id for g in step_groups(straight, 1) + step_groups(straight, 2))
    later = [g for g in step_groups(straight, 3) if g.in_batch]
    assert later and all("/refresh-000002/" in g.state_id for g in later)  # refresh_mix = 1
    assert (tmp_path / "a" / "runs" / "straight" / "refreshed" / "step-000002.json").is_file()

    cfg = tiny_config(tmp_path / "b", *REFRESH, "train.run_name=split", "train.save_every=3")
    control = TrainerControl()
    first = []

    def stop_after_three(event):
        first.append(event)
        if isinstance(event, StepFinished) and event.step == 3:
            control.stop.set()

    summary = Trainer(cfg, sink=stop_after_three, control=control).train()
    _, _, second = run(cfg, resume=True, run_dir=summary.run_dir)

    def metrics(events):
        return {e.step: {k: v for k, v in e.metrics.items() if not k.startswith("time/") and k != "refresh/time_s"}
                for e in events if isinstance(e, StepFinished)}

    assert {**metrics(first), **metrics(second)} == metrics(straight)

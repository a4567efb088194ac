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

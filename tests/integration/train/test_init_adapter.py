"""`train.init_adapter`: a new run starts from another run's checkpoint (its adapter weights, a new
optimiser and step count), refuses one of another shape in one line, and a resumed run continues
from its own checkpoint instead."""

import shutil

import pytest
import torch
from safetensors.torch import load_file

from searchgrpo.errors import UserError
from searchgrpo.events import LogMessage, RunStarted, StepFinished
from searchgrpo.train.checkpoints import latest_checkpoint
from searchgrpo.train.trainer import Trainer, TrainerControl
from tests.helpers.tiny import tiny_config


def first_run(tmp_path):
    """A 2-step run with a checkpoint at its end: (its checkpoint folder, the adapter's weights)."""
    summary = Trainer(tiny_config(tmp_path / "first", "train.max_steps=2"), sink=lambda e: None).train()
    ckpt = latest_checkpoint(summary.run_dir).path
    weights = load_file(str(ckpt / "adapter" / "adapter_model.safetensors"))
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in weights.items())  # trained
    return ckpt, weights


def adapter_weights(model) -> dict[str, torch.Tensor]:
    """The LoRA weights under the names peft saves them (no adapter name)."""
    return {n.replace(".default", ""): p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_a_new_run_starts_from_the_checkpoints_weights_with_a_new_optimiser(tmp_path):
    ckpt, saved = first_run(tmp_path)
    events = []
    cfg = tiny_config(tmp_path / "second", "train.max_steps=1", f"train.init_adapter={ckpt}")
    trainer = Trainer(cfg, sink=events.append)
    trainer.setup()
    try:
        loaded = adapter_weights(trainer.policy.model)
        assert loaded.keys() == saved.keys()
        for name, tensor in saved.items():
            assert torch.equal(loaded[name], tensor), name
        assert trainer.step == 0 and not trainer.optimizer.state
        assert any(p.requires_grad for n, p in trainer.policy.model.named_parameters() if "lora_" in n)
        assert any(isinstance(e, LogMessage) and "train.init_adapter" in e.text for e in events)
        trainer._loop()
        assert any(not torch.equal(adapter_weights(trainer.policy.model)[n], saved[n]) for n in saved)
    finally:
        trainer.close()


@pytest.mark.parametrize(
    ("override", "words"),
    [("lora.r=4", "lora.r = 16, but this config has 4"), ("lora.alpha=8.0", "lora.alpha = 32")],
)
def test_an_adapter_of_another_shape_is_refused_in_one_line(tmp_path, override, words):
    ckpt, _ = first_run(tmp_path)
    cfg = tiny_config(tmp_path / "second", f"train.init_adapter={ckpt}", override)
    with pytest.raises(UserError, match=r"train\.init_adapter") as err:
        Trainer(cfg, sink=lambda e: None).train()
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "second" / "runs").exists()  # refused before anything was written


def test_a_missing_path_is_refused_in_one_line(tmp_path):
    cfg = tiny_config(tmp_path, f"train.init_adapter={tmp_path / 'nowhere'}")
    with pytest.raises(UserError, match=r"train\.init_adapter .*nowhere: not found"):
        Trainer(cfg, sink=lambda e: None).train()


def test_a_resumed_run_continues_from_its_own_checkpoint(tmp_path):
    ckpt, _ = first_run(tmp_path)
    copy = tmp_path / "start"
    shutil.copytree(ckpt, copy)
    cfg = tiny_config(tmp_path / "second", "train.max_steps=2", "train.run_name=r", f"train.init_adapter={copy}")
    control = TrainerControl()

    def stop_after_step_1(event):
        if isinstance(event, StepFinished) and event.step == 1:
            control.stop.set()

    stopped = Trainer(cfg, sink=stop_after_step_1, control=control).train()
    assert stopped.step == 1 and latest_checkpoint(stopped.run_dir).step == 1
    shutil.rmtree(copy)  # the start is gone: the resume needs only the run's own checkpoint
    events = []
    resumed = Trainer(cfg, sink=events.append, resume=True, run_dir=stopped.run_dir).train()
    assert resumed.reason == "completed" and resumed.step == 2
    assert next(e for e in events if isinstance(e, RunStarted)).start_step == 1

"""The dtype tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/policy/test_dtype.py`."""

import math

import torch

from searchgrpo.events import StepFinished
from searchgrpo.train.trainer import Trainer
from tests.helpers.tiny import tiny_config


def test_a_bfloat16_base_trains_on_cpu_with_float32_lora(tmp_path):
    cfg = tiny_config(tmp_path, "model.dtype=bfloat16", "train.max_steps=2", "grpo.beta=0.04")
    steps = []
    trainer = Trainer(cfg, sink=lambda e: steps.append(e.metrics) if isinstance(e, StepFinished) else None)
    trainer.setup()
    try:
        model = trainer.policy.model
        lora = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
        assert lora and all(p.dtype == torch.float32 for p in lora.values())
        assert any(p.dtype == torch.bfloat16 for n, p in model.named_parameters() if not p.requires_grad)
        trainer._loop()
        after = dict(model.named_parameters())
        assert any(not torch.equal(lora[n], after[n]) for n in lora)
        for state in trainer.optimizer.state.values():
            assert all(v.dtype == torch.float32 for v in state.values() if torch.is_tensor(v) and v.dim() > 0)
    finally:
        trainer.close()
    assert len(steps) == 2
    for m in steps:
        assert all(math.isfinite(m[k]) for k in ("loss/total", "reward/mean", "loss/kl", "grad/norm"))

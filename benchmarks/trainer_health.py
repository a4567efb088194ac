"""Numerical health of a benchmark run: is the model finite, did an update go non-finite, and, when
a trainer's sampling fails on non-finite probabilities, where the non-finite values come from.

`grpo_vs_trl.py` times ours against TRL; a time is only a measurement when the run computed finite
numbers. Ours never lets a NaN reach the adapter (the update is skipped, `train/nonfinite_skipped`),
so a broken model would still give ours a step time; TRL has no such guard, so a non-finite update
surfaces one step later as "probability tensor contains either inf, nan or element < 0" when it
samples. These helpers record, for every run, what tells the two apart.
"""

from __future__ import annotations

import math
from typing import Any


def logits_finite(model: Any, prompt: list[int], device: Any, *, adapter: bool = True) -> bool:
    """Whether the last 8 positions' logits of one prompt are finite (any non-finite value earlier
    in the prompt reaches them through attention). `adapter=False`: with the LoRA adapter off."""
    import contextlib

    import torch

    ids = torch.tensor([prompt], device=device)
    off = model.disable_adapter() if not adapter and hasattr(model, "disable_adapter") else contextlib.nullcontext()
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), off:
            logits = model(input_ids=ids, logits_to_keep=8).logits
        return bool(torch.isfinite(logits.float()).all())
    finally:
        model.train(was_training)


def adapter_finite(model: Any) -> bool:
    """Whether every trainable weight (the LoRA adapter) is finite."""
    import torch

    return all(bool(torch.isfinite(p.detach()).all()) for p in model.parameters() if p.requires_grad)


def grad_norm(model: Any) -> float:
    """The global norm of the trainable weights' gradients (NaN or inf when one is)."""
    import torch

    grads = [p.grad.detach().float().norm() for p in model.parameters() if p.requires_grad and p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack(grads))) if grads else 0.0


def diagnose(model: Any, prompt: list[int], device: Any) -> dict[str, Any]:
    """After a failure: is the adapter finite, and are the logits finite with it and without it."""
    out: dict[str, Any] = {"adapter_finite": adapter_finite(model)}
    for name, adapter in (("logits_finite", True), ("base_logits_finite", False)):
        try:
            out[name] = logits_finite(model, prompt, device, adapter=adapter)
        except Exception as exc:  # the diagnosis must not hide the failure it explains
            out[name] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def first_bad_step(health: list[dict[str, Any]]) -> int | None:
    """The first step whose update was not finite (a non-finite gradient norm or adapter)."""
    for row in health:
        if not math.isfinite(row.get("grad_norm", 0.0)) or row.get("adapter_finite") is False:
            return int(row["step"])
    return None

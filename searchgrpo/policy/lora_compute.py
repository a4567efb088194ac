"""LoRA products in the base model's dtype, the adapter's weights kept in float32 (`lora.compute: base`).

On a 16-bit base peft keeps the adapter's weights in float32 and, in every adapted layer, casts the
layer's input to float32, multiplies it by A and B in float32 (no tensor cores), scales, adds the
result to the base layer's 16-bit output in float32 and casts the sum back: per layer and per pass,
several copies of the activations in float32 and two float32 products. On an 8B model these are a
large share of the loss pass (docs/performance.md).

`use_base_dtype_products` gives each peft LoRA linear layer a forward that computes

    y = base(x) + (x A^T) (s B)^T

in the input's dtype: A and s*B are cast from their float32 weights for the product (the casts are
differentiable, so gradients reach the float32 weights, which the optimiser updates), and the second
product adds into the base output in one `addmm`. This is mixed-precision training's arithmetic, the
one transformers' Trainer (and so TRL) uses under bf16 autocast, and the one our `fused` decoder
already samples with. Anything else (adapter switched off, merged, several or mixed adapters,
DoRA and other variants, an input already in the adapter's dtype) runs peft's own forward unchanged,
as do the layers of a 4-bit base (bitsandbytes' LoRA layers are other classes).

Inside `casts_kept(model)` each layer casts A and s*B once per grad mode and keeps them until the
block ends: an update's micro-batches and gradient checkpointing's recomputations would otherwise
cast them again in every pass, three kernels per adapted layer and pass (756 launches per pass on
an 8B model, in a loss pass bound by its launches on an H200: docs/performance.md). The kept casts
are nodes of autograd's graph that keep no tensor, so each micro-batch's backward sends its
gradient through them on to the float32 weights. The block's caller promises that the weights do
not change inside it (the optimiser steps after it). The block, not the weights' version counters,
bounds the kept casts: fused AdamW changes the weights in place without moving their counters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import MethodType
from typing import Any

import torch

from searchgrpo.policy.fused_layout import Unsupported, plain_adapter


def base_dtype_lora_forward(self: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """A peft `lora.Linear`'s forward with its products in `x`'s dtype (module docstring)."""
    try:
        name = None if args or kwargs else plain_adapter(self)
    except Unsupported:
        name = None
    if name is None or self.lora_A[name].weight.dtype == x.dtype:
        return type(self).forward(self, x, *args, **kwargs)
    result = self.base_layer(x)
    dtype = result.dtype
    a, b = cast_factors(self, name, dtype)
    low = torch.nn.functional.linear(self.lora_dropout[name](x).to(dtype), a)
    width = result.shape[-1]
    return torch.addmm(result.reshape(-1, width), low.reshape(-1, low.shape[-1]), b.t()).view(result.shape)


KEPT_CASTS = "_searchgrpo_kept_casts"
"""The attribute in which a layer keeps its casts inside `casts_kept` (absent outside)."""


def cast_factors(module: Any, name: str, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, s*B) of `module`'s adapter `name` in `dtype`, differentiable; inside `casts_kept`, the
    ones already cast in this grad mode."""
    kept = module.__dict__.get(KEPT_CASTS)
    key = (name, dtype, torch.is_grad_enabled(), torch.is_inference_mode_enabled())
    if kept is not None and key in kept:
        return kept[key]
    a = module.lora_A[name].weight.to(dtype)
    # aten's product by a Scalar keeps no tensor for its backward (`w * s` keeps s as one), so
    # every micro-batch's backward can run through a kept cast; the values are `w * s`'s.
    b = torch.ops.aten.mul.Scalar(module.lora_B[name].weight, module.scaling[name]).to(dtype)
    if kept is not None:
        kept[key] = (a, b)
    return a, b


@contextlib.contextmanager
def casts_kept(model: Any) -> Iterator[None]:
    """Within: every layer with `base_dtype_lora_forward` casts its factors once per grad mode
    (module docstring). The adapter's weights must not change inside the block."""
    layers = [m for m in model.modules() if getattr(m.forward, "__func__", None) is base_dtype_lora_forward]
    for module in layers:
        module.__dict__[KEPT_CASTS] = {}
    try:
        yield
    finally:
        for module in layers:
            module.__dict__.pop(KEPT_CASTS, None)


def use_base_dtype_products(model: Any) -> int:
    """Give every peft LoRA linear layer of `model` `base_dtype_lora_forward`; the number of layers."""
    from peft.tuners.lora.layer import Linear

    count = 0
    for module in model.modules():
        if isinstance(module, Linear):
            # An instance attribute: peft's class stays as it is for every other model in the process.
            module.forward = MethodType(base_dtype_lora_forward, module)  # type: ignore[method-assign]
            count += 1
    return count

"""Which models `FusedStep` (fused_decode.py) computes, and their weights as it reads them.

`fused_layout(model)` walks a Llama-style model's decoder layers (Llama, Qwen2, Qwen3; RMS norms;
plain 16-bit linear layers with at most one plain LoRA adapter each) and returns their weights,
norms and LoRA factors without copying anything, or None when any part is of another kind
(`Unsupported` names it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

LAYERS = ("LlamaDecoderLayer", "Qwen2DecoderLayer", "Qwen3DecoderLayer")
RMS_NORMS = ("LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm")


def is_rms_norm(module: Any) -> bool:
    """A Llama-style RMSNorm (a weight and `variance_epsilon`)."""
    return type(module).__name__ in RMS_NORMS and hasattr(module, "variance_epsilon")


SILU = ("SiLU", "SiLUActivation")


class Unsupported(Exception):
    """A layer that the lean decode paths do not reproduce (several adapters, DoRA, ...)."""


def plain_adapter(module: Any) -> str | None:
    """The name of a peft LoRA layer's one active adapter, a plain linear one (no bias, DoRA or
    other variant). None when the layer computes its base layer alone (adapters merged, disabled or
    absent); `Unsupported` for anything else."""
    if module.merged or module.disable_adapters:
        return None
    names = [n for n in module.active_adapters if n in module.lora_A]
    if not names:
        return None
    name = names[0]
    lora_a, lora_b = module.lora_A[name], module.lora_B[name]
    if (
        len(names) != 1
        or not isinstance(lora_a, torch.nn.Linear)
        or not isinstance(lora_b, torch.nn.Linear)
        or lora_b.bias is not None
        or name in getattr(module, "lora_variant", {})
        or getattr(module, "use_dora", {}).get(name, False)
    ):
        raise Unsupported(type(module).__name__)
    return name


def lora_factors(module: Any, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(A^T [in, r], scaling * B^T [r, out]) in `dtype` of a peft LoRA layer's active adapter, or
    None and `Unsupported` as `plain_adapter` says."""
    name = plain_adapter(module)
    if name is None:
        return None
    lora_a, lora_b = module.lora_A[name], module.lora_B[name]
    a = lora_a.weight.detach().to(dtype).t()
    b = (lora_b.weight.detach() * module.scaling[name]).to(dtype).t()
    return a, b


@dataclass(frozen=True)
class Projection:
    """A linear layer as y = x W^T + bias + (x A) B, the adapter optional."""

    weight: torch.Tensor
    """[out, in]"""
    bias: torch.Tensor | None
    a: torch.Tensor | None
    """[in, r]"""
    b: torch.Tensor | None
    """[r, out], the adapter's scaling folded in."""

    def __call__(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """x [rows, in] -> [rows, out], plus `residual` added by the product itself."""
        if residual is None:
            out = F.linear(x, self.weight, self.bias)
        else:
            out = torch.addmm(residual, x, self.weight.t())
        if self.a is not None and self.b is not None:  # both or neither (see `projection`)
            out.addmm_(x @ self.a, self.b)
        return out


def projection(module: Any, dtype: torch.dtype) -> Projection:
    """The `Projection` of a plain or LoRA-wrapped linear layer whose weight is in `dtype`."""
    from peft.tuners.lora import LoraLayer

    factors = None
    if isinstance(module, LoraLayer):
        factors = lora_factors(module, dtype)
        module = module.base_layer
    # Subclasses (bitsandbytes' 4-bit layers among them) hold weights in other forms.
    if type(module) is not torch.nn.Linear or module.weight.dtype != dtype:
        raise Unsupported(type(module).__name__)
    a, b = factors if factors is not None else (None, None)
    bias = module.bias.detach() if module.bias is not None else None
    return Projection(module.weight.detach(), bias, a, b)


def _norm(module: Any) -> tuple[torch.Tensor, float]:
    if not is_rms_norm(module):
        raise Unsupported(type(module).__name__)
    return module.weight.detach(), float(module.variance_epsilon)


@dataclass(frozen=True)
class LayerLayout:
    """One decoder layer's pieces, as found in the model (nothing copied yet)."""

    input_norm: tuple[torch.Tensor, float]
    post_norm: tuple[torch.Tensor, float]
    q: Projection
    k: Projection
    v: Projection
    q_norm: tuple[torch.Tensor, float] | None
    k_norm: tuple[torch.Tensor, float] | None
    o: Projection
    gate: Projection
    up: Projection
    down: Projection
    act: Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Layout:
    """What a `FusedStep` is built from; see `fused_layout`."""

    embed: torch.Tensor
    rotary: Any
    layers: list[LayerLayout]
    norm: tuple[torch.Tensor, float]
    head: Projection
    heads: int
    kv_heads: int
    head_dim: int
    scaling: float
    dtype: torch.dtype


def fused_layout(model: Any) -> Layout | None:
    """The model's pieces for `FusedStep`, or None if it is not a model `FusedStep` reproduces."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner: Any = getattr(base, "model", None)  # a transformers module (untyped), checked just below
    embed = getattr(inner, "embed_tokens", None)
    if type(embed) is not torch.nn.Embedding or not hasattr(inner, "rotary_emb") or not hasattr(base, "lm_head"):
        return None
    dtype = embed.weight.dtype
    try:
        layers = [_layer_layout(layer, dtype) for layer in inner.layers]
        norm, head = _norm(inner.norm), projection(base.lm_head, dtype)
    except (Unsupported, AttributeError):
        return None
    attn = inner.layers[0].self_attn
    config = base.config.get_text_config()
    if any(p.bias is not None for layer in layers for p in (layer.o, layer.gate, layer.up, layer.down, head)):
        return None
    return Layout(
        embed.weight.detach(),
        inner.rotary_emb,
        layers,
        norm,
        head,
        config.num_attention_heads,
        config.num_key_value_heads,
        attn.head_dim,
        float(attn.scaling),
        dtype,
    )


def _layer_layout(layer: Any, dtype: torch.dtype) -> LayerLayout:
    if type(layer).__name__ not in LAYERS:
        raise Unsupported(type(layer).__name__)
    attn, mlp = layer.self_attn, layer.mlp
    q_norm, k_norm = (_norm(attn.q_norm), _norm(attn.k_norm)) if hasattr(attn, "q_norm") else (None, None)
    if q_norm is not None and k_norm is not None and q_norm[1] != k_norm[1]:
        raise Unsupported("q_norm and k_norm with different eps")  # one norm call covers both
    input_norm, post_norm = _norm(layer.input_layernorm), _norm(layer.post_attention_layernorm)
    q, k, v = (projection(getattr(attn, f"{n}_proj"), dtype) for n in "qkv")
    o = projection(attn.o_proj, dtype)
    gate, up, down = (projection(getattr(mlp, f"{n}_proj"), dtype) for n in ("gate", "up", "down"))
    return LayerLayout(input_norm, post_norm, q, k, v, q_norm, k_norm, o, gate, up, down, mlp.act_fn)

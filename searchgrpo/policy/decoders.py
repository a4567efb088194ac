"""Decode steps: the logits of one new token per row, on a KV cache filled from the prompts.

`generate` (searchgrpo/policy/sampling.py) prefills the prompts once, then calls one of these per token:

- `DynamicDecoder` (here): transformers' growing cache (the CPU default).
- `StaticDecoder` and `FusedDecoder` (searchgrpo/policy/replayed_decoders.py): a preallocated cache
  at fixed addresses, read through the model's own modules or computed in fewer kernels, replayed
  as a CUDA graph on CUDA.

`resolve_decoder` picks one for a model and device; `grouped_decode_attention`, registered by
`attention_implementation`, is the static decoders' attention; `cache_argument` and
`packs_prefix` say what a model's forward takes.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import torch

from searchgrpo.policy.fused_layout import fused_layout

DECODERS = ("auto", "dynamic", "static", "graph", "fused")
GROUPED_DECODE = "searchgrpo_grouped_decode"


def packs_prefix(model: Any) -> bool:
    """The attention implementation takes a custom 4D mask: `rollout.group_logprobs`' packed rows
    and the static decoders' cache mask need one."""
    return getattr(model.config, "_attn_implementation", "sdpa") in ("sdpa", "eager")


def resolve_decoder(model: Any, decoder: str, device: Any) -> str:
    """`auto`: `fused` on CUDA where the model allows it, else `graph`; the dynamic cache elsewhere.

    The static decoders need a cache with one kind of layer (full attention) and an attention
    implementation that takes a custom mask; otherwise the dynamic cache is used. `fused` needs a
    model that `fused_layout` accepts (otherwise `graph`, or `static` off CUDA).
    """
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
    on_cuda = torch.device(device).type == "cuda"
    if decoder == "auto":
        decoder = "fused" if on_cuda else "dynamic"
    if decoder == "fused" and fused_layout(model) is None:
        decoder = "graph"
    if decoder == "graph" and not on_cuda:
        decoder = "static"
    config = model.config
    layer_types = set(getattr(config.get_text_config(), "layer_types", None) or ["full_attention"])
    if decoder != "dynamic" and (layer_types != {"full_attention"} or not packs_prefix(model)):
        decoder = "dynamic"
    return decoder


def grouped_decode_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention for one new token per row over a static cache, reading each KV head once.

    With a mask, transformers' SDPA path first copies K and V once per query head (grouped-query
    models have several query heads per KV head), which multiplies the bytes a decode step reads.
    Here the query heads of a group share one matmul against their KV head. `attention_mask` is a
    boolean [B, 1, 1, L] mask of the cache slots to attend to. Longer queries (prefill) go to SDPA.
    """
    batch, heads, length, dim = query.shape
    if length != 1:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    assert attention_mask is not None  # decode steps over the static cache always pass its slot mask
    kv_heads = key.shape[1]
    scale = scaling if scaling is not None else dim**-0.5
    q = query.reshape(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.matmul(q, key.transpose(-1, -2)).float() * scale  # [B, KV, group, L]
    scores = scores.masked_fill(~attention_mask.reshape(batch, 1, 1, -1), float("-inf"))
    out = torch.matmul(torch.softmax(scores, dim=-1).to(value.dtype), value)  # [B, KV, group, D]
    return out.reshape(batch, 1, heads, dim), None


@contextlib.contextmanager
def attention_implementation(model: Any, name: str) -> Iterator[None]:
    """Run `model` with another registered attention function, then restore its own."""
    from transformers import AttentionInterface

    if name not in AttentionInterface._global_mapping:
        AttentionInterface.register(name, grouped_decode_attention)
    config = model.config
    saved = config._attn_implementation
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = saved


class DynamicDecoder:
    """Decode steps on transformers' dynamic cache, which grows by one slot per step."""

    def __init__(self, model: Any, prefix_cache: Any, prompt_mask: torch.Tensor, k: int) -> None:
        self.model = model
        self.cache = prefix_cache
        self.cache.batch_repeat_interleave(k)
        self.mask = prompt_mask.repeat_interleave(k, dim=0)
        self.position = prompt_mask.sum(dim=1).repeat_interleave(k)
        self.cache_arg = cache_argument(model)

    def __call__(self, token: torch.Tensor) -> torch.Tensor:
        """Logits [B, V] for the position after `token` [B]."""
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)
        out = self.model(
            input_ids=token.unsqueeze(1),
            attention_mask=self.mask,
            position_ids=self.position.unsqueeze(1),
            use_cache=True,
            **{self.cache_arg: self.cache},
        )
        self.position = self.position + 1
        return out.logits[:, -1, :]


def cache_argument(model: Any) -> str:
    """The forward() keyword that takes a KV cache: `cache` in transformers 5, else `past_key_values`."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"

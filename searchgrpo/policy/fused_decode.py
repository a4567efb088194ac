"""One decode step computed straight from a Llama-style model's weights, in fewer GPU kernels.

A decode step reads every weight once for one new token per row: its products are skinny (32
rows on an H200 rollout) and bound by memory bandwidth, and a few thousand small kernels around
them cost as much again. `FusedStep` runs the same function as the model's forward for one token
per row (Llama, Qwen2 and Qwen3 decoder layers, plain 16-bit linear layers, at most one plain LoRA
adapter per layer), laid out once per `generate` call as:

- each layer's query, key and value weights concatenated into one matrix, followed by the rows
  of their LoRA A matrices: one product gives q, k, v and the three adapters' low-rank
  activations, and one more against the B matrices, laid out block-diagonally, adds the adapters
  (the blocks off the diagonal are zeros, which add nothing). The copy costs the size of the q, k
  and v weights (1.8 GB for Qwen3-8B) while a decoder lives;
- the LoRA A matrices of gate and up side by side: one product for both adapters;
- the residual additions done by the output and down projections (`addmm`, C = residual);
- Qwen3's q and k norms in one call over all heads, and the rotary embedding as a multiply, a
  `roll` and a fused multiply-add over q and k together;
- attention to a group's shared prompt once: the K samples of a prompt share one cache row,
  the prompt's keys and values followed by one segment of slots per sample, and one
  `scaled_dot_product_attention` per layer takes all K samples' query heads of a KV head as its
  queries, under a mask that lets each sample see the prompt and its own segment. The prompt's
  keys and values are read once per group, not once per sample (K times fewer bytes for the
  prompt's part; the cache is that much smaller too), and never copied per query head; on
  CUDA split into chunks of the cache that are attended to in parallel and merged exactly
  (`split_attention`), since few long rows would leave most of the GPU idle;
- on CUDA (`compile=True`), the element-wise work between the products compiled by
  `torch.compile` into a few fused kernels: Qwen3's q/k norms, the rotary embedding and the
  rearrangement of q, k and v for the grouped cache (`attention_inputs`), and the gated
  activation (`gated`).

The results differ from the module-by-module forward by rounding only (tests/unit/policy/test_rollout.py
compares the logits). `fused_layout.fused_layout` says whether a model qualifies, without copying
anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from searchgrpo.policy.fused_layout import SILU, LayerLayout, Layout, Projection
from searchgrpo.policy.split_attention import ChunkMask, merge_chunks, split_attention


@dataclass(frozen=True)
class FusedLayer:
    """One decoder layer rearranged for `FusedStep.layer`."""

    input_norm: tuple[torch.Tensor, float]
    post_norm: tuple[torch.Tensor, float]
    qkv: torch.Tensor
    """[(heads + 2 kv_heads) * head_dim + r, hidden]: q, k and v weights, then the LoRA A rows."""
    qkv_bias: torch.Tensor | None
    """Zero on the LoRA rows."""
    qkv_b: torch.Tensor | None
    """[r, (heads + 2 kv_heads) * head_dim]: q, k and v's LoRA B (scaled), block-diagonal."""
    qk_norm: torch.Tensor | None
    """[heads + kv_heads, head_dim]: q_norm's weight per query head, then k_norm's per KV head."""
    qk_eps: float
    o: Projection
    gate: Projection
    up: Projection
    gate_up_a: torch.Tensor | None
    """[hidden, r_gate + r_up]"""
    down: Projection
    act: Callable[[torch.Tensor], torch.Tensor]


def _fuse_layer(layer: LayerLayout, heads: int, kv_heads: int) -> FusedLayer:
    qkv = (layer.q, layer.k, layer.v)
    adapted = [p.a for p in qkv if p.a is not None]
    weight = torch.cat([p.weight for p in qkv] + [a.t() for a in adapted])
    b = None
    if adapted:
        width = sum(p.weight.shape[0] for p in qkv)
        b = weight.new_zeros(sum(a.shape[1] for a in adapted), width)
        row = column = 0
        for p in qkv:
            if p.a is not None and p.b is not None:  # both or neither (see `projection`)
                b[row : row + p.b.shape[0], column : column + p.b.shape[1]] = p.b
                row += p.b.shape[0]
            column += p.weight.shape[0]
    bias = None
    if any(p.bias is not None for p in qkv):
        parts = [p.bias if p.bias is not None else weight.new_zeros(p.weight.shape[0]) for p in qkv]
        bias = torch.cat([*parts, weight.new_zeros(weight.shape[0] - sum(p.numel() for p in parts))])
    qk_norm, qk_eps = None, 0.0
    if layer.q_norm is not None and layer.k_norm is not None:  # Qwen3
        (wq, qk_eps), (wk, _) = layer.q_norm, layer.k_norm
        qk_norm = torch.cat([wq.expand(heads, -1), wk.expand(kv_heads, -1)])
    gate_up = [p.a for p in (layer.gate, layer.up) if p.a is not None]
    # SiLU modules are one function: one compiled `gated` serves every layer.
    act = F.silu if type(layer.act).__name__ in SILU else layer.act
    return FusedLayer(
        layer.input_norm,
        layer.post_norm,
        weight,
        bias,
        b,
        qk_norm,
        qk_eps,
        layer.o,
        layer.gate,
        layer.up,
        torch.cat(gate_up, dim=1) if gate_up else None,
        layer.down,
        act,
    )


def attention_inputs(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    qk_norm: torch.Tensor | None,
    qk_eps: float,
    heads: int,
    kv_heads: int,
    dim: int,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The query, key and value of one new token per row, laid out for the grouped cache.

    qkv [rows, (heads + 2 kv_heads) * dim] (rows = groups * k, sample s of group g in row g*k + s)
    -> q [groups, kv_heads, k * heads/kv_heads, dim] (the queries of one KV head: every sample's
    query heads of that group, sample by sample), and the new key and value [groups, kv_heads, k, dim].
    Applies Qwen3's per-head q/k norms (`qk_norm`: [heads + kv_heads, dim], or None) and the rotary
    embedding (`cos`, `sin` [rows, 1, dim], `sin`'s first half negated: see `FusedStep.__call__`).
    """
    rows = qkv.shape[0]
    groups, per_kv = rows // k, heads // kv_heads
    qk = qkv[:, : (heads + kv_heads) * dim].view(rows, heads + kv_heads, dim)
    if qk_norm is not None:
        qk = F.rms_norm(qk, (dim,), None, qk_eps) * qk_norm
    qk = torch.addcmul(qk * cos, qk.roll(dim // 2, dims=-1), sin)
    q = (
        qk[:, :heads]
        .reshape(groups, k, kv_heads, per_kv, dim)
        .transpose(1, 2)
        .reshape(groups, kv_heads, k * per_kv, dim)
    )
    key = qk[:, heads:].reshape(groups, k, kv_heads, dim).transpose(1, 2)
    value = qkv[:, (heads + kv_heads) * dim :].reshape(groups, k, kv_heads, dim).transpose(1, 2)
    return q, key, value


def gated(act: Callable[[torch.Tensor], torch.Tensor], gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """act(gate) * up: the MLP's gated activation."""
    return act(gate) * up


class FusedStep:
    """One decode step of the model in `layout`, over a KV cache that the caller holds.

    Built once per `generate` call (the LoRA weights change between calls); the copies it makes
    live as long as it does. With `compile`, `attention_inputs` and `gated` run compiled by
    `torch.compile` (compiled once per process and shape; the same function, in fewer kernels).
    """

    def __init__(self, layout: Layout, compile: bool = False) -> None:
        self.layout = layout
        self.layers = [_fuse_layer(layer, layout.heads, layout.kv_heads) for layer in layout.layers]
        self.attention_inputs = _compiled(attention_inputs) if compile else attention_inputs
        self.gated = _compiled(gated) if compile else gated
        self.merge = _compiled(merge_chunks) if compile else merge_chunks

    def cache_shape(self, groups: int, length: int) -> tuple[int, int, int, int]:
        """The shape of one layer's keys (and values): [groups, kv_heads, length, head_dim]."""
        return groups, self.layout.kv_heads, length, self.layout.head_dim

    def __call__(
        self,
        token: torch.Tensor,
        position: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        mask: torch.Tensor | ChunkMask,
        slot: torch.Tensor,
    ) -> torch.Tensor:
        """Logits [rows, vocab] after `token` [rows, 1] at `position` [rows, 1].

        The cache holds one row per group of k = rows / groups samples (`keys[i]`, `values[i]`:
        [groups, kv_heads, length, head_dim]). Writes each layer's new keys and values into cache
        slots `slot` ([k]: sample s's slot), then attends over the slots where the additive
        `mask` [groups, 1, k * heads/kv_heads, length] is zero (each sample's query rows must
        already see its own new slot). A `split_attention.ChunkMask` instead splits attention
        into chunks of the cache (`split_attention`).
        """
        lay = self.layout
        x = F.embedding(token[:, 0], lay.embed)
        cos, sin = lay.rotary(x, position)  # [rows, 1, head_dim]
        half = lay.head_dim // 2
        # rotate_half(t) * sin == roll(t, half) * sin with the sign of sin's first half flipped.
        sin = torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)
        for layer, k, v in zip(self.layers, keys, values):
            x = self.layer(layer, x, cos, sin, k, v, mask, slot)
        weight, eps = lay.norm
        return lay.head(F.rms_norm(x, (x.shape[-1],), weight, eps))

    def layer(
        self,
        layer: FusedLayer,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor | ChunkMask,
        slot: torch.Tensor,
    ) -> torch.Tensor:
        """One decoder layer: x [rows, hidden] -> [rows, hidden]."""
        lay = self.layout
        rows, heads, kv_heads, dim, k = x.shape[0], lay.heads, lay.kv_heads, lay.head_dim, slot.shape[0]
        weight, eps = layer.input_norm
        h = F.rms_norm(x, (x.shape[-1],), weight, eps)
        out = F.linear(h, layer.qkv, layer.qkv_bias)
        width = (heads + 2 * kv_heads) * dim
        qkv = out[:, :width]
        if layer.qkv_b is not None:
            qkv.addmm_(out[:, width:], layer.qkv_b)
        q, key, value = self.attention_inputs(qkv, cos, sin, layer.qk_norm, layer.qk_eps, heads, kv_heads, dim, k)
        keys.index_copy_(2, slot, key)
        values.index_copy_(2, slot, value)
        if isinstance(mask, ChunkMask):
            attn = split_attention(q, keys, values, mask, lay.scaling, self.merge)
        else:
            attn = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=lay.scaling)
        attn = attn.view(rows // k, kv_heads, k, heads // kv_heads, dim).transpose(1, 2).reshape(rows, heads * dim)
        x = layer.o(attn, residual=x)
        weight, eps = layer.post_norm
        h = F.rms_norm(x, (x.shape[-1],), weight, eps)
        gate, up = F.linear(h, layer.gate.weight), F.linear(h, layer.up.weight)
        if layer.gate_up_a is not None:
            low = h @ layer.gate_up_a
            split = layer.gate.a.shape[1] if layer.gate.a is not None else 0
            if layer.gate.b is not None:
                gate.addmm_(low[:, :split], layer.gate.b)
            if layer.up.b is not None:
                up.addmm_(low[:, split:], layer.up.b)
        gate_up = (self.gated if layer.act is F.silu else gated)(layer.act, gate, up)
        return layer.down(gate_up, residual=x)


_COMPILED: dict[Any, Any] = {}


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`torch.compile(fn)`, made once per process (its compiled code is cached per shape)."""
    if fn not in _COMPILED:
        _COMPILED[fn] = torch.compile(fn, fullgraph=True)
    return _COMPILED[fn]

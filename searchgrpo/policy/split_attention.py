"""Decode attention over a long cache split into chunks, the chunks' results merged exactly.

A fused attention kernel gives each (batch, head) pair one thread block, which walks its keys
one after another. When the samples of a prompt share one cache row (`FusedDecoder`), a decode
step has few such pairs (groups x KV heads: 32 for 4 prompts of a Qwen3-8B) and long rows: a few
dozen of the GPU's 132 multiprocessors stream the cache, each at a fraction of the bandwidth.
Splitting each row into chunks of `chunk` slots, attending to each chunk on its own (more pairs:
the chunks become heads), and merging the chunks by their log-sum-exp gives the same result
with all multiprocessors busy (split-KV, as in flash-decoding):

    out = sum_c exp(lse_c - lse) out_c,   lse = log sum_c exp(lse_c)

A chunk that a query may not see at all (left padding, a sample's slots not yet written) gets
weight 0, whatever the kernel returns for it (`ChunkMask.seen`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class ChunkMask:
    """An additive attention mask laid out per chunk, and which chunks each query sees at all.

    Kernels disagree on a row that sees nothing (CPU flash attention returns output 0 and
    log-sum-exp 0, not -inf), so the merge takes visibility from the mask, not from the kernel.
    """

    bias: torch.Tensor
    """[groups, kv_heads * chunks, queries, chunk]; head kv * chunks + c is chunk c of KV head kv."""
    seen: torch.Tensor
    """[groups, kv_heads * chunks, queries] bool: the query sees at least one slot of the chunk."""


def chunk_mask(mask: torch.Tensor, kv_heads: int, chunk: int) -> ChunkMask:
    """A `ChunkMask` for `mask` [groups, 1, queries, length] (length a multiple of `chunk`), filled."""
    groups, _, queries, length = mask.shape
    heads = kv_heads * (length // chunk)
    out = ChunkMask(
        mask.new_empty(groups, heads, queries, chunk),
        torch.empty(groups, heads, queries, dtype=torch.bool, device=mask.device),
    )
    return split_mask_(out, mask)


def split_mask_(out: ChunkMask, mask: torch.Tensor) -> ChunkMask:
    """Copy `mask` [groups, 1, queries, length] into `out`, in place (fixed addresses for a CUDA graph)."""
    groups, _, queries, length = mask.shape
    chunk = out.bias.shape[-1]
    chunks = length // chunk
    out.bias.view(groups, -1, chunks, queries, chunk).copy_(
        mask.view(groups, 1, queries, chunks, chunk).transpose(2, 3)
    )
    torch.gt(out.bias.amax(dim=-1), float("-inf"), out=out.seen)
    return out


def attention_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T * scale + bias) v and its log-sum-exp [batch, heads, queries] (float32).

    A fused kernel that returns the log-sum-exp: PyTorch's memory-efficient attention on CUDA,
    its flash attention on CPU; plain products elsewhere.
    """
    if q.is_cuda:
        out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, scale=scale)[:2]
        return out, lse[..., : q.shape[2]]
    if q.device.type == "cpu":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=bias, scale=scale)
        return out, lse
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale + bias.float()
    lse = torch.logsumexp(scores, dim=-1)
    return torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), v.float()).to(q.dtype), lse


def merge_chunks(out: torch.Tensor, lse: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    """out [groups, kv, chunks, queries, dim], lse and seen [groups, kv, chunks, queries] ->
    [groups, kv, queries, dim]: each chunk weighted by exp(lse_c - lse), 0 for an unseen chunk."""
    lse = torch.where(seen, lse.float(), float("-inf"))
    weight = torch.softmax(lse, dim=2)
    parts = torch.where(seen.unsqueeze(-1), out.float(), 0.0)  # an unseen chunk's output may be NaN
    return (parts * weight.unsqueeze(-1)).sum(dim=2).to(out.dtype)


def split_attention(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    mask: ChunkMask,
    scale: float,
    merge: Callable[..., torch.Tensor] = merge_chunks,
) -> torch.Tensor:
    """Attention of q [groups, kv, queries, dim] over keys and values [groups, kv, length, dim]
    under `mask`, one chunk at a time (the chunks are heads of one kernel call), merged exactly."""
    groups, kv, queries, dim = q.shape
    heads, chunk = mask.bias.shape[1], mask.bias.shape[-1]
    chunks = heads // kv
    qs = q.unsqueeze(2).expand(groups, kv, chunks, queries, dim).reshape(groups, heads, queries, dim)
    out, lse = attention_lse(
        qs, keys.view(groups, heads, chunk, dim), values.view(groups, heads, chunk, dim), mask.bias, scale
    )
    shape = (groups, kv, chunks, queries)
    return merge(out.view(*shape, dim), lse.view(shape), mask.seen.view(shape))


def reference_attention(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """The same attention in one piece (for tests): `mask` [groups, 1, queries, length]."""
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=scale)

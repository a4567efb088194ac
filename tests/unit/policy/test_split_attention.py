"""Split-KV decode attention: chunks attended to on their own and merged equal one attention."""

import pytest
import torch

from searchgrpo.policy.split_attention import (
    attention_lse,
    chunk_mask,
    merge_chunks,
    reference_attention,
    split_attention,
)


def _case(device="cpu", dtype=torch.float32):
    torch.manual_seed(0)
    groups, kv, queries, length, dim = 2, 3, 4, 64, 8
    q = torch.randn(groups, kv, queries, dim, device=device, dtype=dtype)
    keys = torch.randn(groups, kv, length, dim, device=device, dtype=dtype)
    values = torch.randn(groups, kv, length, dim, device=device, dtype=dtype)
    visible = torch.rand(groups, 1, queries, length, device=device) < 0.5
    visible[0, :, :, :20] = False  # group 0: its first chunk of 16 (left padding) hidden from every query
    visible[:, :, :, 48:] = False  # every group: the last chunk not written yet
    visible[:, :, :, 30] = True  # every query sees something
    mask = torch.zeros(visible.shape, device=device, dtype=dtype).masked_fill(~visible, float("-inf"))
    return q, keys, values, mask


@pytest.mark.parametrize("chunk", [16, 32, 64])
def test_split_attention_equals_one_attention(chunk):
    q, keys, values, mask = _case()
    chunks = chunk_mask(mask, keys.shape[1], chunk)
    assert chunks.bias.shape == (2, 3 * 64 // chunk, 4, chunk)
    got = split_attention(q, keys, values, chunks, 0.3)
    want = reference_attention(q, keys, values, mask, 0.3)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()


def test_chunk_mask_layout():
    mask = torch.arange(2 * 3 * 8, dtype=torch.float32).view(2, 1, 3, 8)
    mask[1, 0, 2, 4:] = float("-inf")
    chunks = chunk_mask(mask, 2, 4)  # head kv * chunks + c
    for kv in range(2):
        for c in range(2):
            assert torch.equal(chunks.bias[:, kv * 2 + c], mask[:, 0, :, c * 4 : (c + 1) * 4])
    assert chunks.seen.sum() == 2 * 2 * 2 * 3 - 2 and not chunks.seen[1, 1, 2] and not chunks.seen[1, 3, 2]


def test_log_sum_exp_and_merge_by_hand():
    q = torch.tensor([[[[1.0, 0.0]]]])  # [1, 1, 1, 2]
    k = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 0.0]]]])
    v = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [2.0, 2.0], [5.0, 5.0]]]])
    bias = torch.tensor([[[[0.0, 0.0, 0.0, float("-inf")]]]])
    out, lse = attention_lse(q, k, v, bias, 1.0)
    # scores 1, 0, 2 (the 4th masked): lse = log(e + 1 + e^2)
    z = torch.e + 1 + torch.e**2
    assert torch.allclose(lse, torch.tensor([[[float(torch.log(torch.tensor(z)))]]]), atol=1e-5)
    assert torch.allclose(
        out, torch.tensor([[[[(torch.e + 2 * torch.e**2) / z, (1 + 2 * torch.e**2) / z]]]]), atol=1e-5
    )
    # Two chunks, the second one unseen (whatever its output and lse): the merge takes the first alone.
    parts = torch.stack([out, torch.full_like(out, float("nan"))], dim=2)  # [1, 1, 2, 1, 2]
    lses = torch.stack([lse, torch.zeros_like(lse)], dim=2)
    seen = torch.tensor([True, False]).view(1, 1, 2, 1)
    assert torch.allclose(merge_chunks(parts, lses, seen), out)
    # Both seen: weights exp(lse_c - lse) over the two.
    other, other_lse = torch.ones_like(out), torch.zeros_like(lse)  # lse_2 = 0: weight 1 / (z + 1)
    both = merge_chunks(torch.stack([out, other], dim=2), torch.stack([lse, other_lse], dim=2), seen | True)
    assert torch.allclose(both, (out * z + other) / (z + 1), atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_split_attention_on_cuda(dtype):
    q, keys, values, mask = _case("cuda", dtype)
    got = split_attention(q, keys, values, chunk_mask(mask, keys.shape[1], 16), 0.3).float()
    want = reference_attention(q.float(), keys.float(), values.float(), mask.float(), 0.3)
    assert torch.allclose(got, want, atol=1e-5 if dtype == torch.float32 else 2e-2), (got - want).abs().max()

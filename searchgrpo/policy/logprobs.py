"""Log-probabilities of completions under the policy, for the GRPO loss.

- `sequence_logprobs` returns per-token log-probs of the completions under the current weights,
  computing logits only for completion positions (`logits_to_keep`) and never materialising a
  full log-softmax.
- `group_logprobs` does the same with a shared prefix: each group is one packed row, the prompt
  followed by its K completions, under a mask that lets each completion see only the prompt and
  itself. Prompts are long and completions short, so this removes most of the compute; it is one
  ordinary forward pass, so gradient checkpointing works as usual, and the result (values and
  gradients) equals `sequence_logprobs`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from searchgrpo.policy.sampling import left_pad

if TYPE_CHECKING:
    from searchgrpo.policy.model import Policy


@dataclass(frozen=True)
class SequenceBatch:
    """Prompt + completion rows laid out for one forward pass.

    Prompts are left-padded to a common width P, so every completion starts at column P;
    completions are right-padded to width C.
    """

    input_ids: torch.Tensor
    """[B, P + C]"""
    attention_mask: torch.Tensor
    """[B, P + C]"""
    position_ids: torch.Tensor
    """[B, P + C], counting from each row's first real token."""
    completion_ids: torch.Tensor
    """[B, C]"""
    completion_mask: torch.Tensor
    """[B, C], 1 on real completion tokens."""


def make_batch(
    prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], pad_id: int, device: Any
) -> SequenceBatch:
    p_ids, p_mask = left_pad(prompts, pad_id, "cpu")
    width = max(max(len(c) for c in completions), 1)
    c_ids = torch.full((len(completions), width), pad_id, dtype=torch.long)
    c_mask = torch.zeros((len(completions), width), dtype=torch.long)
    for i, c in enumerate(completions):
        if c:
            c_ids[i, : len(c)] = torch.tensor(c, dtype=torch.long)
            c_mask[i, : len(c)] = 1
    input_ids = torch.cat([p_ids, c_ids], dim=1)
    attention_mask = torch.cat([p_mask, c_mask], dim=1)
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
    return SequenceBatch(
        input_ids.to(device), attention_mask.to(device), position_ids.to(device), c_ids.to(device), c_mask.to(device)
    )


@dataclass(frozen=True)
class GroupBatch:
    """G prompts, each with K completions, laid out for `group_logprobs`."""

    prompt_ids: torch.Tensor
    """[G, P], left-padded."""
    prompt_mask: torch.Tensor
    """[G, P]"""
    completion_ids: torch.Tensor
    """[G*K, C], right-padded; rows g*K .. g*K+K-1 belong to prompt g."""
    completion_mask: torch.Tensor
    """[G*K, C]"""
    k: int


def make_group_batch(
    prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], k: int, pad_id: int, device: Any
) -> GroupBatch:
    """`completions` holds K rows per prompt, in prompt order."""
    if len(completions) != len(prompts) * k:
        raise ValueError(f"expected {len(prompts) * k} completions, got {len(completions)}")
    p_ids, p_mask = left_pad(prompts, pad_id, device)
    c = make_batch([[]] * len(completions), completions, pad_id, device)
    return GroupBatch(p_ids, p_mask, c.completion_ids, c.completion_mask, k)


def shared_prefix_mask(prompt_mask: torch.Tensor, completion_mask: torch.Tensor, k: int) -> torch.Tensor:
    """[G, 1, L, L] boolean attention mask of the packed rows [prompt | completion_1 | ... | completion_K].

    Query i sees key j when j is a real token, j <= i, and j lies in the prompt or in i's own
    completion: each completion attends to its prompt and to its own earlier tokens only, exactly as
    if it were a separate sequence. Every position also sees itself, so that no row is fully masked
    (padding rows would otherwise turn into NaN and leak through 0 * NaN).
    """
    g, p = prompt_mask.shape
    width = completion_mask.shape[1]
    segment = torch.cat([torch.zeros(p, dtype=torch.long), torch.arange(1, k + 1).repeat_interleave(width)])
    segment = segment.to(prompt_mask.device)
    real = torch.cat([prompt_mask.bool(), completion_mask.reshape(g, k * width).bool()], dim=1)  # [G, L]
    length = p + k * width
    index = torch.arange(length, device=prompt_mask.device)
    causal = index.unsqueeze(1) >= index.unsqueeze(0)
    same = (segment.unsqueeze(0) == 0) | (segment.unsqueeze(0) == segment.unsqueeze(1))
    mask = (causal & same).unsqueeze(0) & real.unsqueeze(1)
    mask |= torch.eye(length, dtype=torch.bool, device=prompt_mask.device).unsqueeze(0)
    return mask.unsqueeze(1)


def group_logprobs(model: Any, batch: GroupBatch, temperature: float = 1.0) -> torch.Tensor:
    """[G*K, C] completion log-probs, encoding each prompt once (see the module docstring).

    Each group is one packed row, prompt then its K completions, with `shared_prefix_mask` and
    each completion's position ids continuing from its prompt's end: one ordinary forward pass
    (so gradient checkpointing applies as usual) that computes the same function as K separate
    prompt + completion rows, on P + K*C tokens instead of K*(P + C).
    """
    k = batch.k
    g = batch.prompt_ids.shape[0]
    width = batch.completion_ids.shape[1]
    device = batch.prompt_ids.device
    prompt_len = batch.prompt_mask.sum(dim=1, keepdim=True)
    positions = torch.cat(
        [
            (batch.prompt_mask.cumsum(dim=1) - 1).clamp(min=0),
            prompt_len + torch.arange(width, device=device).repeat(k).unsqueeze(0),
        ],
        dim=1,
    )
    mask = shared_prefix_mask(batch.prompt_mask, batch.completion_mask, k)
    if getattr(model.config, "_attn_implementation", "sdpa") == "eager":
        mask = torch.zeros(mask.shape, dtype=torch.float32, device=device).masked_fill(
            ~mask, torch.finfo(torch.float32).min
        )
    out = model(
        input_ids=torch.cat([batch.prompt_ids, batch.completion_ids.reshape(g, k * width)], dim=1),
        attention_mask=mask,
        position_ids=positions,
        use_cache=False,
        logits_to_keep=k * width + 1,
    )
    # Kept positions: 0 is the prompt's last token (it predicts every completion's first token);
    # 1 + c*width + j is token j of completion c (it predicts token j + 1).
    column = torch.arange(width, device=device)
    source = torch.where(column == 0, 0, torch.arange(k, device=device).unsqueeze(1) * width + column)  # [K, C]
    logits = out.logits[:, source.reshape(-1), :].reshape(g * k, width, -1)
    if temperature != 1.0:
        logits = logits / temperature
    return selective_log_softmax(logits, batch.completion_ids)


def sequence_logprobs(model: Any, batch: SequenceBatch, temperature: float = 1.0) -> torch.Tensor:
    """[B, C] log-probs of each completion token under `model` (logits divided by temperature)."""
    width = batch.completion_ids.shape[1]
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        use_cache=False,
        logits_to_keep=width + 1,
    )
    logits = out.logits[:, :-1, :]  # position j predicts token j + 1
    if temperature != 1.0:
        logits = logits / temperature
    return selective_log_softmax(logits, batch.completion_ids)


def selective_log_softmax(logits: Tensor, tokens: Tensor) -> Tensor:
    """log_softmax(logits)[..., tokens] without materialising the full log-softmax.

    logits: [..., V]; tokens: [...] integer ids. Computed in float32 for stability.
    """
    logits = logits.float()
    picked = torch.gather(logits, -1, tokens.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def layout_batch(
    policy: Policy, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], k: int
) -> GroupBatch | SequenceBatch:
    """Whole groups laid out for one forward pass: packed (each prompt once) where the model's
    attention takes a tree mask, else one row per sequence."""
    from searchgrpo.policy.decoders import packs_prefix

    pad = policy.tokenizer.pad_token_id
    if packs_prefix(policy.model):
        return make_group_batch(prompts, completions, k, pad, policy.device)
    return make_batch([p for p in prompts for _ in range(k)], completions, pad, policy.device)


def batch_logprobs(policy: Policy, batch: GroupBatch | SequenceBatch, temperature: float) -> torch.Tensor:
    """[rows, C] completion log-probs of a `layout_batch` batch under the policy's current weights."""
    if isinstance(batch, GroupBatch):
        return group_logprobs(policy.model, batch, temperature)
    return sequence_logprobs(policy.model, batch, temperature)


@torch.no_grad()
def sampling_logprobs(
    policy: Policy, prompt: Sequence[int], completions: Sequence[Sequence[int]], temperature: float
) -> torch.Tensor:
    """[K, T] log-probs of one group's completions under the weights of now (kept on the CPU): the
    old log-probs of samples that are trained on after the weights have moved (`train.pipeline`)."""
    policy.model.eval()
    batch = layout_batch(policy, [prompt], completions, len(completions))
    return batch_logprobs(policy, batch, temperature).float().cpu()


def stack_padded(rows: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """[sum of rows, width]: each [n, T] tensor right-padded with zeros (masked positions) to `width`."""
    return torch.cat([torch.nn.functional.pad(r, (0, width - r.shape[1])) for r in rows], dim=0)

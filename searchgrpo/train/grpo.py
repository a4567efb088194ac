"""GRPO maths as pure tensor functions: advantages, the clipped surrogate, KL, aggregation.

Shapes: G groups (states), K samples per group, N = G*K sequences, T completion tokens.
Nothing here touches a model; `tests/unit/train/test_grpo.py` checks every function against hand-computed
values.

The seed's loss, per completion token t of sample i:

    adv_i   = (r_i - mean(r)) / (std(r) + eps)                  group-normalised advantage
    ratio_t = exp(logp_t - old_logp_t)
    pg_t    = -min(ratio_t * adv_i, clip(ratio_t, 1 - eps_low, 1 + eps_high) * adv_i)
    kl_t    = (ref_logp_t - logp_t)^2                            (or k3, see `kl_per_token`)
    loss_t  = pg_t + beta * kl_t

and the per-token losses are aggregated over the batch by `aggregate`.

When the samples come from another engine than the trainer (`grpo.sampler: server`), old_logp is
the trainer's own log-prob of the sampled tokens, recomputed before the update, and pg_t is
multiplied by the truncated importance weight w_t = min(exp(old_logp_t - sampler_logp_t), C)
(`truncated_importance_weights`), which corrects for sampling from the sampler's distribution
instead of the trainer's; the KL term is not weighted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

ZERO_STD_TOL = 1e-6
"""Groups whose reward std is below this are zero-variance: their advantages are exactly 0."""


def zero_std_groups(rewards: Tensor) -> Tensor:
    """[G] bool: the groups of [G, K] `rewards` whose unbiased std is below ZERO_STD_TOL.

    The one test of zero variance: the advantages (`group_advantages` zeroes these groups),
    dynamic sampling (`rollouts.zero_variance` replaces them) and `reward/frac_zero_std` all ask it.
    TRL's `frac_reward_zero_std` asks `isclose(std, 0)`, i.e. std below 1e-8; rewards here are
    sums of weights rounded to 1e-10, so both find the same groups.
    """
    return rewards.to(torch.float64).std(dim=1) < ZERO_STD_TOL


def group_advantages(
    rewards: Tensor, scale: Literal["group", "batch", "none"] = "group", eps: float = 1e-4
) -> tuple[Tensor, Tensor]:
    """Group-relative advantages.

    Args:
        rewards: [G, K] rewards, one row per group.
        scale: divide the centred rewards by the group's std (`group`, the seed), the std of all
            rewards in the batch (`batch`), or by nothing (`none`, Dr. GRPO).
        eps: added to the std before dividing.

    Returns:
        ([G, K] advantages, [G] bool mask of zero-variance groups). Stds are unbiased (n - 1), as
        torch and TRL compute them. A zero-variance group gets advantage 0, never NaN.
    """
    if rewards.dim() != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be [G, K] with K >= 2, got {tuple(rewards.shape)}")
    rewards = rewards.to(torch.float64)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    group_std = rewards.std(dim=1, keepdim=True)
    zero_std = zero_std_groups(rewards)
    if scale == "group":
        adv = centred / (group_std + eps)
    elif scale == "batch":
        batch_std = rewards.std() if rewards.numel() > 1 else rewards.new_zeros(())
        adv = centred / (batch_std + eps)
    elif scale == "none":
        adv = centred
    else:
        raise ValueError(f"unknown scale {scale!r}")
    adv = torch.where(zero_std.unsqueeze(1), torch.zeros_like(adv), adv)
    return adv.to(torch.float32), zero_std


def kl_per_token(logp: Tensor, ref_logp: Tensor, estimator: Literal["sq", "k3"] = "sq") -> Tensor:
    """Per-token KL penalty between the policy and the frozen reference.

    With d = ref_logp - logp: `sq` is d^2 (the seed's squared log-ratio); `k3` is
    exp(d) - d - 1 (Schulman's unbiased, non-negative estimator, used by TRL and verl).
    """
    d = ref_logp - logp
    if estimator == "sq":
        return d * d
    if estimator == "k3":
        return torch.exp(d) - d - 1.0
    raise ValueError(f"unknown KL estimator {estimator!r}")


@dataclass(frozen=True)
class Surrogate:
    """The clipped policy-gradient term per token and where clipping was active."""

    loss: Tensor
    """[N, T] per-token policy-gradient loss."""
    clipped_low: Tensor
    """[N, T] bool: ratio fell below 1 - eps_low with a negative advantage (gradient cut)."""
    clipped_high: Tensor
    """[N, T] bool: ratio rose above 1 + eps_high with a positive advantage (gradient cut)."""
    ratio: Tensor
    """[N, T] importance ratio."""


def clipped_surrogate(logp: Tensor, old_logp: Tensor, advantages: Tensor, eps_low: float, eps_high: float) -> Surrogate:
    """PPO's clipped surrogate. `advantages` is [N] (one per sequence) or [N, T]."""
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    return Surrogate(
        loss=loss,
        clipped_low=(ratio < 1.0 - eps_low) & (adv < 0),
        clipped_high=(ratio > 1.0 + eps_high) & (adv > 0),
        ratio=ratio,
    )


def truncated_importance_weights(trainer_logp: Tensor, sampler_logp: Tensor, cap: float) -> tuple[Tensor, Tensor]:
    """min(pi_trainer / pi_sampler, cap) per token, and [N, T] bool: where the cap cut the ratio.

    Both log-probs are of the sampled tokens; the weights carry no gradient.
    """
    ratio = torch.exp(trainer_logp.detach() - sampler_logp.detach())
    return torch.clamp(ratio, max=cap), ratio > cap


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    loss_type: Literal["grpo", "dr_grpo", "dapo"],
    *,
    num_sequences: int,
    num_tokens: int,
    max_new_tokens: int,
) -> Tensor:
    """Reduce [N, T] per-token losses of a micro-batch to its share of the step's scalar loss.

    The denominators are those of the whole step (all micro-batches), so summing the returned
    values over micro-batches gives exactly the loss of one big batch:

    - `grpo`: each sequence's mean over its tokens, averaged over sequences (the seed);
    - `dr_grpo`: the sum over all tokens / (num_sequences * max_new_tokens);
    - `dapo`: the sum over all tokens / num_tokens (token-level mean).
    """
    mask = mask.to(per_token.dtype)
    masked = per_token * mask
    if loss_type == "grpo":
        per_seq = masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return per_seq.sum() / num_sequences
    if loss_type == "dr_grpo":
        return masked.sum() / (num_sequences * max_new_tokens)
    if loss_type == "dapo":
        return masked.sum() / max(num_tokens, 1)
    raise ValueError(f"unknown loss_type {loss_type!r}")


@dataclass(frozen=True)
class LossStats:
    """Sums over a micro-batch's completion tokens, to be added up over the step: 0-dim float64
    tensors on the loss's device (reading one waits for the device, so the step reads them once,
    after its last micro-batch)."""

    tokens: Tensor
    kl_sum: Tensor
    """Sum of the k3 estimate of KL(policy || reference) per token, whatever the penalty's
    estimator: TRL's `kl` (0 when beta == 0: no reference pass)."""
    penalty_sum: Tensor
    """Sum of the KL penalty per token, `kl_per_token` with the configured estimator (what beta
    multiplies; with `sq`, about twice the KL)."""
    clipped_low: Tensor
    clipped_high: Tensor


def grpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    ref_logp: Tensor | None,
    advantages: Tensor,
    mask: Tensor,
    *,
    eps_low: float,
    eps_high: float,
    beta: float,
    kl_estimator: Literal["sq", "k3"],
    loss_type: Literal["grpo", "dr_grpo", "dapo"],
    num_sequences: int,
    num_tokens: int,
    max_new_tokens: int,
    tis_weight: Tensor | None = None,
) -> tuple[Tensor, LossStats]:
    """The GRPO loss of one micro-batch (its share of the step's loss) and token statistics.

    `ref_logp` may be None only when beta == 0 (the reference pass is skipped). `tis_weight`
    ([N, T], `truncated_importance_weights`) multiplies the policy-gradient term per token.
    """
    surrogate = clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high)
    per_token = surrogate.loss if tis_weight is None else surrogate.loss * tis_weight
    penalty = None
    if beta > 0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs reference log-probs")
        penalty = kl_per_token(logp, ref_logp, kl_estimator)
        per_token = per_token + beta * penalty
    loss = aggregate(
        per_token, mask, loss_type, num_sequences=num_sequences, num_tokens=num_tokens, max_new_tokens=max_new_tokens
    )
    with torch.no_grad():
        m = mask.to(torch.bool)

        def masked_sum(x: Tensor) -> Tensor:  # no boolean indexing: its size would wait for the device
            return torch.where(m, x, 0).sum(dtype=torch.float64)

        zero = logp.new_zeros((), dtype=torch.float64)
        stats = LossStats(
            tokens=m.sum(dtype=torch.float64),
            kl_sum=masked_sum(kl_per_token(logp, ref_logp, "k3")) if ref_logp is not None and beta > 0 else zero,
            penalty_sum=masked_sum(penalty) if penalty is not None else zero,
            clipped_low=masked_sum(surrogate.clipped_low),
            clipped_high=masked_sum(surrogate.clipped_high),
        )
    return loss, stats

"""One GRPO step: a step's scored groups (`rollouts.py`), then the clipped, KL-penalised
policy-gradient update on the LoRA weights (`update`).

Stages, each timed: `generate` + `score` (`rollouts.collect_groups`: sampling, BM25 + checker +
reward, and dynamic sampling's replacement rounds), then `loss` (reference and old log-probs where
needed, then `num_iterations` optimiser updates over micro-batches of whole groups). The step
returns numbers and the groups it sampled; the trainer turns them into events.

Two exact shortcuts: each state's prompt is encoded once for its K completions (shared prefix, in
sampling and in the loss, with or without gradient checkpointing: see `policy.logprobs`), and when
beta = 0 the groups with zero reward variance are left out of the forward passes (their advantage
is 0, so their gradient is exactly 0; the loss denominators still count them, so the update is
unchanged).

With `reward.per_clue` each completion's advantage becomes per token: each clue's tokens weighted
by its share of the set's finds (`clue_weights.py`). Under episode credit the groups' "rewards"
are their branch returns (`ScoredGroup.rewards`), so the advantages follow them unchanged.

With a `sampler` other than the trainer's own model (`grpo.sampler: server`), the samples carry
the sampler's log-probs, and the loss recomputes the trainer's and weights each token by a
truncated importance ratio (one hook: `sampler_correction.py`).

Under data parallelism (`distributed.py`) each rank samples and trains its share of the step's
groups: the loss denominators are global, gradients are summed across ranks before clipping, and
metrics are computed from every rank's samples, so N processes take the same step as one. A step
with no gradient on any rank (beta 0, every group zero-variance) makes no update: AdamW's state
stays as it was on every rank, as on one process, and the schedule advances.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.env.reward import COMPONENTS
from searchgrpo.env.search_round import SearchRoundEnv
from searchgrpo.policy.logprobs import GroupBatch, SequenceBatch, batch_logprobs, layout_batch, stack_padded
from searchgrpo.policy.lora_compute import casts_kept
from searchgrpo.policy.model import Policy
from searchgrpo.policy.samplers import Sampler
from searchgrpo.train.clue_weights import batch_token_weights, row_advantages
from searchgrpo.train.distributed import Dist
from searchgrpo.train.grpo import LossStats, group_advantages, grpo_loss
from searchgrpo.train.rollouts import Refill, Rollouts, ScoredGroup, collect_groups
from searchgrpo.train.sampler_correction import needs_correction, sampler_correction
from searchgrpo.train.timing import Stopwatch

Batch = GroupBatch | SequenceBatch


@dataclass
class StepOutcome:
    """What one step produced: global metrics, and this rank's sampled groups with their advantages."""

    metrics: dict[str, float]
    groups: list[ScoredGroup] = field(default_factory=list)
    """Every group this rank sampled, in step order (`in_batch` marks the ones trained on)."""
    advantages: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    """Each trained group's K advantages, by group key."""
    nonfinite: bool = False


def grpo_step(
    cfg: Config,
    policy: Policy,
    env: SearchRoundEnv,
    optimizer: Any,
    scheduler: Any,
    states: Sequence[SearchState],
    *,
    prompt_of: Callable[[SearchState], list[int]],
    seed_of: Callable[[SearchState, int], int],
    refill: Refill | None = None,
    dist: Dist | None = None,
    sampler: Sampler | None = None,
) -> StepOutcome:
    """Run one GRPO step on the step's `states` (every rank's, in step order): sampling, scoring
    and dynamic sampling (`rollouts.collect_groups`), then the update on this rank's share.
    `sampler` (searchgrpo/policy/samplers.py) samples instead of `generate` on the policy."""
    watch = Stopwatch()
    rollouts = collect_groups(
        cfg.grpo,
        policy,
        env,
        states,
        prompt_of=prompt_of,
        seed_of=seed_of,
        refill=refill,
        dist=dist,
        watch=watch,
        sampler=sampler,
    )
    return update(cfg, policy, optimizer, scheduler, rollouts, dist=dist, watch=watch, sampler=sampler)


def update(
    cfg: Config,
    policy: Policy,
    optimizer: Any,
    scheduler: Any,
    rollouts: Rollouts,
    *,
    dist: Dist | None = None,
    watch: Stopwatch | None = None,
    sampler: Sampler | None = None,
) -> StepOutcome:
    """The clipped, KL-penalised policy-gradient update on this rank's share of `rollouts`. Groups
    sampled before the weights last moved carry their old log-probs (`ScoredGroup.old_logp`, a
    pipelined step), and the PPO ratio is taken against them."""
    dist = dist or Dist()
    watch = watch or Stopwatch()
    g, model = cfg.grpo, policy.model
    K = g.num_generations
    batch_groups = rollouts.batch
    rewards = torch.tensor([grp.rewards for grp in batch_groups], dtype=torch.float64).reshape(-1, K)
    if batch_groups:
        adv, zero_std = group_advantages(rewards, g.scale_rewards, g.advantage_eps)
    else:
        adv, zero_std = torch.zeros((0, K)), torch.zeros(0, dtype=torch.bool)
    if g.scale_rewards == "batch" and dist.enabled:
        adv, zero_std = _batch_scaled(rewards, dist, g.advantage_eps)

    # Sequences are rows n = i * K + k (group i of this rank's batch, sample k). Micro-batches hold whole groups.
    prompts = [grp.prompt for grp in batch_groups]
    seq_completions = [c.token_ids for grp in batch_groups for c in grp.completions]
    seq_adv = adv.reshape(-1)
    clue_w = (
        batch_token_weights(batch_groups, adv, policy.tokenizer, cfg.env.max_clues, cfg.prompt.clue_format)
        if cfg.reward.per_clue
        else None
    )
    num_sequences = rollouts.target * K
    num_tokens = int(dist.sum([sum(len(c) for c in seq_completions)])[0])
    active = [i for i in range(len(batch_groups)) if g.beta > 0 or not bool(zero_std[i])]
    per_batch = max(1, cfg.train.micro_batch_size // K)

    with watch.time("loss"):
        batches = [
            (rows, layout_batch(policy, [prompts[i] for i in chunk], [seq_completions[r] for r in rows], K))
            for chunk in (active[j : j + per_batch] for j in range(0, len(active), per_batch))
            for rows in [[i * K + k for i in chunk for k in range(K)]]
        ]
        ref = _frozen_logprobs(policy, batches, g.temperature, reference=True) if g.beta > 0 and active else None
        # Samples from another engine (sampler_correction.py): the trainer's own old log-probs, and
        # truncated importance weights against the sampler's.
        flat = [c for grp in batch_groups for c in grp.completions]
        correct = needs_correction(flat)
        # Old log-probs, per group: kept at sampling time (a pipelined step), else the current
        # weights' (a frozen pass before the update where the ratio needs them to stay fixed).
        frozen = (
            _frozen_logprobs(policy, batches, g.temperature, reference=False)
            if (g.num_iterations > 1 or correct) and not all(grp.old_logp is not None for grp in batch_groups)
            else None
        )
        old, fresh_rows = _old_logprobs(batch_groups, batches, K, frozen, policy.device)
        tis = sampler_correction(batches, flat, old, g.tis_cap) if correct and old is not None else None
        totals = _Totals()
        params = policy.trainable_parameters()
        model.train()  # once: a mode switch walks every module (transformers' also re-kernelizes)
        for _ in range(g.num_iterations):
            optimizer.zero_grad(set_to_none=True)
            loss_sum = torch.zeros((), dtype=torch.float64, device=policy.device)  # read once, after the loop
            # The weights stay as they are until the optimiser's step below: each adapted layer casts
            # its factors once for every micro-batch and recomputation (lora_compute.casts_kept).
            with casts_kept(model):
                for b, (rows, batch) in enumerate(batches):
                    logp = batch_logprobs(policy, batch, g.temperature)
                    old_b = old[b] if old is not None else logp.detach()
                    if fresh_rows is not None:  # rows of groups sampled with the weights of now: ratio 1
                        old_b = torch.where(fresh_rows[b].unsqueeze(1), logp.detach(), old_b)
                    loss, stats = grpo_loss(
                        logp,
                        old_b,
                        ref[b] if ref is not None else None,
                        row_advantages(seq_adv, rows, clue_w, logp.shape[1]).to(logp.device),
                        batch.completion_mask,
                        eps_low=g.epsilon,
                        eps_high=g.epsilon_high if g.epsilon_high is not None else g.epsilon,
                        beta=g.beta,
                        kl_estimator=g.kl_estimator,
                        loss_type=g.loss_type,
                        num_sequences=num_sequences,
                        num_tokens=num_tokens,
                        max_new_tokens=g.max_new_tokens,
                        tis_weight=tis.weights[b] if tis is not None else None,
                    )
                    loss.backward()
                    loss_sum += loss.detach()
                    totals.add(stats)
            signal = dist.all_reduce_grads(params)
            loss_value = dist.sum([float(loss_sum)])[0]
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.train.max_grad_norm)) if signal else 0.0
            # No gradient on any rank (beta 0, every group zero-variance): no update anywhere, AdamW
            # untouched, as on one process; the schedule still advances.
            if signal and math.isfinite(loss_value) and math.isfinite(grad_norm):
                optimizer.step()
            elif signal:  # never let a NaN or inf reach the adapter
                optimizer.zero_grad(set_to_none=True)
                totals.nonfinite = True
            totals.lrs.append(float(scheduler.get_last_lr()[0]))  # the rate this update ran at
            scheduler.step()
            totals.losses.append(loss_value)
            totals.grad_norms.append(grad_norm)

    parts = _metric_parts(batch_groups, zero_std, K)
    metrics = _metrics(
        dist.gather_json(parts),
        dist.sum(totals.sums()),
        totals,
        watch,
        scheduler,
        dist,
        tokens=num_tokens * g.num_iterations,
        kl=g.beta > 0,
    )
    metrics.update(rollouts.stats)
    if tis is not None:  # every rank has one: the ranks share one sampler kind
        metrics.update(tis.metrics(dist, sampler.take_publish_s() if sampler is not None else 0.0))
    advantages = {grp.key: adv[i].tolist() for i, grp in enumerate(batch_groups)}
    return StepOutcome(metrics, rollouts.sampled, advantages, totals.nonfinite)


def _batch_scaled(rewards: torch.Tensor, dist: Dist, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`scale_rewards: batch` over every rank's rewards: centred by group, scaled by the global std."""
    everything = torch.tensor(
        [r for part in dist.gather_json(rewards.tolist()) for row in part for r in row], dtype=torch.float64
    )
    std = everything.std() if everything.numel() > 1 else everything.new_zeros(())
    adv, zero_std = group_advantages(rewards, "none")
    return (adv.double() / (std + eps)).float(), zero_std


@torch.no_grad()
def _frozen_logprobs(
    policy: Policy, batches: list[tuple[list[int], Batch]], temperature: float, *, reference: bool
) -> list[torch.Tensor]:
    """Log-probs that stay fixed during the step: the reference's, or the sampling policy's."""
    policy.model.eval()
    # One switch for every micro-batch: peft's `disable_adapter` walks the whole model on entry.
    with policy.reference_mode() if reference else casts_kept(policy.model):
        return [batch_logprobs(policy, batch, temperature) for _, batch in batches]


def _old_logprobs(
    groups: list[ScoredGroup],
    batches: list[tuple[list[int], Batch]],
    k: int,
    frozen: list[torch.Tensor] | None,
    device: Any,
) -> tuple[list[torch.Tensor] | None, list[torch.Tensor] | None]:
    """(old, fresh): each micro-batch's old log-probs, per group: the group's own where it kept
    them when it was sampled (`ScoredGroup.old_logp`), else `frozen`'s rows. Without `frozen`,
    groups without their own take the current log-probs (ratio 1: sampled by the weights of now):
    `fresh` then masks those [N] rows of each micro-batch; otherwise it is None, and `old` is None
    only when no group kept any and nothing was frozen."""
    if not any(grp.old_logp is not None for grp in groups):
        return frozen, None
    old, fresh = [], []
    for b, (rows, batch) in enumerate(batches):
        width = batch.completion_mask.shape[1]
        owners = [groups[r // k] for r in rows[::k]]
        kept = stack_padded(
            [grp.old_logp if grp.old_logp is not None else torch.zeros(k, width) for grp in owners], width
        ).to(device)
        stored = torch.tensor([grp.old_logp is not None for grp in owners for _ in range(k)], device=device)
        if frozen is not None:
            kept = torch.where(stored.unsqueeze(1), kept, frozen[b])
        old.append(kept)
        fresh.append(~stored)
    some_fresh = any(grp.old_logp is None for grp in groups)
    return old, (fresh if frozen is None and some_fresh else None)


@dataclass
class _Totals:
    """The step's sums; the loss statistics stay on the device until `sums` reads them."""

    kl_sum: float | torch.Tensor = 0.0
    penalty_sum: float | torch.Tensor = 0.0
    clipped_low: float | torch.Tensor = 0.0
    clipped_high: float | torch.Tensor = 0.0
    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    nonfinite: bool = False

    def add(self, s: LossStats) -> None:
        self.kl_sum += s.kl_sum
        self.penalty_sum += s.penalty_sum
        self.clipped_low += s.clipped_low
        self.clipped_high += s.clipped_high

    def sums(self) -> list[float]:
        stats = (self.kl_sum, self.penalty_sum, self.clipped_low, self.clipped_high)
        return [*(float(x) for x in stats), float(self.nonfinite)]


def _metric_parts(groups: list[ScoredGroup], zero_std: torch.Tensor, k: int) -> dict[str, Any]:
    """This rank's raw per-sample numbers of the batch (JSON), from which every rank computes global metrics."""
    flat = [r for grp in groups for r in grp.results]
    completions = [c for grp in groups for c in grp.completions]
    return {
        "rewards": [r.reward.total for r in flat],
        "zero_std": [bool(z) for z in zero_std],
        "completion_tokens": [len(c.token_ids) for c in completions],
        "truncated": [c.truncated for c in completions],
        "clues": [len(r.clues) for r in flat],
        "unparsable": [r.parsed.unparsable for r in flat],
        "docs": [len(r.docs) for r in flat],
        "components": {name: [r.reward.weighted[name] for r in flat] for name in COMPONENTS},
        "prompt_tokens": sum(len(grp.prompt) for grp in groups) * k,
    }


def _metrics(
    parts: list[dict[str, Any]],
    sums: list[float],
    totals: _Totals,
    watch: Stopwatch,
    scheduler: Any,
    dist: Dist,
    *,
    tokens: int,
    kl: bool,
) -> dict[str, float]:
    """The step's metrics. `tokens`: the batch's completion tokens over all ranks, times the
    updates: the denominator of the token means, as TRL's (zero-variance groups left out of the
    forward passes at beta 0 count, unclipped). `kl`: the step has a KL term (beta > 0)."""

    def cat(key: str) -> list[Any]:
        return [x for p in parts for x in p[key]]

    rewards = torch.tensor(cat("rewards") or [0.0], dtype=torch.float64)
    n = max(len(cat("rewards")), 1)
    kl_sum, penalty_sum, clip_low, clip_high, nonfinite = sums
    tokens = max(tokens, 1)
    m: dict[str, float] = {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
        "reward/min": float(rewards.min()),
        "reward/max": float(rewards.max()),
        "reward/frac_zero_std": sum(cat("zero_std")) / max(len(cat("zero_std")), 1),
        "loss/total": totals.losses[-1] if totals.losses else 0.0,
        "loss/clip_frac": (clip_low + clip_high) / tokens,
        "loss/clip_low": clip_low / tokens,
        "loss/clip_high": clip_high / tokens,
        "grad/norm": totals.grad_norms[-1] if totals.grad_norms else 0.0,
        "train/lr": totals.lrs[-1] if totals.lrs else float(scheduler.get_last_lr()[0]),
        "train/nonfinite_skipped": float(nonfinite > 0),
        "rollout/completion_tokens": sum(cat("completion_tokens")) / n,
        "rollout/truncated_frac": sum(cat("truncated")) / n,
        "rollout/clues": sum(cat("clues")) / n,
        "rollout/unparsable_frac": sum(cat("unparsable")) / n,
        "rollout/docs": sum(cat("docs")) / n,
        "tokens/prompt": float(sum(p["prompt_tokens"] for p in parts)),
        "tokens/completion": float(sum(cat("completion_tokens"))),
    }
    if kl:  # measured only with a reference pass, as TRL logs `kl` only when beta != 0
        m["loss/kl"] = kl_sum / tokens
        m["loss/kl_penalty"] = penalty_sum / tokens
    for name in COMPONENTS:
        m[f"reward/{name}"] = sum(x for p in parts for x in p["components"][name]) / n
    # Wall time is the slowest rank's (a rank may have phases another lacks, e.g. a refill round).
    per_rank = dist.gather_json(watch.totals)
    for name in sorted({p for totals in per_rank for p in totals}):
        m[f"time/{name}"] = max(totals.get(name, 0.0) for totals in per_rank)
    m["time/step"] = max(sum(totals.values()) for totals in per_rank)
    return m

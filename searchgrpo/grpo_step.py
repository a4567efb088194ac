"""One GRPO update: sample K clue sets per state, score them, and take the clipped, KL-penalised
policy-gradient step on the LoRA weights.

Stages, each timed: `generate` (one batched sampling call for all states of the step), `score`
(BM25 + checker + reward, one checker batch per group), `advantages`, then `loss` (reference and
old log-probs where needed, then `num_iterations` optimiser updates over micro-batches). A checker
that keeps counters adds its per-step `checker/*` metrics (calls, cache hits, latency, ...).

Two exact shortcuts: each state's prompt is encoded once for its K completions (shared prefix,
see `rollout.group_logprobs`), and when beta = 0 the groups with zero reward variance are left out
of the forward passes (their advantage is 0, so their gradient is exactly 0; the loss denominators
still count them, so the update is unchanged).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import torch

from searchgrpo.agent_checkpoints import SearchState
from searchgrpo.checker import checker_stats, stats_delta
from searchgrpo.config import Config
from searchgrpo.env import SearchRoundEnv, StepResult
from searchgrpo.events import DocView, GroupScored, SampleView
from searchgrpo.grpo import LossStats, group_advantages, grpo_loss
from searchgrpo.model import Policy
from searchgrpo.reward import COMPONENTS
from searchgrpo.rollout import (
    Completion,
    GroupBatch,
    SequenceBatch,
    generate,
    group_logprobs,
    make_batch,
    make_group_batch,
    sequence_logprobs,
)
from searchgrpo.timing import Stopwatch


Batch = Union[GroupBatch, SequenceBatch]


@dataclass
class StepOutcome:
    """What one step produced: metrics, and the groups for the event stream."""

    metrics: dict[str, float]
    groups: list[GroupScored] = field(default_factory=list)
    nonfinite: bool = False


def group_event(
    step: int,
    epoch: int,
    state: SearchState,
    completions: Sequence[Completion],
    results: Sequence[StepResult],
    advantages: Sequence[float],
    zero_std: bool,
    corpus: Any,
    snippet_chars: int,
) -> GroupScored:
    samples = []
    for i, (c, r, a) in enumerate(zip(completions, results, advantages)):
        docs = [
            DocView(d.docid, d.title, corpus.get(d.docid).snippet(snippet_chars), d.label.value, d.reason, d.new,
                    d.clue_index, d.rank)
            for d in r.docs
        ]
        samples.append(
            SampleView(i, c.text, list(r.clues), r.reward.total, float(a), r.reward.weighted, r.reward.counts, docs,
                       r.parsed.unparsable, len(c.token_ids))
        )
    rewards = torch.tensor([r.reward.total for r in results], dtype=torch.float64)
    return GroupScored(
        step=step, epoch=epoch, state_id=state.state_id, question=state.question, round=state.round,
        samples=samples, reward_mean=float(rewards.mean()), reward_std=float(rewards.std()), zero_std=zero_std,
        original_clues=list(state.original_clues),
    )


def grpo_step(
    cfg: Config,
    policy: Policy,
    env: SearchRoundEnv,
    optimizer: Any,
    scheduler: Any,
    states: Sequence[SearchState],
    prompts: Sequence[list[int]],
    *,
    step: int,
    epoch: int,
) -> StepOutcome:
    """Run one GRPO step on `states` (whose encoded prompts are `prompts`)."""
    g, model, tok = cfg.grpo, policy.model, policy.tokenizer
    watch = Stopwatch()
    K = g.num_generations

    with watch.time("generate"):
        groups = generate(
            model, tok, prompts, num_samples=K, max_new_tokens=g.max_new_tokens,
            temperature=g.temperature, top_p=g.top_p, device=policy.device,
        )
    before = checker_stats(env.checker)
    with watch.time("score"):
        results = [env.score_group(s, [c.text for c in group]) for s, group in zip(states, groups)]
    after = checker_stats(env.checker)
    rewards = torch.tensor([[r.reward.total for r in rs] for rs in results], dtype=torch.float64)
    adv, zero_std = group_advantages(rewards, g.scale_rewards, g.advantage_eps)

    corpus = env.retriever.corpus
    events = [
        group_event(step, epoch, s, grp, rs, adv[i].tolist(), bool(zero_std[i]), corpus, cfg.env.snippet_chars)
        for i, (s, grp, rs) in enumerate(zip(states, groups, results))
    ]

    # Sequences are rows n = g * K + k (state g, sample k). Micro-batches hold whole groups.
    seq_completions = [c.token_ids for grp in groups for c in grp]
    seq_adv = adv.reshape(-1)
    num_sequences = len(seq_completions)
    num_tokens = sum(len(c) for c in seq_completions)
    active = [i for i in range(len(states)) if g.beta > 0 or not bool(zero_std[i])]
    per_batch = max(1, cfg.train.micro_batch_size // K)

    with watch.time("loss"):
        batches = [
            (rows, _layout(policy, [prompts[i] for i in chunk], [seq_completions[r] for r in rows], K))
            for chunk in (active[j:j + per_batch] for j in range(0, len(active), per_batch))
            for rows in [[i * K + k for i in chunk for k in range(K)]]
        ]
        ref = _frozen_logprobs(policy, batches, g.temperature, reference=True) if g.beta > 0 and active else None
        old = _frozen_logprobs(policy, batches, g.temperature, reference=False) if g.num_iterations > 1 else None
        totals = _Totals()
        for _ in range(g.num_iterations):
            optimizer.zero_grad(set_to_none=True)
            loss_value = 0.0
            for b, (rows, batch) in enumerate(batches):
                model.train()
                logp = _logprobs(policy, batch, g.temperature)
                loss, stats = grpo_loss(
                    logp,
                    old[b] if old is not None else logp.detach(),
                    ref[b] if ref is not None else None,
                    seq_adv[rows].to(logp.device),
                    batch.completion_mask,
                    eps_low=g.epsilon,
                    eps_high=g.epsilon_high if g.epsilon_high is not None else g.epsilon,
                    beta=g.beta,
                    kl_estimator=g.kl_estimator,
                    loss_type=g.loss_type,
                    num_sequences=num_sequences,
                    num_tokens=num_tokens,
                    max_new_tokens=g.max_new_tokens,
                )
                loss.backward()
                loss_value += float(loss.detach())
                totals.add(stats)
            params = policy.trainable_parameters()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.train.max_grad_norm)) if params else 0.0
            finite = math.isfinite(loss_value) and math.isfinite(grad_norm)
            if finite:
                optimizer.step()
            else:
                optimizer.zero_grad(set_to_none=True)
                totals.nonfinite = True
            scheduler.step()
            totals.losses.append(loss_value)
            totals.grad_norms.append(grad_norm)

    metrics = _metrics(cfg, rewards, zero_std, results, groups, prompts, totals, watch, scheduler)
    if before is not None and after is not None:
        metrics.update(stats_delta(before, after))
    return StepOutcome(metrics, events, totals.nonfinite)


def shares_prefix(policy: Policy) -> bool:
    """Shared-prefix scoring needs a KV cache, which gradient checkpointing switches off."""
    model = policy.model
    flag = getattr(type(model), "is_activation_checkpointing", None)
    name = "is_activation_checkpointing" if flag is not None else "is_gradient_checkpointing"
    return not getattr(model, name, False)


def _layout(policy: Policy, prompts: list[list[int]], completions: list[list[int]], k: int) -> Batch:
    pad = policy.tokenizer.pad_token_id
    if shares_prefix(policy):
        return make_group_batch(prompts, completions, k, pad, policy.device)
    return make_batch([p for p in prompts for _ in range(k)], completions, pad, policy.device)


def _logprobs(policy: Policy, batch: Batch, temperature: float) -> torch.Tensor:
    if isinstance(batch, GroupBatch):
        return group_logprobs(policy.model, batch, temperature)
    return sequence_logprobs(policy.model, batch, temperature)


@torch.no_grad()
def _frozen_logprobs(policy: Policy, batches: list[tuple[list[int], Batch]], temperature: float, *,
                     reference: bool) -> list[torch.Tensor]:
    """Log-probs that stay fixed during the step: the reference's, or the sampling policy's."""
    policy.model.eval()
    out = []
    for _, batch in batches:
        with policy.reference_mode() if reference else contextlib.nullcontext():
            out.append(_logprobs(policy, batch, temperature))
    return out


@dataclass
class _Totals:
    tokens: float = 0.0
    kl_sum: float = 0.0
    clipped_low: float = 0.0
    clipped_high: float = 0.0
    losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    nonfinite: bool = False

    def add(self, s: LossStats) -> None:
        self.tokens += s.tokens
        self.kl_sum += s.kl_sum
        self.clipped_low += s.clipped_low
        self.clipped_high += s.clipped_high


def _metrics(
    cfg: Config,
    rewards: torch.Tensor,
    zero_std: torch.Tensor,
    results: list[list[StepResult]],
    groups: list[list[Completion]],
    prompts: Sequence[list[int]],
    totals: _Totals,
    watch: Stopwatch,
    scheduler: Any,
) -> dict[str, float]:
    flat = [r for rs in results for r in rs]
    completions = [c for grp in groups for c in grp]
    n = len(flat)
    tokens = max(totals.tokens, 1.0)
    m: dict[str, float] = {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
        "reward/min": float(rewards.min()),
        "reward/max": float(rewards.max()),
        "reward/frac_zero_std": float(zero_std.float().mean()),
        "loss/total": totals.losses[-1] if totals.losses else 0.0,
        "loss/kl": totals.kl_sum / tokens,
        "loss/clip_frac": (totals.clipped_low + totals.clipped_high) / tokens,
        "loss/clip_low": totals.clipped_low / tokens,
        "loss/clip_high": totals.clipped_high / tokens,
        "grad/norm": totals.grad_norms[-1] if totals.grad_norms else 0.0,
        "train/lr": float(scheduler.get_last_lr()[0]),
        "train/nonfinite_skipped": float(totals.nonfinite),
        "rollout/completion_tokens": sum(len(c.token_ids) for c in completions) / n,
        "rollout/truncated_frac": sum(c.truncated for c in completions) / n,
        "rollout/clues": sum(len(r.clues) for r in flat) / n,
        "rollout/unparsable_frac": sum(r.parsed.unparsable for r in flat) / n,
        "rollout/docs": sum(len(r.docs) for r in flat) / n,
        "tokens/prompt": float(sum(len(p) for p in prompts) * cfg.grpo.num_generations),
        "tokens/completion": float(sum(len(c.token_ids) for c in completions)),
    }
    for name in COMPONENTS:
        m[f"reward/{name}"] = sum(r.reward.weighted[name] for r in flat) / n
    for name, seconds in watch.totals.items():
        m[f"time/{name}"] = seconds
    m["time/step"] = sum(watch.totals.values())
    return m

"""One GRPO update: sample K clue sets per state, score them, and take the clipped, KL-penalised
policy-gradient step on the LoRA weights.

Stages, each timed: `generate` (one batched sampling call for all states of the step), `score`
(BM25 + checker + reward, one checker batch per group), then `loss` (reference and old log-probs
where needed, then `num_iterations` optimiser updates over micro-batches of whole groups). A
checker that keeps counters adds its per-step `checker/*` metrics (calls, cache hits, latency, ...).

Two exact shortcuts: each state's prompt is encoded once for its K completions (shared prefix, in
sampling and in the loss, with or without gradient checkpointing: see `rollout.group_logprobs`),
and when beta = 0 the groups with zero reward variance are left out of the forward passes (their
advantage is 0, so their gradient is exactly 0; the loss denominators still count them, so the
update is unchanged).

With a `sampler` other than the trainer's own model (`grpo.sampler: server`), the samples carry
the sampler's log-probs, and the loss recomputes the trainer's and weights each token by a
truncated importance ratio (one hook: `sampler_correction.py`).

Under data parallelism (`distributed.py`) this runs on each rank's share of the step's states:
the loss denominators are global, gradients are summed across ranks before clipping, and metrics
are computed from every rank's samples, so N processes take the same step as one.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import torch

from searchgrpo.agents.checker import checker_stats, stats_delta
from searchgrpo.config import Config
from searchgrpo.data.traces import SearchState
from searchgrpo.env.reward import COMPONENTS
from searchgrpo.env.search_round import SearchRoundEnv, StepResult
from searchgrpo.events import DocView, GroupScored, SampleView
from searchgrpo.policy.decoders import packs_prefix
from searchgrpo.policy.logprobs import (
    GroupBatch,
    SequenceBatch,
    group_logprobs,
    make_batch,
    make_group_batch,
    sequence_logprobs,
)
from searchgrpo.policy.model import Policy
from searchgrpo.policy.sampling import Completion, generate
from searchgrpo.train.distributed import Dist
from searchgrpo.train.grpo import LossStats, group_advantages, grpo_loss
from searchgrpo.train.sampler_correction import needs_correction, sampler_correction
from searchgrpo.train.timing import Stopwatch

Batch = Union[GroupBatch, SequenceBatch]


@dataclass
class StepOutcome:
    """What one step produced: global metrics, and this rank's groups for the event stream."""

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
    seeds: Sequence[int],
    dist: Dist | None = None,
    global_states: int | None = None,
    sampler: Any = None,
) -> StepOutcome:
    """Run one GRPO step on this rank's `states` (with encoded `prompts` and sampling `seeds`).

    `global_states` is the number of states of the step over all ranks (default: len(states)).
    `sampler` (searchgrpo/policy/samplers.py) samples instead of `generate` on the policy.
    """
    dist = dist or Dist()
    g, model, tok = cfg.grpo, policy.model, policy.tokenizer
    watch = Stopwatch()
    K = g.num_generations

    with watch.time("generate"):
        if sampler is not None:
            groups = sampler.sample(prompts, num_samples=K, max_new_tokens=g.max_new_tokens,
                                    temperature=g.temperature, top_p=g.top_p, seeds=seeds)
        else:
            groups = generate(
                model, tok, prompts, num_samples=K, max_new_tokens=g.max_new_tokens,
                temperature=g.temperature, top_p=g.top_p, device=policy.device, seeds=seeds, decoder=g.decoder,
            )
    before = checker_stats(env.checker)
    with watch.time("score"):
        results = [env.score_group(s, [c.text for c in group]) for s, group in zip(states, groups)]
    after = checker_stats(env.checker)
    rewards = torch.tensor([[r.reward.total for r in rs] for rs in results], dtype=torch.float64)
    adv, zero_std = group_advantages(rewards, g.scale_rewards, g.advantage_eps)
    if g.scale_rewards == "batch" and dist.enabled:
        adv, zero_std = _batch_scaled(rewards, dist, g.advantage_eps)

    corpus = env.retriever.corpus
    events = [
        group_event(step, epoch, s, grp, rs, adv[i].tolist(), bool(zero_std[i]), corpus, cfg.env.snippet_chars)
        for i, (s, grp, rs) in enumerate(zip(states, groups, results))
    ]

    # Sequences are rows n = g * K + k (state g, sample k). Micro-batches hold whole groups.
    seq_completions = [c.token_ids for grp in groups for c in grp]
    seq_adv = adv.reshape(-1)
    num_sequences = (global_states or len(states)) * K
    num_tokens = int(dist.sum([sum(len(c) for c in seq_completions)])[0])
    active = [i for i in range(len(states)) if g.beta > 0 or not bool(zero_std[i])]
    per_batch = max(1, cfg.train.micro_batch_size // K)

    with watch.time("loss"):
        batches = [
            (rows, _layout(policy, [prompts[i] for i in chunk], [seq_completions[r] for r in rows], K))
            for chunk in (active[j:j + per_batch] for j in range(0, len(active), per_batch))
            for rows in [[i * K + k for i in chunk for k in range(K)]]
        ]
        ref = _frozen_logprobs(policy, batches, g.temperature, reference=True) if g.beta > 0 and active else None
        # Samples from another engine (sampler_correction.py): the trainer's own old log-probs, and
        # truncated importance weights against the sampler's.
        flat = [c for grp in groups for c in grp]
        correct = needs_correction(flat)
        old = _frozen_logprobs(policy, batches, g.temperature, reference=False) \
            if g.num_iterations > 1 or correct else None
        tis = sampler_correction(batches, flat, old, g.tis_cap) if correct and old is not None else None
        totals = _Totals()
        params = policy.trainable_parameters()
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
                    tis_weight=tis.weights[b] if tis is not None else None,
                )
                loss.backward()
                loss_value += float(loss.detach())
                totals.add(stats)
            dist.all_reduce_grads(params)
            loss_value = dist.sum([loss_value])[0]
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.train.max_grad_norm)) if params else 0.0
            if math.isfinite(loss_value) and math.isfinite(grad_norm):
                optimizer.step()
            else:  # never let a NaN or inf reach the adapter
                optimizer.zero_grad(set_to_none=True)
                totals.nonfinite = True
            scheduler.step()
            totals.losses.append(loss_value)
            totals.grad_norms.append(grad_norm)

    parts = _metric_parts(rewards, zero_std, results, groups, prompts, K)
    metrics = _metrics(dist.gather_json(parts), dist.sum(totals.sums()), totals, watch, scheduler, dist)
    if tis is not None:  # every rank has one: the ranks share one sampler kind
        metrics.update(tis.metrics(dist, getattr(sampler, "publish_s", 0.0)))
    if before is not None and after is not None:
        keys = sorted(after)  # counters summed over ranks
        summed = dict(zip(keys, dist.sum([after[k] - before.get(k, 0.0) for k in keys])))
        metrics.update(stats_delta({}, summed))
    return StepOutcome(metrics, events, totals.nonfinite)


def _batch_scaled(rewards: torch.Tensor, dist: Dist, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`scale_rewards: batch` over every rank's rewards: centred by group, scaled by the global std."""
    everything = torch.tensor([r for part in dist.gather_json(rewards.tolist()) for row in part for r in row],
                              dtype=torch.float64)
    std = everything.std() if everything.numel() > 1 else everything.new_zeros(())
    adv, zero_std = group_advantages(rewards, "none")
    return (adv.double() / (std + eps)).float(), zero_std


def _layout(policy: Policy, prompts: list[list[int]], completions: list[list[int]], k: int) -> Batch:
    pad = policy.tokenizer.pad_token_id
    if packs_prefix(policy.model):
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

    def sums(self) -> list[float]:
        return [self.tokens, self.kl_sum, self.clipped_low, self.clipped_high, float(self.nonfinite)]


def _metric_parts(
    rewards: torch.Tensor,
    zero_std: torch.Tensor,
    results: list[list[StepResult]],
    groups: list[list[Completion]],
    prompts: Sequence[list[int]],
    k: int,
) -> dict[str, Any]:
    """This rank's raw per-sample numbers (JSON), from which every rank computes global metrics."""
    flat = [r for rs in results for r in rs]
    completions = [c for grp in groups for c in grp]
    return {
        "rewards": rewards.reshape(-1).tolist(),
        "zero_std": [bool(z) for z in zero_std],
        "completion_tokens": [len(c.token_ids) for c in completions],
        "truncated": [c.truncated for c in completions],
        "clues": [len(r.clues) for r in flat],
        "unparsable": [r.parsed.unparsable for r in flat],
        "docs": [len(r.docs) for r in flat],
        "components": {name: [r.reward.weighted[name] for r in flat] for name in COMPONENTS},
        "prompt_tokens": sum(len(p) for p in prompts) * k,
    }


def _metrics(
    parts: list[dict[str, Any]],
    sums: list[float],
    totals: _Totals,
    watch: Stopwatch,
    scheduler: Any,
    dist: Dist,
) -> dict[str, float]:
    def cat(key: str) -> list[Any]:
        return [x for p in parts for x in p[key]]

    rewards = torch.tensor(cat("rewards"), dtype=torch.float64)
    n = max(len(rewards), 1)
    tokens, kl_sum, clip_low, clip_high, nonfinite = sums
    tokens = max(tokens, 1.0)
    m: dict[str, float] = {
        "reward/mean": float(rewards.mean()),
        "reward/std": float(rewards.std()) if rewards.numel() > 1 else 0.0,
        "reward/min": float(rewards.min()),
        "reward/max": float(rewards.max()),
        "reward/frac_zero_std": sum(cat("zero_std")) / max(len(cat("zero_std")), 1),
        "loss/total": totals.losses[-1] if totals.losses else 0.0,
        "loss/kl": kl_sum / tokens,
        "loss/clip_frac": (clip_low + clip_high) / tokens,
        "loss/clip_low": clip_low / tokens,
        "loss/clip_high": clip_high / tokens,
        "grad/norm": totals.grad_norms[-1] if totals.grad_norms else 0.0,
        "train/lr": float(scheduler.get_last_lr()[0]),
        "train/nonfinite_skipped": float(nonfinite > 0),
        "rollout/completion_tokens": sum(cat("completion_tokens")) / n,
        "rollout/truncated_frac": sum(cat("truncated")) / n,
        "rollout/clues": sum(cat("clues")) / n,
        "rollout/unparsable_frac": sum(cat("unparsable")) / n,
        "rollout/docs": sum(cat("docs")) / n,
        "tokens/prompt": float(sum(p["prompt_tokens"] for p in parts)),
        "tokens/completion": float(sum(cat("completion_tokens"))),
    }
    for name in COMPONENTS:
        m[f"reward/{name}"] = sum(x for p in parts for x in p["components"][name]) / n
    # Wall time is the slowest rank's.
    phases = sorted(watch.totals)
    slowest = dist.gather_json([watch.totals[p] for p in phases])
    for i, name in enumerate(phases):
        m[f"time/{name}"] = max(s[i] for s in slowest)
    m["time/step"] = max(sum(s) for s in slowest)
    return m

"""`step.update` on the tiny model with hand-made groups: what the update trains on and what its
metrics count, where a step's groups differ (stored old log-probs or not, zero variance or not)."""

from __future__ import annotations

import pytest
import torch

from searchgrpo.env.prompts import ParsedClues
from searchgrpo.env.reward import RewardCalculator
from searchgrpo.env.search_round import StepResult
from searchgrpo.policy.logprobs import sampling_logprobs
from searchgrpo.policy.model import Policy, load_policy
from searchgrpo.policy.sampling import Completion
from searchgrpo.train.rollouts import Rollouts, ScoredGroup, zero_variance
from searchgrpo.train.schedule import make_scheduler
from searchgrpo.train.step import update
from tests.helpers.tiny import tiny_config

CALC = RewardCalculator.from_weights({"new_important": 1.0})


def hand_made_groups(policy: Policy, rewards: list[list[float]], seed: int = 0) -> list[ScoredGroup]:
    """One group per row of `rewards`: a random 8-token prompt and K random completions of 3 to 5
    tokens, each sample's reward its entry (the `new_important` component, weight 1)."""
    gen = torch.Generator().manual_seed(seed)
    vocab = policy.model.config.vocab_size

    def tokens(n: int) -> list[int]:
        return torch.randint(10, vocab, (n,), generator=gen).tolist()

    groups = []
    for i, row in enumerate(rewards):
        completions = [Completion(tokens(3 + k % 3), "", False) for k in range(len(row))]
        results = [StepResult((), ParsedClues((), 0, False), (), CALC.combine({"new_important": r})) for r in row]
        groups.append(ScoredGroup((0, i), None, tokens(8), completions, results, zero_variance(row)))  # type: ignore[arg-type]
    return groups


def training(cfg, policy: Policy):
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=cfg.train.lr)
    return optimizer, make_scheduler(cfg, optimizer, total_steps=10)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    cfg = tiny_config(tmp_path_factory.mktemp("update"), "grpo.beta=0", "grpo.epsilon=0.2")
    policy = load_policy(cfg)
    return cfg, policy, [p.detach().clone() for p in policy.trainable_parameters()]


@pytest.fixture
def tiny(loaded):
    """(config, policy), the adapter as loaded (B = 0: the policy is the reference)."""
    cfg, policy, initial = loaded
    with torch.no_grad():
        for p, p0 in zip(policy.trainable_parameters(), initial):
            p.copy_(p0)
    return cfg, policy


def tokens_of(group: ScoredGroup, k: int) -> int:
    return len(group.completions[k].token_ids)


def test_stored_old_logprobs_are_used_per_group(tiny):
    """A step whose groups are partly pipelined (old log-probs kept from sampling) and partly fresh:
    the stored ones stay in use (group A's ratio is exp(0.5) on every token, so its positive-advantage
    sample is clipped), and the fresh group's ratio is 1 (nothing clipped)."""
    cfg, policy = tiny
    a, b = hand_made_groups(policy, [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    now = sampling_logprobs(policy, a.prompt, [c.token_ids for c in a.completions], cfg.grpo.temperature)
    a.old_logp = now - 0.5
    optimizer, scheduler = training(cfg, policy)
    outcome = update(cfg, policy, optimizer, scheduler, Rollouts([a, b], [a, b], target=2))
    total = sum(tokens_of(g, k) for g in (a, b) for k in range(3))
    m = outcome.metrics
    assert m["loss/clip_high"] == pytest.approx(tokens_of(a, 0) / total)  # A's sample 0: advantage > 0
    assert m["loss/clip_low"] == 0.0  # ratio 1.65 never falls under 0.8


def test_clip_fractions_count_every_token_of_the_batch(tiny):
    """At beta 0 a zero-variance group never enters the forward pass, but its tokens count in the
    clip fractions, as in TRL's `clip_ratio/*` (every completion token of the batch); no KL is
    measured, so none is reported (TRL logs `kl` only when beta != 0)."""
    cfg, policy = tiny
    a, flat = hand_made_groups(policy, [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5]])
    assert flat.zero_std and not a.zero_std
    now = sampling_logprobs(policy, a.prompt, [c.token_ids for c in a.completions], cfg.grpo.temperature)
    a.old_logp = now - 0.5
    optimizer, scheduler = training(cfg, policy)
    m = update(cfg, policy, optimizer, scheduler, Rollouts([a, flat], [a, flat], target=2)).metrics
    total = sum(tokens_of(g, k) for g in (a, flat) for k in range(3))
    assert m["loss/clip_high"] == pytest.approx(tokens_of(a, 0) / total)
    assert m["loss/clip_frac"] == pytest.approx(tokens_of(a, 0) / total)
    assert "loss/kl" not in m and "loss/kl_penalty" not in m


def test_kl_is_trls_k3_and_the_penalty_is_the_configured_estimator(tiny):
    """`loss/kl` (TRL's `kl`) is the token mean of k3 = exp(ref - logp) - (ref - logp) - 1 whatever
    the estimator; `loss/kl_penalty` is the token mean of what beta multiplies (`sq`: (ref - logp)^2,
    about twice the KL)."""
    cfg, policy = tiny
    cfg = cfg.replace(**{"grpo.beta": 0.1, "grpo.kl_estimator": "sq"})
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # move the adapter off the reference
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    groups = hand_made_groups(policy, [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5]])
    k3, sq, tokens = 0.0, 0.0, 0
    for g in groups:
        ids = [c.token_ids for c in g.completions]
        logp = sampling_logprobs(policy, g.prompt, ids, cfg.grpo.temperature).double()
        with policy.reference_mode():
            ref = sampling_logprobs(policy, g.prompt, ids, cfg.grpo.temperature).double()
        for k, c in enumerate(ids):
            d = ref[k, : len(c)] - logp[k, : len(c)]
            k3 += float((d.exp() - d - 1).sum())
            sq += float((d * d).sum())
            tokens += len(c)
    optimizer, scheduler = training(cfg, policy)
    m = update(cfg, policy, optimizer, scheduler, Rollouts(groups, groups, target=2)).metrics
    assert k3 > 0
    assert m["loss/kl"] == pytest.approx(k3 / tokens, rel=1e-4)
    assert m["loss/kl_penalty"] == pytest.approx(sq / tokens, rel=1e-4)
    assert m["loss/kl_penalty"] == pytest.approx(2 * m["loss/kl"], rel=0.2)  # small d: d^2 ~ 2 k3


def test_the_learning_rate_reported_is_the_one_the_update_used(tiny):
    """TRL (on transformers 5's Trainer) logs `learning_rate` as read before the scheduler steps:
    the rate the update ran at. Warm-up over 2 updates: the first runs at 0, the second at half."""
    cfg, policy = tiny
    cfg = cfg.replace(**{"train.warmup_steps": 2})
    optimizer, scheduler = training(cfg, policy)
    seen = []
    for seed in (0, 1):
        groups = hand_made_groups(policy, [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], seed=seed)
        seen.append(update(cfg, policy, optimizer, scheduler, Rollouts(groups, groups, target=2)).metrics["train/lr"])
    assert seen == [0.0, pytest.approx(cfg.train.lr / 2)]

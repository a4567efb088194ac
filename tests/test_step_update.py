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
from tests.conftest import tiny_config

pytestmark = pytest.mark.slow  # loads and trains the tiny model: the full tier

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
def tiny(tmp_path_factory):
    cfg = tiny_config(tmp_path_factory.mktemp("update"), "grpo.beta=0", "grpo.epsilon=0.2")
    return cfg, load_policy(cfg)


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

"""GRPO maths against hand-computed values."""

import math

import pytest
import torch

from searchgrpo.policy.logprobs import selective_log_softmax
from searchgrpo.train.grpo import (
    aggregate,
    clipped_surrogate,
    group_advantages,
    grpo_loss,
    kl_per_token,
    truncated_importance_weights,
)


def close(actual: torch.Tensor, expected: list) -> bool:
    return torch.allclose(actual.double(), torch.tensor(expected, dtype=torch.float64), atol=1e-6)


def test_group_advantages_by_hand():
    # Group [1, 2, 3]: mean 2, unbiased std 1 -> (-1, 0, 1) / (1 + eps).
    adv, zero = group_advantages(torch.tensor([[1.0, 2.0, 3.0]]), "group", eps=0.0)
    assert close(adv, [[-1.0, 0.0, 1.0]])
    assert zero.tolist() == [False]
    # Group [0, 1]: mean 0.5, unbiased std sqrt(0.5) = 0.7071 -> +-0.7071.
    adv, _ = group_advantages(torch.tensor([[0.0, 1.0]]), "group", eps=0.0)
    assert close(adv, [[-math.sqrt(0.5), math.sqrt(0.5)]])


def test_group_advantages_eps_in_denominator():
    adv, _ = group_advantages(torch.tensor([[1.0, 2.0, 3.0]]), "group", eps=1.0)
    assert close(adv, [[-0.5, 0.0, 0.5]])


def test_zero_variance_group_gives_zero_not_nan():
    rewards = torch.tensor([[0.1, 0.1, 0.1], [0.0, 1.0, 2.0]])
    for scale in ("group", "batch", "none"):
        adv, zero = group_advantages(rewards, scale, eps=0.0)
        assert not torch.isnan(adv).any()
        assert adv[0].tolist() == [0.0, 0.0, 0.0]
        assert zero.tolist() == [True, False]


def test_batch_and_none_scaling():
    rewards = torch.tensor([[0.0, 2.0], [4.0, 6.0]])
    # Batch std of [0, 2, 4, 6] (unbiased) = sqrt(20/3) = 2.5820; centred by group mean: -1, 1, -1, 1.
    adv, _ = group_advantages(rewards, "batch", eps=0.0)
    s = math.sqrt(20 / 3)
    assert close(adv, [[-1 / s, 1 / s], [-1 / s, 1 / s]])
    adv, _ = group_advantages(rewards, "none")
    assert close(adv, [[-1.0, 1.0], [-1.0, 1.0]])


def test_group_advantages_rejects_singleton_groups():
    with pytest.raises(ValueError):
        group_advantages(torch.tensor([[1.0]]))


def test_kl_estimators_by_hand():
    logp = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-1.5, -2.0])
    # d = ref - logp = (-0.5, 0)
    assert kl_per_token(logp, ref, "sq").tolist() == pytest.approx([0.25, 0.0])
    assert kl_per_token(logp, ref, "k3").tolist() == pytest.approx([math.exp(-0.5) + 0.5 - 1, 0.0])
    assert (kl_per_token(logp, ref, "k3") >= 0).all()


def test_clipped_surrogate_by_hand():
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1, 0.7]]))  # ratios 1.5, 0.5, 1.1, 0.7
    pos = clipped_surrogate(logp, old, torch.tensor([1.0]), eps_low=0.2, eps_high=0.2)
    # Positive advantage: -min(r, clip(r)) -> -1.2 (clipped), -0.5, -1.1, -0.7
    assert close(pos.loss, [[-1.2, -0.5, -1.1, -0.7]])
    assert pos.clipped_high.tolist() == [[True, False, False, False]]
    assert not pos.clipped_low.any()
    neg = clipped_surrogate(logp, old, torch.tensor([-1.0]), eps_low=0.2, eps_high=0.2)
    # Negative advantage: -min(-r, -clip(r)) = max(r, clip(r)) -> 1.5, 0.8 (clipped), 1.1, 0.8 (clipped)
    assert close(neg.loss, [[1.5, 0.8, 1.1, 0.8]])
    assert neg.clipped_low.tolist() == [[False, True, False, True]]


def test_clip_higher_uses_its_own_bound():
    old = torch.zeros(1, 1)
    logp = torch.log(torch.tensor([[1.25]]))
    s = clipped_surrogate(logp, old, torch.tensor([1.0]), eps_low=0.2, eps_high=0.28)
    assert s.loss.item() == pytest.approx(-1.25)  # inside 1 + 0.28
    assert not s.clipped_high.any()


def test_aggregation_modes_by_hand():
    per_token = torch.tensor([[1.0, 3.0, 0.0], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    # grpo: mean per sequence (2, 2) then over sequences -> 2
    assert aggregate(per_token, mask, "grpo", num_sequences=2, num_tokens=3, max_new_tokens=4).item() == pytest.approx(
        2.0
    )
    # dapo: sum 6 / 3 tokens -> 2; dr_grpo: 6 / (2 * 4) = 0.75
    assert aggregate(per_token, mask, "dapo", num_sequences=2, num_tokens=3, max_new_tokens=4).item() == pytest.approx(
        2.0
    )
    assert aggregate(
        per_token, mask, "dr_grpo", num_sequences=2, num_tokens=3, max_new_tokens=4
    ).item() == pytest.approx(0.75)


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
def test_micro_batches_sum_to_the_full_batch(loss_type):
    torch.manual_seed(0)
    per_token = torch.rand(4, 5)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]])
    kw = dict(num_sequences=4, num_tokens=int(mask.sum()), max_new_tokens=5)
    whole = aggregate(per_token, mask, loss_type, **kw)
    parts = aggregate(per_token[:1], mask[:1], loss_type, **kw) + aggregate(per_token[1:], mask[1:], loss_type, **kw)
    assert parts.item() == pytest.approx(whole.item())


def test_grpo_loss_at_ratio_one_is_minus_mean_advantage_plus_kl():
    logp = torch.tensor([[-1.0, -1.0], [-2.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -1.0], [-2.0, -2.0]])
    adv = torch.tensor([1.0, -1.0])
    mask = torch.ones(2, 2)
    loss, stats = grpo_loss(
        logp,
        logp.detach(),
        ref,
        adv,
        mask,
        eps_low=0.2,
        eps_high=0.2,
        beta=0.1,
        kl_estimator="sq",
        loss_type="grpo",
        num_sequences=2,
        num_tokens=4,
        max_new_tokens=2,
    )
    # pg: seq1 -1, seq2 +1 -> mean 0; kl: seq1 tokens (0.25, 0) -> 0.125 mean, seq2 0 -> mean over seqs 0.0625
    assert loss.item() == pytest.approx(0.1 * 0.0625)
    # The penalty is the sq estimator's d^2 = 0.25; the KL reported is k3's exp(d) - d - 1 (d = -0.5).
    assert float(stats.tokens) == 4 and float(stats.penalty_sum) == pytest.approx(0.25)
    assert float(stats.kl_sum) == pytest.approx(math.exp(-0.5) + 0.5 - 1)
    loss.backward()
    # Gradient descent raises log-probs of the positive-advantage sequence.
    assert (logp.grad[0] < 0).all() and (logp.grad[1] > 0).all()


def test_truncated_importance_weights_by_hand():
    trainer = torch.tensor([[-1.0, -2.0, -0.5]])
    sampler = torch.tensor([[-1.0, -1.0, -2.0]])
    # ratios: exp(0) = 1, exp(-1) = 0.3679, exp(1.5) = 4.4817 -> capped at 2
    weights, clipped = truncated_importance_weights(trainer, sampler, 2.0)
    assert close(weights, [[1.0, math.exp(-1.0), 2.0]])
    assert clipped.tolist() == [[False, False, True]]


def test_grpo_loss_weights_the_policy_gradient_term_only():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -2.0]])
    weight = torch.tensor([[0.5, 2.0]])
    kw = dict(
        eps_low=0.2,
        eps_high=0.2,
        beta=0.1,
        kl_estimator="sq",
        loss_type="grpo",
        num_sequences=1,
        num_tokens=2,
        max_new_tokens=2,
    )
    loss, _ = grpo_loss(logp, logp.detach(), ref, torch.tensor([1.0]), torch.ones(1, 2), tis_weight=weight, **kw)
    # ratio 1: pg per token -adv = -1, weighted -0.5 and -2 -> mean -1.25; kl (0.25, 0) -> mean 0.125
    assert loss.item() == pytest.approx(-1.25 + 0.1 * 0.125)
    loss.backward()
    # d pg / d logp_t = -w_t * adv / 2 (ratio 1); d kl / d logp_0 = -2 (ref - logp) * 0.1 / 2 = +0.05
    assert close(logp.grad, [[-0.25 + 0.05, -1.0]])


def test_grpo_loss_needs_reference_when_beta_positive():
    x = torch.zeros(1, 1)
    with pytest.raises(ValueError):
        grpo_loss(
            x,
            x,
            None,
            torch.zeros(1),
            torch.ones(1, 1),
            eps_low=0.2,
            eps_high=0.2,
            beta=0.1,
            kl_estimator="sq",
            loss_type="grpo",
            num_sequences=1,
            num_tokens=1,
            max_new_tokens=1,
        )


def test_selective_log_softmax_matches_log_softmax():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 11)
    tokens = torch.randint(0, 11, (2, 3))
    expected = torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(selective_log_softmax(logits, tokens), expected, atol=1e-6)


@pytest.mark.parametrize(
    "rewards",
    [
        [0.0] * 7 + [2e-6],  # spread 2e-6 (above the tolerance), std 7.1e-7 (below it)
        [0.0, 0.0, 0.0, 0.0],
        [0.5, 0.5 + 5e-7, 0.5, 0.5],
        [0.0, 1e-3, 0.0],
        [0.0] * 15 + [3.9e-6],
    ],
)
def test_dynamic_sampling_and_the_advantages_share_one_zero_variance_test(rewards):
    """A group that dynamic sampling keeps as informative must not get all-zero advantages, and the
    other way round: both ask `grpo.zero_std_groups`."""
    from searchgrpo.train.rollouts import zero_variance

    adv, zero_std = group_advantages(torch.tensor([rewards], dtype=torch.float64))
    assert zero_variance(rewards) == bool(zero_std[0])
    assert bool(zero_std[0]) == bool((adv == 0).all())

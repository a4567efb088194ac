"""The rollout tests that train, start a server or run a subprocess (the integration tier);
the quick ones are in `tests/unit/policy/test_rollout.py`."""

import pytest
import torch

from searchgrpo.policy.decoders import (
    packs_prefix,
)
from searchgrpo.policy.logprobs import (
    group_logprobs,
    make_batch,
    make_group_batch,
    sequence_logprobs,
)
from tests.unit.policy.test_rollout import _policy, _prompts  # helpers of the quick tier


@pytest.mark.parametrize(
    "overrides",
    [(), ("model.gradient_checkpointing=true",), ("model.attn_implementation=eager",)],
    ids=["sdpa", "checkpointing", "eager"],
)
def test_shared_prefix_logprobs_and_gradients_equal_plain(overrides):
    policy = _policy(*overrides)
    tok, model = policy.tokenizer, policy.model
    prompts, k = _prompts(tok), 3
    comps = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14], [15], [16, 17, 18, 19, 20, 21], [22, 23]]
    plain = make_batch([prompts[i // k] for i in range(6)], comps, tok.pad_token_id, "cpu")
    shared = make_group_batch(prompts, comps, k, tok.pad_token_id, "cpu")
    assert packs_prefix(model)
    model.train()
    grads = []
    values = []
    for fn, batch in ((sequence_logprobs, plain), (group_logprobs, shared)):
        model.zero_grad()
        logp = fn(model, batch, 0.7)
        (logp * batch.completion_mask).sum().backward()
        values.append(logp[batch.completion_mask.bool()])
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
    assert torch.allclose(values[0], values[1], atol=1e-5)
    for name in grads[0]:
        assert torch.allclose(grads[0][name], grads[1][name], atol=1e-5), name
    assert torch.equal(plain.completion_mask, shared.completion_mask)

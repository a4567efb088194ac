"""The server sampler (`grpo.sampler: server`): llama.cpp serving SmolLM2 with the current adapter,
and the trainer's truncated importance-sampling correction."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from searchgrpo.config import load_config
from searchgrpo.errors import UserError
from searchgrpo.policy.gguf_lora import gguf_name, permute_rows
from searchgrpo.policy.samplers import LocalSampler, make_sampler
from searchgrpo.policy.sampling import Completion
from searchgrpo.policy.server_sampler import aligned_logprobs
from searchgrpo.train.distributed import Dist
from searchgrpo.train.sampler_correction import needs_correction, sampler_correction


def test_aligned_logprobs_fill_what_llama_cpp_leaves_out():
    probs = [{"id": 5, "logprob": -1.0, "prob": 0.5}, {"id": 7, "logprob": -2.0, "prob": 0.25}]
    got = aligned_logprobs([5, 6, 7], probs, post=False)
    assert got[0] == -1.0 and math.isnan(got[1]) and got[2] == -2.0
    assert aligned_logprobs([5, 7], probs, post=True) == [math.log(0.5), math.log(0.25)]
    with pytest.raises(RuntimeError):
        aligned_logprobs([5, 6], probs, post=False)  # an entry that follows no token


def test_sampler_correction_by_hand():
    completions = [Completion([1, 2], "", False, (-1.0, -2.0)), Completion([3, 4, 5], "", True, (-1.0, math.nan, -3.0))]
    batch = SimpleNamespace(completion_mask=torch.tensor([[1, 1, 0], [1, 1, 1]]))
    trainer = torch.tensor([[-1.0, -1.0, -9.0], [-2.0, -2.0, -1.0]])
    assert needs_correction(completions) and not needs_correction([Completion([1], "", False)])
    out = sampler_correction([([0, 1], batch)], completions, [trainer], cap=2.0)
    # ratios exp(trainer - sampler): 1, e (capped at 2), _, exp(-1), 1 (no sampler log-prob), exp(2) (capped)
    expected = torch.tensor([[1.0, 2.0, 1.0], [math.exp(-1.0), 1.0, 2.0]])
    mask = batch.completion_mask.bool()
    assert torch.allclose(out.weights[0][mask], expected[mask])
    # 4 tokens with a sampler log-prob; sampler - trainer: 0, -1, 1, -2
    assert out.sums == pytest.approx([4.0, -2.0, 4.0, 2.0])
    metrics = out.metrics(Dist(), publish_s=1.5)
    assert metrics == pytest.approx(
        {"sampler/kl": -0.5, "sampler/abs_logp_diff": 1.0, "sampler/tis_clipped_frac": 0.5, "sampler/publish_s": 1.5}
    )


def test_more_prompts_than_slots_go_in_turns():
    from searchgrpo.policy.server_sampler import ServerSampler

    sampler = ServerSampler.__new__(ServerSampler)  # no server: publish and the requests are stubbed
    sampler.parallel, calls = 4, []
    sampler.publish = lambda: None
    sampler._group = lambda prompt, k, *rest: calls.append(prompt) or [Completion(prompt, "", False, (0.0,))] * k
    out = sampler.sample(
        [[1], [2], [3], [4], [5]], num_samples=2, max_new_tokens=4, temperature=1.0, top_p=1.0, seeds=[0, 1, 2, 3, 4]
    )
    assert [g[0].token_ids for g in out] == [[1], [2], [3], [4], [5]] and all(len(g) == 2 for g in out)
    assert sorted(map(tuple, calls)) == [(1,), (2,), (3,), (4,), (5,)]


def test_permute_rows_interleaves_rotary_halves_per_head():
    rows = np.arange(8).reshape(8, 1)  # 2 heads of dimension 4: halves (0, 1 | 2, 3)
    assert permute_rows(rows, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_gguf_names():
    assert gguf_name("base_model.model.model.layers.3.self_attn.q_proj") == "blk.3.attn_q.weight"
    assert gguf_name("base_model.model.model.layers.12.mlp.down_proj") == "blk.12.ffn_down.weight"
    with pytest.raises(ValueError):
        gguf_name("base_model.model.lm_head")


def test_sampler_choice(tiny_cfg):
    assert isinstance(make_sampler(tiny_cfg, SimpleNamespace()), LocalSampler)
    cfg = load_config(None, ["model.base=tiny", "grpo.sampler=server"])
    with pytest.raises(UserError, match="GGUF"):
        make_sampler(cfg, SimpleNamespace())

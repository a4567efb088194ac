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


# --------------------------------------------------------------------------- SmolLM2 end to end


def _smollm2(*overrides):
    return load_config(
        None,
        [
            "model.base=embedded:smollm2",
            "model.device=cpu",
            "train.states_per_step=1",
            "grpo.num_generations=2",
            "grpo.max_new_tokens=12",
            "grpo.max_prompt_tokens=256",
            "data.demo.questions=12",
            "data.demo.distractors=20",
            "data.max_table_rows=2",
            *overrides,
        ],
    )


@pytest.mark.slow
def test_server_samples_from_the_trainers_policy():
    """The adapter reaches the server intact: the server's log-probs of its samples are close to
    the trainer's (the difference is the Q4_1 kernels) and far from the base model's."""
    from searchgrpo.policy.logprobs import make_batch, sequence_logprobs
    from searchgrpo.policy.model import load_policy
    from searchgrpo.policy.server_sampler import ServerSampler

    cfg = _smollm2()
    policy = load_policy(cfg)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    prompt = policy.tokenizer.apply_chat_template(
        [{"role": "user", "content": "List three search queries about the history of Lisbon."}],
        add_generation_prompt=True,
        tokenize=True,
    )
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    sampler = ServerSampler.for_config(cfg, policy)
    try:
        groups = sampler.sample([prompt], num_samples=2, max_new_tokens=12, temperature=1.0, top_p=1.0, seeds=[3])
        first = sampler.published
        assert sampler.publish_s > 0
        samples = groups[0]
        assert len(samples) == 2 and all(len(c.sampler_logprobs) == len(c.token_ids) > 0 for c in samples)
        batch = make_batch([prompt] * 2, [c.token_ids for c in samples], policy.tokenizer.pad_token_id, "cpu")
        policy.model.eval()
        with torch.no_grad():
            trainer = sequence_logprobs(policy.model, batch, 1.0)
            with policy.reference_mode():
                base = sequence_logprobs(policy.model, batch, 1.0)
        server = torch.zeros_like(trainer)
        for i, c in enumerate(samples):
            server[i, : len(c.token_ids)] = torch.tensor(c.sampler_logprobs)
        known = batch.completion_mask.bool() & torch.isfinite(server)
        to_trainer = float((server - trainer)[known].abs().mean())
        to_base = float((server - base)[known].abs().mean())
        assert to_trainer < 0.25 and to_trainer < 0.5 * to_base, (to_trainer, to_base)
        # A changed adapter is published again; an unchanged one is not.
        sampler.sample([prompt], num_samples=2, max_new_tokens=4, temperature=1.0, top_p=1.0, seeds=[3])
        assert sampler.published == first and sampler.publish_s == 0.0
        with torch.no_grad():
            next(p for n, p in policy.model.named_parameters() if "lora_B" in n).add_(0.01)
        sampler.sample([prompt], num_samples=2, max_new_tokens=4, temperature=1.0, top_p=1.0, seeds=[3])
        assert sampler.published != first and sampler.publish_s > 0
    finally:
        sampler.close()


@pytest.mark.slow
def test_training_with_the_server_sampler(tmp_path):
    from searchgrpo.events import StepFinished
    from searchgrpo.train.trainer import Trainer

    # beta > 0: every group enters the loss (with beta 0 a zero-variance group would be skipped).
    cfg = _smollm2(
        "grpo.sampler=server",
        "grpo.beta=0.04",
        "train.max_steps=2",
        "train.lr=1e-3",
        f"train.output_dir={tmp_path / 'runs'}",
        "train.eval_every=0",
        "train.save_every=0",
    )
    events = []
    Trainer(cfg, sink=events.append).train()
    steps = [e.metrics for e in events if isinstance(e, StepFinished)]
    assert len(steps) == 2
    for m in steps:
        assert math.isfinite(m["loss/total"]) and abs(m["sampler/kl"]) < 0.3 and 0 < m["sampler/abs_logp_diff"] < 0.5
        assert 0.0 <= m["sampler/tis_clipped_frac"] <= 1.0
    assert steps[0]["sampler/publish_s"] > 0 and steps[1]["sampler/publish_s"] > 0  # the update reached the server

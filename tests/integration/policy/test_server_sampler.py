"""The server sampler tests that train, start a server or run a subprocess (the integration tier),
on the tiny random-weight GGUF (tests/helpers/tiny_gguf.py) as the policy's base; the quick ones
are in `tests/unit/policy/test_server_sampler.py`."""

import math

import torch

from searchgrpo.config import load_config


def _gguf_policy(gguf, *overrides):
    return load_config(
        None,
        [
            f"model.base={gguf}",
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


def test_server_samples_from_the_trainers_policy(tiny_gguf):
    """The adapter reaches the server intact: the server's log-probs of its samples are close to
    the trainer's (the difference is llama.cpp's float32 kernels) and far from the base model's."""
    from searchgrpo.policy.logprobs import make_batch, sequence_logprobs
    from searchgrpo.policy.model import load_policy
    from searchgrpo.policy.server_sampler import ServerSampler

    cfg = _gguf_policy(tiny_gguf)
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
        assert to_trainer < 0.05 and to_trainer < 0.1 * to_base, (to_trainer, to_base)
        # A changed adapter is published again; an unchanged one is not.
        sampler.sample([prompt], num_samples=2, max_new_tokens=4, temperature=1.0, top_p=1.0, seeds=[3])
        assert sampler.published == first and sampler.publish_s == 0.0
        with torch.no_grad():
            next(p for n, p in policy.model.named_parameters() if "lora_B" in n).add_(0.01)
        sampler.sample([prompt], num_samples=2, max_new_tokens=4, temperature=1.0, top_p=1.0, seeds=[3])
        assert sampler.published != first and sampler.publish_s > 0
    finally:
        sampler.close()


def test_training_with_the_server_sampler(tmp_path, tiny_gguf):
    from searchgrpo.events import StepFinished
    from searchgrpo.train.trainer import Trainer

    # beta > 0: every group enters the loss (with beta 0 a zero-variance group would be skipped).
    cfg = _gguf_policy(
        tiny_gguf,
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
    # The update reached the server, and a step's publishing counts in that step even when dynamic
    # sampling drew a second round that found the adapter published (step 1 here: it read 0 before).
    assert steps[0]["sampler/publish_s"] > 0 and steps[1]["sampler/publish_s"] > 0

"""Sampling and log-probs on the tiny model: the shared-prefix path equals the plain one."""

import pytest
import torch

from searchgrpo.config import load_config
from searchgrpo.policy.decoders import DynamicDecoder, resolve_decoder
from searchgrpo.policy.fused_layout import fused_layout
from searchgrpo.policy.logprobs import (
    shared_prefix_mask,
)
from searchgrpo.policy.model import load_policy
from searchgrpo.policy.replayed_decoders import DecodeShortcuts, FusedDecoder, StaticDecoder
from searchgrpo.policy.sampling import draw, generate, left_pad, next_tokens
from tests.helpers.tiny import TINY_MODEL


def _policy(*overrides):
    p = load_policy(load_config(None, [*TINY_MODEL, *overrides]))
    with torch.no_grad():  # a non-zero adapter, so that gradients reach both LoRA matrices
        for name, param in p.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    return p


@pytest.fixture(scope="module")
def policy():
    return _policy()


def _prompts(tok):
    return [
        tok("Question: who founded Krallo Systems and where was the founder born?").input_ids,
        tok("Entities: none").input_ids,
    ]


def test_shared_prefix_mask_keeps_completions_apart():
    prompt_mask = torch.tensor([[0, 1, 1]])
    completion_mask = torch.tensor([[1, 1], [1, 0]])
    mask = shared_prefix_mask(prompt_mask, completion_mask, 2)[0, 0]
    # columns: pad, p1, p2, c1a, c1b, c2a, c2b(pad)
    assert mask[3].tolist() == [False, True, True, True, False, False, False]
    assert mask[4].tolist() == [False, True, True, True, True, False, False]
    assert mask[5].tolist() == [False, True, True, False, False, True, False]
    assert mask[2].tolist() == [False, True, True, False, False, False, False]
    assert mask[0, 0] and mask[6, 6]  # padding sees itself only, so no row is empty


def test_greedy_generate_matches_transformers(policy):
    tok, model = policy.tokenizer, policy.model
    prompts = _prompts(tok)
    ours = generate(model, tok, prompts, num_samples=1, max_new_tokens=10, greedy=True)
    ids, mask = left_pad(prompts, tok.pad_token_id, "cpu")
    model.eval()
    ref = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=10,
        do_sample=False,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    for i, group in enumerate(ours):
        expected = ref[i, ids.shape[1] :].tolist()
        assert group[0].token_ids == expected[: len(group[0].token_ids)]


def test_sampling_is_seeded_and_stops_after_eos(policy):
    tok, model = policy.tokenizer, policy.model
    torch.manual_seed(1)
    a = generate(model, tok, _prompts(tok), num_samples=3, max_new_tokens=8, temperature=1.0, top_p=0.9)
    torch.manual_seed(1)
    b = generate(model, tok, _prompts(tok), num_samples=3, max_new_tokens=8, temperature=1.0, top_p=0.9)
    assert [[c.token_ids for c in g] for g in a] == [[c.token_ids for c in g] for g in b]
    assert len(a) == 2 and all(len(g) == 3 for g in a)
    for c in (c for g in a for c in g):
        assert tok.eos_token_id not in c.token_ids[:-1]
        assert c.truncated == (tok.eos_token_id not in c.token_ids)


def test_top_p_keeps_the_nucleus():
    torch.manual_seed(0)
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    picks = {int(next_tokens(logits, temperature=1.0, top_p=0.5, greedy=False)) for _ in range(50)}
    assert picks == {0}
    picks = {int(next_tokens(logits, temperature=1.0, top_p=0.85, greedy=False)) for _ in range(200)}
    assert picks == {0, 1}
    assert int(next_tokens(logits, temperature=1.0, top_p=1.0, greedy=True)) == 0


DECODE_K = 2  # samples per prompt in the decoder comparisons


def _assert_decoders_agree(model, prompts, pad_id, make_reference, make_candidate, token_range):
    """Prefill `prompts` (left-padded) once for each decoder, hand each its own cache, then feed
    both the same 7 random tokens per row: the next-token logits must agree within 1e-4."""
    ids, mask = left_pad(prompts, pad_id, "cpu")
    model.eval()
    try:
        with torch.no_grad():
            decoders = []
            for make in (make_reference, make_candidate):
                out = model(
                    input_ids=ids,
                    attention_mask=mask,
                    position_ids=(mask.cumsum(1) - 1).clamp(min=0),
                    use_cache=True,
                    logits_to_keep=1,
                )
                decoders.append(make(getattr(out, "cache", None) or out.past_key_values, mask))
            generator = torch.Generator().manual_seed(0)
            for _ in range(7):
                token = torch.randint(*token_range, (len(prompts) * DECODE_K,), generator=generator)
                reference, candidate = decoders[0](token), decoders[1](token)
                assert torch.allclose(reference, candidate, atol=1e-4), (reference - candidate).abs().max()
    finally:
        model.train()


def test_static_decoder_matches_dynamic(policy):
    """The static cache with grouped decode attention computes the same logits as the dynamic cache."""
    tok, model = policy.tokenizer, policy.model
    _assert_decoders_agree(
        model,
        _prompts(tok),
        tok.pad_token_id,
        lambda cache, mask: DynamicDecoder(model, cache, mask, DECODE_K),
        lambda cache, mask: StaticDecoder(model, cache, mask, DECODE_K, 8, graph=False),
        token_range=(0, len(tok)),
    )


def test_generate_decoders_agree(policy):
    tok, model = policy.tokenizer, policy.model
    runs = [
        generate(model, tok, _prompts(tok), num_samples=3, max_new_tokens=12, seeds=[4, 5], decoder=d)
        for d in ("dynamic", "static", "graph", "fused")
    ]  # graph falls back to static off CUDA
    tokens = [[[c.token_ids for c in g] for g in run] for run in runs]
    assert tokens[0] == tokens[1] == tokens[2] == tokens[3]
    assert resolve_decoder(model, "auto", "cpu") == "dynamic"
    assert resolve_decoder(model, "graph", "cpu") == "static"


@pytest.mark.gpu
@pytest.mark.parametrize("decoder", ["graph", "fused"])
def test_graph_decoders_hold_no_gpu_memory_between_calls(decoder):
    """A captured decode leaves nothing behind: each sampling call used to keep a cuBLAS
    workspace (32 MiB on Hopper) for a stream of its own, forever."""
    p = _policy("model.device=cuda")
    tok, model = p.tokenizer, p.model

    def sample():
        generate(
            model, tok, _prompts(tok), num_samples=3, max_new_tokens=6, seeds=[4, 5], decoder=decoder, device="cuda"
        )
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated()

    sample()
    held = [sample() for _ in range(4)]
    assert held == [held[0]] * 4


def test_draw_follows_the_distribution_and_skips_zeros():
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2]]).repeat(20000, 1)
    picks = draw(probs, torch.Generator().manual_seed(0))
    counts = torch.bincount(picks, minlength=5).double() / len(picks)
    assert counts[0] == 0 and counts[2] == 0
    assert torch.allclose(counts, probs[0].double(), atol=0.015)
    again = draw(probs, torch.Generator().manual_seed(0))
    assert torch.equal(picks, again)


def test_decode_shortcuts_compute_the_same_function(policy):
    model = policy.model
    model.eval()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    with torch.no_grad():
        full = model(input_ids=ids).logits
        shortcuts = DecodeShortcuts(model, torch.float32)
        with shortcuts.applied():
            lean = model(input_ids=ids).logits
        again = model(input_ids=ids).logits
    kinds = {type(m).__name__ for m in shortcuts.forwards}
    assert "Linear" in kinds and "LlamaRMSNorm" in kinds
    assert torch.allclose(full, lean, atol=1e-5)
    assert torch.equal(full, again)  # the module's own forwards are back
    model.train()


def _lora_model(config):
    """A tiny random model of `config` with a non-zero LoRA adapter on every linear layer."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa")
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    return model.eval()


def _qwen3():
    from transformers import Qwen3Config

    return _lora_model(
        Qwen3Config(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            pad_token_id=0,
        )
    )


def _qwen2():
    from transformers import Qwen2Config

    return _lora_model(
        Qwen2Config(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            pad_token_id=0,
        )
    )


@pytest.mark.parametrize(
    "share_prefix,chunk", [(True, 0), (True, 16), (False, 0)], ids=["shared", "shared-split", "per-row"]
)
@pytest.mark.parametrize("family", ["llama", "qwen3", "qwen2"])
def test_fused_decoder_matches_the_module_forward(policy, family, share_prefix, chunk):
    """FusedDecoder (q/k/v and LoRA A fused, residuals in addmm, one SDPA per layer or attention
    split into chunks of the cache, a prompt's keys and values shared by its samples or copied
    per row) computes the same logits as the model's own modules on a static cache: float32,
    tolerance 1e-4 on logits of size ~1 (the difference is rounding: ~3e-7 seen)."""
    model = {"llama": lambda: policy.model, "qwen3": _qwen3, "qwen2": _qwen2}[family]()
    assert fused_layout(model) is not None
    made = []

    def fused(cache, mask):
        made.append(FusedDecoder(model, cache, mask, DECODE_K, 8, graph=False, share_prefix=share_prefix, chunk=chunk))
        return made[-1]

    _assert_decoders_agree(
        model,
        [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14]],
        0,  # unequal lengths: the padding mask matters
        lambda cache, mask: StaticDecoder(model, cache, mask, DECODE_K, 8, graph=False, shortcuts=False),
        fused,
        token_range=(1, 200),
    )
    # Shared: one cache row per prompt, holding the prompt once and a segment of 8 slots per sample.
    rows, width = (2, 7 + DECODE_K * 8) if share_prefix else (2 * DECODE_K, 7 + 8)
    assert made[0].keys[0].shape[0] == rows and made[0].keys[0].shape[2] == -(-width // 16) * 16
    if chunk:  # 23 slots in 2 chunks of 16: the second chunk is padding or unwritten slots at first
        assert made[0].chunks.bias.shape[1] == 2 * model.config.num_key_value_heads


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_fused_decoder_on_cuda_compiled_and_replayed(family):
    """The CUDA path: compiled element-wise kernels, attention split into chunks (memory-efficient
    attention with its log-sum-exp), the step replayed as a CUDA graph; float32."""
    model = {"llama": lambda: _policy("model.device=cuda", "model.dtype=float32").model, "qwen3": _qwen3}[family]()
    model = model.cuda()
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14]]
    ids, mask = left_pad(prompts, 0, "cuda")
    model.eval()
    decoders = []
    with torch.no_grad():
        for make in (
            lambda c: StaticDecoder(model, c, mask, DECODE_K, 8, graph=False, shortcuts=False),
            lambda c: FusedDecoder(model, c, mask, DECODE_K, 8, graph=True, compile=True, chunk=16),
        ):
            out = model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=(mask.cumsum(1) - 1).clamp(min=0),
                use_cache=True,
                logits_to_keep=1,
            )
            decoders.append(make(getattr(out, "cache", None) or out.past_key_values))
        generator = torch.Generator().manual_seed(0)
        for _ in range(7):
            token = torch.randint(1, 200, (len(prompts) * DECODE_K,), generator=generator).cuda()
            reference, candidate = decoders[0](token), decoders[1](token).clone()
            assert torch.allclose(reference, candidate, atol=1e-4), (reference - candidate).abs().max()
    assert decoders[1].graph is not None


def test_fused_layout_refuses_what_it_cannot_reproduce(policy):
    model = _qwen3()
    layer = model.get_base_model().model.layers[0]
    layer.mlp.down_proj.base_layer.bias = torch.nn.Parameter(torch.zeros(64))
    assert fused_layout(model) is None
    assert resolve_decoder(model, "fused", "cpu") == "static"
    with policy.model.disable_adapter():  # adapters off: the fused step computes the base alone
        layout = fused_layout(policy.model)
    assert layout is not None and all(p.a is None for layer in layout.layers for p in (layer.q, layer.down))

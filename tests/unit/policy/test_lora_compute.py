"""`lora.compute: base`: on a 16-bit base the adapter's products run in the base's dtype, its weights
stay float32 and get float32 gradients; everything else (float32 base, adapter off, merged) is
peft's own forward, bit for bit (searchgrpo/policy/lora_compute.py)."""

import pytest
import torch

from searchgrpo.policy.lora_compute import base_dtype_lora_forward
from searchgrpo.policy.model import load_policy
from tests.helpers.tiny import tiny_config


def policy(tmp_path, dtype: str, compute: str, *overrides: str):
    p = load_policy(tiny_config(tmp_path, f"model.dtype={dtype}", f"lora.compute={compute}", *overrides))
    torch.manual_seed(3)
    with torch.no_grad():  # B starts at zero: give the adapter a non-zero update to compute
        for name, param in p.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.05)
    return p


def lora_layers(model):
    from peft.tuners.lora.layer import Linear

    return [m for m in model.modules() if isinstance(m, Linear)]


def ids(p) -> torch.Tensor:
    text = "Question: who founded the observatory? Entities: Goals: Documents found:"
    return torch.tensor([p.tokenizer(text)["input_ids"]])


def grads(p) -> dict[str, torch.Tensor]:
    p.model.zero_grad()
    logits = p.model(input_ids=ids(p)).logits
    logits.float().logsumexp(-1).mean().backward()
    return {n: q.grad.clone() for n, q in p.model.named_parameters() if q.requires_grad}


def test_every_adapted_layer_multiplies_in_bfloat16_close_to_float32(tmp_path):
    ours, peft_path = policy(tmp_path, "bfloat16", "base"), policy(tmp_path, "bfloat16", "float32")
    layers = lora_layers(ours.model)
    assert layers and all(m.forward.__func__ is base_dtype_lora_forward for m in layers)
    assert not any("forward" in vars(m) for m in lora_layers(peft_path.model))
    # One layer against the same function in float32: only bfloat16 rounding apart.
    layer = layers[0]
    x = torch.randn(5, layer.in_features, dtype=torch.bfloat16)
    y = layer(x)
    assert y.dtype == torch.bfloat16
    a, b, s = layer.lora_A["default"].weight, layer.lora_B["default"].weight, layer.scaling["default"]
    exact = x.float() @ layer.base_layer.weight.float().t() + (x.float() @ a.t()) @ b.t() * s
    assert (y.float() - exact).abs().max() <= 0.02 * exact.abs().max()
    assert (y.float() - exact).abs().max() > 0  # it did run in bfloat16
    # The whole model: logits as close to peft's float32 adapter path as bfloat16 allows.
    with torch.no_grad():
        got, want = ours.model(input_ids=ids(ours)).logits, peft_path.model(input_ids=ids(ours)).logits
    assert (got.float() - want.float()).abs().max() < 0.05


def test_the_gradients_reach_the_float32_weights_and_match_peft(tmp_path):
    ours, peft_path = policy(tmp_path, "bfloat16", "base"), policy(tmp_path, "bfloat16", "float32")
    got, want = grads(ours), grads(peft_path)
    assert got.keys() == want.keys() and got
    for name in got:
        assert got[name].dtype == torch.float32, name
        cosine = torch.nn.functional.cosine_similarity(got[name].flatten(), want[name].flatten(), dim=0)
        assert cosine > 0.99, (name, float(cosine))


def test_gradient_checkpointing_recomputes_the_same_products(tmp_path):
    plain = grads(policy(tmp_path, "bfloat16", "base"))
    checkpointed = grads(policy(tmp_path, "bfloat16", "base", "model.gradient_checkpointing=true"))
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], rtol=0, atol=0)


@pytest.mark.parametrize("case", ["float32 base", "adapter off", "merged"])
def test_everything_else_is_peft_bit_for_bit(tmp_path, case):
    dtype = "float32" if case == "float32 base" else "bfloat16"
    ours, peft_path = policy(tmp_path, dtype, "base"), policy(tmp_path, dtype, "float32")

    def logits(p):
        with torch.no_grad():
            if case == "adapter off":
                with p.reference_mode():
                    return p.model(input_ids=ids(ours)).logits
            if case == "merged":
                p.model.merge_adapter()
            return p.model(input_ids=ids(ours)).logits

    assert torch.equal(logits(ours), logits(peft_path))


def test_the_decoders_shortcuts_give_the_forward_back(tmp_path):
    from searchgrpo.policy.replayed_decoders import DecodeShortcuts

    ours = policy(tmp_path, "bfloat16", "base")
    layer = lora_layers(ours.model)[0]
    shortcuts = DecodeShortcuts(ours.model, torch.bfloat16)
    with shortcuts.applied():
        assert getattr(layer.forward, "__func__", None) is not base_dtype_lora_forward
    assert layer.forward.__func__ is base_dtype_lora_forward  # was deleted, leaving peft's

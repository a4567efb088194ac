"""`lora.compute: base`: on a 16-bit base the adapter's products run in the base's dtype, its weights
stay float32 and get float32 gradients; everything else (float32 base, adapter off, merged) is
peft's own forward, bit for bit; inside `casts_kept` each layer casts its factors once, with the
same gradients (searchgrpo/policy/lora_compute.py)."""

import contextlib

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from searchgrpo.policy.lora_compute import KEPT_CASTS, base_dtype_lora_forward, casts_kept
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


class CastCount(TorchDispatchMode):
    """Counts the casts of the adapters' B weights to bfloat16."""

    def __init__(self, model) -> None:
        super().__init__()
        self.weights = {m.lora_B["default"].weight.data_ptr() for m in lora_layers(model)}
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.ops.aten.mul.Scalar and args[0].data_ptr() in self.weights
        return func(*args, **(kwargs or {}))


def micro_batches(p, kept: bool) -> tuple[dict[str, torch.Tensor], int]:
    """Gradients of two micro-batches' backward passes, and how many times B was cast."""
    p.model.zero_grad()
    counter = CastCount(p.model)
    with counter, casts_kept(p.model) if kept else contextlib.nullcontext():
        for scale in (1.0, -0.5):
            (p.model(input_ids=ids(p)).logits.float().logsumexp(-1).mean() * scale).backward()
    return {n: q.grad.clone() for n, q in p.model.named_parameters() if q.requires_grad}, counter.count


@pytest.mark.parametrize("checkpointing", [False, True])
def test_kept_casts_give_every_micro_batch_the_same_gradients_for_one_cast_per_layer(tmp_path, checkpointing):
    p = policy(tmp_path, "bfloat16", "base", f"model.gradient_checkpointing={str(checkpointing).lower()}")
    p.model.train()
    layers = len(lora_layers(p.model))
    fresh, casts_each_pass = micro_batches(p, kept=False)
    kept, casts_once = micro_batches(p, kept=True)
    # Two forwards (and, checkpointed, two recomputations) cast every layer's B each time; kept, once.
    assert casts_each_pass == layers * (4 if checkpointing else 2)
    assert casts_once == layers
    for name in fresh:
        torch.testing.assert_close(kept[name], fresh[name], rtol=0, atol=0)
    assert not any(KEPT_CASTS in vars(m) for m in lora_layers(p.model))  # the block took its casts with it


def test_a_block_sees_the_weights_of_its_start_and_the_next_block_sees_a_change(tmp_path):
    p = policy(tmp_path, "bfloat16", "base")
    with torch.no_grad():
        with casts_kept(p.model):
            before = p.model(input_ids=ids(p)).logits
        for layer in lora_layers(p.model):
            layer.lora_B["default"].weight.mul_(2.0)
        with casts_kept(p.model):
            after = p.model(input_ids=ids(p)).logits
        plain = p.model(input_ids=ids(p)).logits
    assert torch.equal(after, plain) and not torch.equal(after, before)


def test_a_frozen_pass_inside_the_block_leaves_the_gradients_whole(tmp_path):
    # A no-grad pass's casts carry no graph: a later pass with gradients must cast its own.
    p = policy(tmp_path, "bfloat16", "base")
    want = grads(p)
    p.model.zero_grad()
    with casts_kept(p.model):
        with torch.no_grad():
            p.model(input_ids=ids(p))
        p.model(input_ids=ids(p)).logits.float().logsumexp(-1).mean().backward()
    for name, param in p.model.named_parameters():
        if param.requires_grad:
            torch.testing.assert_close(param.grad, want[name], rtol=0, atol=0)

"""`merge`: parity with base + adapter, layout, overwrite refusal, discovery, atomic failure."""

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

import searchgrpo.export.merge as merge_mod
from searchgrpo.events import MergeFinished, MergeProgress, MergeStarted
from searchgrpo.export.merge import MergeRequest, OutputExists, ParityError, run_merge
from searchgrpo.policy.model import load_policy, resolve_base
from searchgrpo.train.trainer import Trainer
from tests.conftest import tiny_config

pytestmark = pytest.mark.slow  # trains or runs the CLI: the full tier (`make test`), not `make test-fast`


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("merge")
    # A large learning rate so that the adapter moves the logits visibly.
    cfg = tiny_config(tmp, "train.max_steps=2", "train.save_every=1", "train.run_name=r", "train.lr=0.05")
    return cfg, Trainer(cfg).train().run_dir


def test_merged_model_equals_base_plus_adapter(trained, tmp_path):
    cfg, run_dir = trained
    ckpt = run_dir / "checkpoints" / "step-000002"
    events = []
    (out,) = run_merge(cfg, MergeRequest([str(ckpt)], output_dir=str(tmp_path), dtype="float32"), events.append)
    assert out == tmp_path / "tiny-grpo-step2"
    for name in (
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "searchgrpo_merge.json",
    ):
        assert (out / name).is_file(), name
    merged = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    assert not any("lora" in n for n, _ in merged.named_parameters())
    policy = load_policy(cfg, adapter=ckpt / "adapter")
    ids = policy.tokenizer("Question: where was the founder of Krallo Systems born?", return_tensors="pt").input_ids
    with torch.no_grad():
        expected = policy.model(input_ids=ids).logits
        got = merged(input_ids=ids).logits
        with policy.reference_mode():
            plain = policy.model(input_ids=ids).logits
    assert torch.allclose(got, expected, atol=1e-4)
    assert not torch.allclose(plain, expected, atol=1e-3)  # the adapter really changed the model
    # Weight by weight: every adapted layer of the merged model is W0 + scaling * B @ A.
    weights = dict(merged.named_parameters())
    adapted = [(n, m) for n, m in policy.model.named_modules() if hasattr(m, "lora_A") and "default" in m.lora_A]
    assert adapted
    for name, module in adapted:
        lora = module.scaling["default"] * module.lora_B["default"].weight @ module.lora_A["default"].weight
        key = name.removeprefix("base_model.model.") + ".weight"
        assert torch.allclose(weights[key], module.base_layer.weight + lora, atol=1e-5), key
    kinds = [type(e) for e in events]
    assert kinds[0] is MergeStarted and kinds[-1] is MergeFinished and MergeProgress in kinds
    parity = events[-1].parity[0]
    assert parity["passed"] and parity["greedy_identical"] + parity["greedy_near_ties"] == parity["probes"]


def test_bf16_merge_passes_its_stated_tolerance(trained, tmp_path):
    cfg, run_dir = trained
    (out,) = run_merge(cfg, MergeRequest([str(run_dir / "checkpoints" / "step-000002")], output_dir=str(tmp_path)))
    meta = json.loads((out / "searchgrpo_merge.json").read_text())
    assert meta["dtype"] == "bfloat16" and meta["parity"]["passed"]
    assert meta["parity"]["max_abs_logprob_delta"] <= merge_mod.TOLERANCE["bfloat16"]
    config = json.loads((out / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "bfloat16"


def test_auto_discovery_and_overwrite_refusal(trained, tmp_path):
    cfg, run_dir = trained
    outs = run_merge(cfg, MergeRequest(run_dir=str(run_dir), output_dir=str(tmp_path)))
    assert [p.name for p in outs] == ["tiny-grpo-step1", "tiny-grpo-step2"]
    marker = outs[0] / "config.json"
    before = marker.stat().st_mtime_ns
    with pytest.raises(OutputExists) as info:
        run_merge(cfg, MergeRequest(run_dir=str(run_dir), output_dir=str(tmp_path)))
    assert sorted(info.value.paths) == sorted(str(p) for p in outs)
    assert "--overwrite" in str(info.value)
    assert marker.stat().st_mtime_ns == before  # nothing touched
    again = run_merge(cfg, MergeRequest(run_dir=str(run_dir), output_dir=str(tmp_path), overwrite=True))
    assert again == outs and (outs[0] / "config.json").is_file()


def test_failed_parity_leaves_no_output(trained, tmp_path, monkeypatch):
    cfg, run_dir = trained
    monkeypatch.setitem(merge_mod.TOLERANCE, "bfloat16", 0.0)
    with pytest.raises(ParityError, match="parity check failed"):
        run_merge(cfg, MergeRequest([str(run_dir / "checkpoints" / "step-000002")], output_dir=str(tmp_path)))
    assert list(tmp_path.iterdir()) == []


def test_base_name_and_step_come_from_the_checkpoint(trained):
    cfg, run_dir = trained
    assert resolve_base(cfg).name == "tiny"
    jobs = merge_mod.plan(cfg, MergeRequest(run_dir=str(run_dir), output_dir="x"), "Qwen3-8B")
    assert [str(j.output) for j in jobs] == ["x/Qwen3-8B-grpo-step1", "x/Qwen3-8B-grpo-step2"]

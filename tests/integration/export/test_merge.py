"""`merge`: parity with base + adapter, layout, overwrite refusal, discovery, atomic failure;
healthy checkpoints pass in 16 bits, a corrupted adapter is refused with its remedy, and a refusal
does not stop the other merges of `--run-dir`."""

import json
import random
import shutil
import struct

import pytest
import torch
from transformers import AutoModelForCausalLM

import searchgrpo.export.merge as merge_mod
from searchgrpo.events import MergeFinished, MergeProgress, MergeStarted
from searchgrpo.export.merge import MergeRequest, MergesRefused, OutputExists, ParityError, run_merge
from searchgrpo.export.parity import TOLERANCES, Tolerance
from searchgrpo.policy.model import load_policy, resolve_base
from searchgrpo.train.trainer import Trainer
from tests.helpers.faults import main_in_process
from tests.helpers.tiny import SETS, tiny_config


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("merge")
    # A large learning rate so that the adapter moves the logits visibly.
    cfg = tiny_config(
        tmp, "train.max_steps=4", "train.save_every=1", "train.keep_last=4", "train.run_name=r", "train.lr=0.05"
    )
    return cfg, Trainer(cfg).train().run_dir


def corrupt(adapter_dir, seed: int = 0) -> None:
    """Overwrite the tensor bytes of an adapter file (its header stays whole), as bit rot would."""
    path = adapter_dir / "adapter_model.safetensors"
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack("<Q", data[:8])
    rng = random.Random(seed)
    for i in range(8 + length, len(data)):
        data[i] = rng.randrange(256)
    path.write_bytes(bytes(data))


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
    assert parity["passed"] and parity["flips"] == 0 and parity["compared_with"] == "base + adapter in float32"
    assert parity["max_abs_logprob_delta"] <= 1e-3 and parity["tokens"] > 0
    assert [e.stage for e in events if isinstance(e, MergeProgress)][-1] == "done"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_healthy_checkpoints_at_every_step_pass_in_16_bits(trained, tmp_path, dtype):
    """Issue 26: the default bf16 merge refused an ordinary checkpoint (float32 tolerances against
    the rounding of every weight). Every checkpoint of a run whose adapter moved passes now."""
    cfg, run_dir = trained
    events = []
    outs = run_merge(cfg, MergeRequest(run_dir=str(run_dir), output_dir=str(tmp_path), dtype=dtype), events.append)
    assert [p.name for p in outs] == [f"tiny-grpo-step{n}" for n in (1, 2, 3, 4)]
    for out in outs:
        meta = json.loads((out / "searchgrpo_merge.json").read_text())
        assert meta["dtype"] == dtype and meta["parity"]["passed"], meta["parity"]
        assert meta["parity"]["max_abs_logprob_delta"] <= TOLERANCES[dtype].max_delta
        config = json.loads((out / "config.json").read_text())
        assert config.get("dtype", config.get("torch_dtype")) == dtype
    assert events[-1].refused == []


def test_auto_discovery_and_overwrite_refusal(trained, tmp_path):
    cfg, run_dir = trained
    outs = run_merge(cfg, MergeRequest(run_dir=str(run_dir), output_dir=str(tmp_path)))
    assert [p.name for p in outs] == ["tiny-grpo-step1", "tiny-grpo-step2", "tiny-grpo-step3", "tiny-grpo-step4"]
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
    monkeypatch.setitem(TOLERANCES, "bfloat16", Tolerance(0.0, 0.0, 0.0, 0.0))
    with pytest.raises(ParityError, match="parity check failed"):
        run_merge(cfg, MergeRequest([str(run_dir / "checkpoints" / "step-000002")], output_dir=str(tmp_path)))
    assert list(tmp_path.iterdir()) == []


def test_a_corrupted_adapter_is_refused_with_its_remedy(trained, tmp_path):
    cfg, run_dir = trained
    broken = tmp_path / "step-000003"
    shutil.copytree(run_dir / "checkpoints" / "step-000003", broken)
    corrupt(broken / "adapter")
    with pytest.raises(MergesRefused) as info:
        run_merge(cfg, MergeRequest([str(broken)], output_dir=str(tmp_path / "out")))
    text = str(info.value)
    assert "non-finite log-probs" in text and "adapter's weights are damaged" in text
    assert "Remedy: " in text and "merge an earlier checkpoint" in text
    assert list((tmp_path / "out").iterdir()) == []


def test_run_dir_merges_past_a_refusal_and_reports_both(trained, tmp_path, capsys, monkeypatch):
    """`merge --run-dir`: a checkpoint that fails parity is refused, the others are written, the
    command lists every merge written and every one refused, and exits 1 at the end."""
    _, run_dir = trained
    copy = tmp_path / "runs" / "r"
    shutil.copytree(run_dir, copy)
    corrupt(copy / "checkpoints" / "step-000002" / "adapter")
    out = tmp_path / "merged"
    code, text = main_in_process(
        ["merge", "--run-dir", str(copy), "--output-dir", str(out), *SETS], capsys, monkeypatch
    )
    assert code == 1, text
    assert sorted(p.name for p in out.iterdir()) == ["tiny-grpo-step1", "tiny-grpo-step3", "tiny-grpo-step4"]
    for n in (1, 3, 4):
        assert f"{out}/tiny-grpo-step{n}: parity passed (bfloat16 against base + adapter in bfloat16" in text
    assert f"{copy}/checkpoints/step-000002: refused: " in text and "Remedy:" in text
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert errors == ["error: 1 of 4 merges refused (3 written); each reason and its remedy is above"], text
    assert "Traceback" not in text


def test_base_name_and_step_come_from_the_checkpoint(trained):
    cfg, run_dir = trained
    assert resolve_base(cfg).name == "tiny"
    jobs = merge_mod.plan(cfg, MergeRequest(run_dir=str(run_dir), output_dir="x"), "Qwen3-8B")
    assert [str(j.output) for j in jobs] == [f"x/Qwen3-8B-grpo-step{n}" for n in (1, 2, 3, 4)]

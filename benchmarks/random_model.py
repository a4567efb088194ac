"""Random-weight Qwen3-shaped models for the benchmarks: the shapes (SHAPES), their `Qwen3Config`, and a
model of one shape with our tokenizer, saved once to a folder (no download).

Used by grpo_vs_trl.py's h200 presets, step_table.py, credit_step.py, judge_profile.py,
decode_profile.py and loss_after_decode.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SHAPES = {
    "qwen3-8b": dict(
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
    ),
    "qwen3-1.7b": dict(
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
    ),
    "qwen3-tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
    ),
}


def random_config(shape: str, bos: int | None, eos: int | None, pad: int | None) -> Any:
    """The `Qwen3Config` of a model shape in SHAPES (Qwen3's vocabulary and rotary settings)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=151936,
        max_position_embeddings=40960,
        rope_theta=1000000.0,
        tie_word_embeddings=False,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
        **SHAPES[shape],
    )


def make_random_model(target: Path, tokenizer_dir: Path, shape: str) -> Path:
    """A Qwen3-shaped model with random weights (no download) and our tokenizer, saved once."""
    if (target / "config.json").is_file():
        return target
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    from searchgrpo.policy.model import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    config = random_config(shape, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
    )
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    del model
    tmp.rename(target)
    return target

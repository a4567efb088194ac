"""A tiny random-weight Llama GGUF, for the tests that need a GGUF model.

The tests of the llama.cpp paths (the embedded checker server, the server sampler) check wiring:
requests, slots, grammars, restarts, the adapter reaching the server. None needs SmolLM2's 135M
weights, whose conversion (17 s, most of it parsing a 49,152-token vocabulary three times) and
inference cost tens of CPU seconds a run. This file is the tiny model's byte-level BPE tokenizer
(`searchgrpo.policy.tiny`, 1,024 tokens, ChatML) in GGUF's `gpt2` tokenizer fields, over a
2-layer Llama of hidden size 64 with random float32 weights. llama.cpp serves it and transformers
converts it (`model.base: <file>.gguf`) by the same paths as SmolLM2's file.
"""

from __future__ import annotations

from pathlib import Path

from searchgrpo.fileio import atomic_dir

TINY_GGUF_NAME = "tiny-llama.gguf"
TINY_GGUF_MODEL = "tiny-llama"
"""The model name in the file, which llama.cpp serves it as."""
HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
FFN = 128
CONTEXT = 8192


def ensure_tiny_gguf(folder: Path, seed: int = 0) -> Path:
    """Build (once) and return `folder/tiny-llama.gguf`."""
    target_dir = folder / "tiny-gguf-v1"
    target = target_dir / TINY_GGUF_NAME
    if target.is_file():
        return target
    import json

    import numpy as np
    from gguf import GGUFWriter, TokenType

    from searchgrpo.policy.tiny import CHAT_TEMPLATE, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    by_id = {i: t for t, i in tokenizer.get_vocab().items()}
    vocab = len(by_id)
    tokens = [by_id[i] for i in range(vocab)]
    special = set(tokenizer.all_special_ids)
    types = [TokenType.CONTROL if i in special else TokenType.NORMAL for i in range(vocab)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    rng = np.random.default_rng(seed)

    def weight(*shape: int, std: float = 0.05) -> np.ndarray:
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    with atomic_dir(target_dir, first_wins=True) as tmp:
        writer = GGUFWriter(str(tmp / TINY_GGUF_NAME), "llama")
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("gpt-2")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        writer.add_bos_token_id(tokenizer.bos_token_id)
        writer.add_eos_token_id(tokenizer.eos_token_id)
        writer.add_pad_token_id(tokenizer.pad_token_id)
        writer.add_unk_token_id(tokenizer.unk_token_id)
        writer.add_add_bos_token(False)
        writer.add_chat_template(CHAT_TEMPLATE)
        writer.add_name(TINY_GGUF_MODEL)
        writer.add_context_length(CONTEXT)
        writer.add_embedding_length(HIDDEN)
        writer.add_block_count(LAYERS)
        writer.add_feed_forward_length(FFN)
        writer.add_head_count(HEADS)
        writer.add_head_count_kv(KV_HEADS)
        writer.add_rope_dimension_count(HIDDEN // HEADS)
        writer.add_rope_freq_base(10000.0)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_vocab_size(vocab)
        kv_dim = HIDDEN // HEADS * KV_HEADS
        writer.add_tensor("token_embd.weight", weight(vocab, HIDDEN))
        writer.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        for i in range(LAYERS):
            block = f"blk.{i}"
            writer.add_tensor(f"{block}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
            writer.add_tensor(f"{block}.attn_q.weight", weight(HIDDEN, HIDDEN))
            writer.add_tensor(f"{block}.attn_k.weight", weight(kv_dim, HIDDEN))
            writer.add_tensor(f"{block}.attn_v.weight", weight(kv_dim, HIDDEN))
            writer.add_tensor(f"{block}.attn_output.weight", weight(HIDDEN, HIDDEN))
            writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
            writer.add_tensor(f"{block}.ffn_gate.weight", weight(FFN, HIDDEN))
            writer.add_tensor(f"{block}.ffn_up.weight", weight(FFN, HIDDEN))
            writer.add_tensor(f"{block}.ffn_down.weight", weight(HIDDEN, FFN))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return target

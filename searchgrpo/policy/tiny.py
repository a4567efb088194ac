"""A tiny random-weight causal LM with a real tokenizer, built offline for tests and benchmarks.

`model.base: tiny` resolves here. The tokenizer is a byte-level BPE trained on demo-world text
(deterministic), with the ChatML template that SmolLM2 uses; the model is a 2-layer Llama with
hidden size 64 and random weights. It learns nothing useful, but it exercises every code path
(generation, log-probs, LoRA, checkpoints, merge) in seconds.
"""

from __future__ import annotations

from pathlib import Path

from searchgrpo.fileio import atomic_dir, save_model_here

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _training_text() -> list[str]:
    from searchgrpo.data.demo_world import generate_world
    from searchgrpo.env.prompts import system_prompt

    world = generate_world(questions=60, distractors=60, seed=1)
    lines = [system_prompt(), "Question: Entities: Goals: Documents found: Context: IMPORTANT RELEVANT IRRELEVANT"]
    lines += [f"{d.title}\n{d.text}" for d in world.documents]
    lines += [q.question for q in world.questions]
    return lines


def build_tiny_tokenizer(vocab_size: int = 1024):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def ensure_tiny_model(target: Path, hidden_size: int = 64, layers: int = 2, seed: int = 0) -> Path:
    """Build (once) and return the folder of the tiny model."""
    if (target / "config.json").is_file():
        return target
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    with atomic_dir(target, first_wins=True) as tmp:
        tokenizer = build_tiny_tokenizer()
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=hidden_size,
            intermediate_size=hidden_size * 2,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            tie_word_embeddings=True,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        model.generation_config = GenerationConfig(
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        save_model_here(model, tmp)
        tokenizer.save_pretrained(tmp)
    return target

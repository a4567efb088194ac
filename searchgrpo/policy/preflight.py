"""Sizes checked against the base model before any weight loads.

The config's own bounds (`searchgrpo.config`) refuse values that cannot work anywhere; these are
the ones that cannot work with this model, read from its `config.json` alone: a prompt and a
completion that together pass its context, and a LoRA rank above its hidden size (a layer's
adapter cannot have more directions than the layer has dimensions).
"""

from __future__ import annotations

import json
from typing import Any

from searchgrpo.config import Config
from searchgrpo.errors import UserError

CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def _model_config(path: Any) -> dict[str, Any]:
    try:
        data = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if isinstance(data.get("text_config"), dict):  # multimodal wrappers keep the language model's here
        data = {**data, **data["text_config"]}
    return data if isinstance(data, dict) else {}


def check_fits_model(cfg: Config, base: Any) -> None:
    """Raise a one-line UserError naming the key when the config cannot work with `base`
    (a `BaseModel`); silent when its config.json does not say."""
    model = _model_config(base.path)
    context = next((model[k] for k in CONTEXT_KEYS if isinstance(model.get(k), int)), None)
    g = cfg.grpo
    if context is not None and g.max_prompt_tokens + g.max_new_tokens > context:
        raise UserError(
            f"grpo.max_prompt_tokens + grpo.max_new_tokens = {g.max_prompt_tokens} + {g.max_new_tokens} "
            f"is above the context of {base.name} ({context} tokens); lower one of them"
        )
    hidden = model.get("hidden_size")
    if isinstance(hidden, int) and cfg.lora.r > hidden:
        raise UserError(
            f"lora.r = {cfg.lora.r} is above the hidden size of {base.name} ({hidden}); "
            f"a rank of at most {hidden} can work"
        )

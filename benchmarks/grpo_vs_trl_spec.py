"""What one grpo_vs_trl.py run is and what it measured (Spec, Outcome), and the set-up both trainers
share: the config overrides of a Spec, its workload (states and prompt ids per step), device sync
and memory peaks."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCHMARKS = str(Path(__file__).resolve().parent)
if BENCHMARKS not in sys.path:  # siblings are imported by bare name, however this module was imported
    sys.path.insert(0, BENCHMARKS)


@dataclass
class Spec:
    """One benchmark run."""

    trainer: str  # "ours" | "trl"
    model: str  # model.base: embedded:smollm2, tiny, or a folder
    beta: float
    device: str = "cpu"
    states: int = 2
    k: int = 4
    max_new_tokens: int = 64
    micro_batch: int = 8
    prompt_tokens: int | None = None  # None: the states' own prompts; n: exactly n tokens each
    gradient_checkpointing: bool = False
    load_in_4bit: bool = False
    decoder: str = "auto"
    warmup: int = 1
    steps: int = 3
    threads: int | None = None
    lora_r: int = 16
    lora_alpha: float = 32.0
    lora_compute: str = "base"  # ours' lora.compute; TRL's products follow its own autocast
    fused_norms: bool = True  # ours' model.fused_norms; TRL runs transformers' norms
    lr: float = 5e-5
    decode_probe: bool = False


@dataclass
class Outcome:
    spec: dict[str, Any]
    step_s: list[float] = field(default_factory=list)
    completion_tokens: list[int] = field(default_factory=list)
    generate_s: list[float] = field(default_factory=list)
    score_s: list[float] = field(default_factory=list)
    loss_s: list[float] = field(default_factory=list)
    frac_zero_std: list[float] = field(default_factory=list)
    prompt_lengths: list[int] = field(default_factory=list)
    peak_gb: float | None = None
    reserved_gb: float | None = None
    decode: dict[str, float] | None = None
    error: str | None = None
    start_finite: bool | None = None
    """The model's logits on the first prompt were finite before training (trainer_health.py)."""
    health: list[dict[str, Any]] = field(default_factory=list)
    """Per step (warm-up included): gradient norm and whether the update stayed finite."""
    diagnosis: dict[str, Any] | None = None
    """After a failure: is the adapter finite, are the logits finite with and without it."""


def base_overrides(spec: Spec) -> list[str]:
    return [
        f"model.base={spec.model}",
        f"model.device={spec.device}",
        f"model.gradient_checkpointing={str(spec.gradient_checkpointing).lower()}",
        f"model.load_in_4bit={str(spec.load_in_4bit).lower()}",
        f"lora.r={spec.lora_r}",
        f"lora.alpha={spec.lora_alpha}",
        f"lora.compute={spec.lora_compute}",
        f"model.fused_norms={str(spec.fused_norms).lower()}",
        f"grpo.num_generations={spec.k}",
        f"grpo.max_new_tokens={spec.max_new_tokens}",
        f"grpo.beta={spec.beta}",
        "grpo.kl_estimator=k3",
        "grpo.loss_type=grpo",
        "grpo.scale_rewards=group",
        f"grpo.decoder={spec.decoder}",
        f"train.states_per_step={spec.states}",
        f"train.micro_batch_size={spec.micro_batch}",
        f"train.lr={spec.lr}",
        # TRL's GRPOTrainer trains on every group it samples: the same work means no replacements.
        "grpo.dynamic_sampling=false",
    ]


def workload(spec: Spec, cfg: Any, tokenizer: Any) -> tuple[Any, list[list[Any]], list[list[list[int]]]]:
    """(dataset, states per step, prompt ids per step) for warmup + steps steps."""
    from long_prompt import long_prompt

    from searchgrpo.policy.sampling import encode_prompt
    from searchgrpo.world import load_dataset

    ds = load_dataset(cfg)
    train = ds.train
    total = spec.warmup + spec.steps
    states = [[train[(i * spec.states + j) % len(train)] for j in range(spec.states)] for i in range(total)]
    prompts = []
    for i, chunk in enumerate(states):
        if spec.prompt_tokens:
            others = [train[(7 * i + j + 1) % len(train)] for j in range(60)]
            prompts.append([long_prompt(tokenizer, s, others, spec.prompt_tokens, cfg) for s in chunk])
        else:
            prompts.append(
                [
                    encode_prompt(
                        tokenizer,
                        s,
                        max_rows=cfg.data.max_table_rows,
                        max_tokens=cfg.grpo.max_prompt_tokens,
                        min_clues=cfg.env.min_clues,
                        max_clues=cfg.env.max_clues,
                    )
                    for s in chunk
                ]
            )
    return ds, states, prompts


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def memory(out: Outcome, device: str) -> None:
    import torch

    if device.startswith("cuda"):
        out.peak_gb = round(torch.cuda.max_memory_allocated() / 1e9, 2)
        out.reserved_gb = round(torch.cuda.max_memory_reserved() / 1e9, 2)

"""The efficacy experiment's settings (efficacy.py, judge_sweep.py, h200_study.sh): where the question
sets are, the config on top of config.yaml, the judge and credit flags as config keys, and the gold
judge that collection and evaluation use whatever judge trains the policy."""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

# The experiment's settings on top of config.yaml (each can be overridden with --set). config.yaml
# already carries the reward of issue #14: reward.retrieved_doc (a cost per document retrieved),
# the guards found by reading clues (redundant_clue, invented_number, cut_clue, table_copy,
# goal_copy), with the irrelevant/already-discovered penalties off.
EXPERIMENT = (
    "grpo.num_generations=8",
    "grpo.max_new_tokens=32",
    "grpo.max_prompt_tokens=640",
    "data.max_table_rows=6",
    "grpo.temperature=1.0",
    "grpo.beta=0.0",
    "grpo.dynamic_sampling=true",
    "grpo.dynamic_filter=finds",
    "grpo.dynamic_max_retries=2",
    "train.states_per_step=2",
    "train.micro_batch_size=16",
    "train.lr=2e-4",
    "train.epochs=50",
    "train.eval_every=0",
    "train.save_every=50",
    "train.refresh_states_every=100",
    "train.refresh_questions=64",
    "train.refresh_mix=0.5",
    "data.eval_fraction=0.2",
    # bf16 matrix products run about twice as fast as float32 on CPUs with AVX512-BF16, and are the
    # native dtype on GPUs (peft keeps the LoRA weights in float32).
    "model.dtype=bfloat16",
)


def judge_overrides(args: argparse.Namespace) -> list[str]:
    """The training judge's config keys from --checker and --judge-*."""
    out = [f"checker.backend={args.checker}"] if args.checker else []
    for flag, key in (
        ("judge_noise", "judge_noise"),
        ("judge_bias", "judge_bias"),
        ("judge_bias_rate", "judge_bias_rate"),
        ("judge_seed", "judge_seed"),
    ):
        if getattr(args, flag) is not None:
            out.append(f"checker.{key}={getattr(args, flag)}")
    return out


def credit_overrides(args: argparse.Namespace) -> list[str]:
    """The config keys of --credit, --horizon, --gamma, --state-sampler, --per-clue and --seed."""
    out = []
    for flag, key in (
        ("credit", "grpo.credit"),
        ("horizon", "grpo.credit_horizon"),
        ("gamma", "grpo.credit_gamma"),
        ("state_sampler", "train.state_sampler"),
        ("seed", "train.seed"),
    ):
        if getattr(args, flag, None) is not None:
            out.append(f"{key}={getattr(args, flag)}")
    if getattr(args, "per_clue", False):
        out.append("reward.per_clue=true")
    return out


GOLD_JUDGE = {
    "checker.backend": "gold",
    "checker.judge_noise": 0.0,
    "checker.judge_bias": "none",
    "reward.soft_labels": False,  # gold verdicts have no probabilities
}
"""What collection and evaluation use, whatever judge trains the policy."""

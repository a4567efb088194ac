"""grpo_vs_trl.py's presets: the runs (Specs) each `--preset` compares, grouped by workload."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

BENCHMARKS = str(Path(__file__).resolve().parent)
if BENCHMARKS not in sys.path:  # siblings are imported by bare name, however this module was imported
    sys.path.insert(0, BENCHMARKS)

from grpo_vs_trl_spec import Spec  # noqa: E402
from random_model import make_random_model  # noqa: E402


def h200_work(device: str, *, warmup: int, steps: int) -> dict[str, Any]:
    """The h200 presets' workload as Spec fields: 4 states x K=8, 1,024-token prompts, 128 new
    tokens, one group per micro-batch, gradient checkpointing (benchmarks/loss_profile.py too)."""
    return dict(
        device=device,
        states=4,
        k=8,
        max_new_tokens=128,
        micro_batch=8,
        prompt_tokens=1024,
        gradient_checkpointing=True,
        warmup=warmup,
        steps=steps,
    )


def presets(name: str, args: argparse.Namespace) -> list[tuple[str, list[Spec]]]:
    """(label, specs) pairs; each pair's specs are compared with each other."""
    if name in ("cpu", "quick"):
        models = ["tiny"] if name == "quick" else ["embedded:smollm2", "tiny"]
        steps, warmup = (2, 1) if name == "quick" else (args.steps or 3, 1)
        out = []
        for model in models:
            for beta in (0.0, 0.04):
                label = f"{'SmolLM2-135M' if 'smollm' in model else 'tiny'} beta={beta}"
                out.append(
                    (
                        label,
                        [
                            Spec(t, model, beta, warmup=warmup, steps=steps, threads=args.threads or 1)
                            for t in ("ours", "trl")
                        ],
                    )
                )
        return out
    if name in ("h200", "h200-quick"):
        shape = "qwen3-8b" if name == "h200" else "qwen3-tiny"
        folder = make_random_model(Path(args.model_dir) / shape, Path(args.tokenizer), shape)
        common = h200_work(args.device or "cuda", warmup=1, steps=args.steps or 3)
        first = args.betas[0]
        out = [
            (
                f"{shape} bf16 beta={first}",
                [
                    Spec("ours", str(folder), first, decode_probe=True, **common),
                    Spec("trl", str(folder), first, **{**common, "steps": min(common["steps"], 2)}),
                ],
            )
        ]
        if args.four_bit:
            out.append(
                (
                    f"{shape} 4-bit beta={first}",
                    [
                        Spec("ours", str(folder), first, load_in_4bit=True, decode_probe=True, **common),
                        *(
                            [Spec("trl", str(folder), first, load_in_4bit=True, **{**common, "steps": 2})]
                            if args.trl_four_bit
                            else []
                        ),
                    ],
                )
            )
        if args.dynamic:
            out.append(
                (
                    f"{shape} bf16 beta={first} dynamic-cache decode",
                    [
                        Spec(
                            "ours", str(folder), first, decoder="dynamic", decode_probe=True, **{**common, "steps": 1}
                        ),
                    ],
                )
            )
        for beta in args.betas[1:]:
            out.append(
                (
                    f"{shape} bf16 beta={beta}",
                    [
                        Spec("ours", str(folder), beta, **common),
                        Spec("trl", str(folder), beta, **{**common, "steps": min(common["steps"], 2)}),
                    ],
                )
            )
        return out
    raise SystemExit(f"unknown preset {name}")

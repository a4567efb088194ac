"""Which CUDA allocations outlive a training step? A leak finder for the GPU paths.

    PYTHONPATH=. python benchmarks/gpu_memory_probe.py fused 30     # decoder, steps
    PYTHONPATH=. python benchmarks/gpu_memory_probe.py graph 30 --set grpo.beta=0.04

Trains the tiny model on the demo world on CUDA with PyTorch's allocation history on, records
`torch.cuda.memory_allocated()` after every step, then lists the blocks alive after the last step
that were not alive halfway, grouped by the Python stack that allocated them. A flat run prints
deltas of 0 and a few kilobytes of blocks without a stack (allocator bookkeeping).

It found the 32 MiB-per-step leak of the CUDA-graph decoders (README, "Reliability", GPU soak).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def live_blocks() -> dict[int, tuple[int, list[dict[str, Any]]]]:
    """Address -> (size, allocation frames) of every allocated block."""
    import torch

    blocks = {}
    for segment in torch.cuda.memory._snapshot()["segments"]:
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                blocks[block["address"]] = (block["size"], block.get("frames", []))
    return blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("decoder", choices=("dynamic", "static", "graph", "fused"))
    parser.add_argument("steps", type=int)
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="config override")
    args = parser.parse_args()

    import torch

    from searchgrpo.config import load_config
    from searchgrpo.events import StepFinished
    from searchgrpo.runs import quiet_libraries
    from searchgrpo.train.trainer import Trainer

    quiet_libraries()
    cfg = load_config(
        None,
        [
            "model.base=tiny",
            "model.device=cuda",
            f"grpo.decoder={args.decoder}",
            "grpo.num_generations=4",
            "grpo.max_new_tokens=16",
            "train.states_per_step=2",
            "train.micro_batch_size=8",
            "train.epochs=1000",
            f"train.max_steps={args.steps}",
            "train.eval_every=0",
            "train.save_every=0",
            "data.demo.questions=24",
            "data.demo.distractors=40",
            "train.output_dir=/tmp/gpu_memory_probe",
            *args.overrides,
        ],
    )
    halfway, last = args.steps // 2, args.steps
    torch.cuda.memory._record_memory_history(max_entries=200_000, stacks="python")
    allocated: list[int] = []
    snapshots: dict[int, dict[int, tuple[int, list[dict[str, Any]]]]] = {}

    def on_event(event: Any) -> None:
        if isinstance(event, StepFinished):
            torch.cuda.synchronize()
            allocated.append(torch.cuda.memory_allocated())
            if event.step in (halfway, last):
                snapshots[event.step] = live_blocks()

    Trainer(cfg, sink=on_event).train()
    print(f"{args.decoder}: allocated after each step (bytes): {allocated[:3]} ... {allocated[-3:]}")
    print("growth per step:", [b - a for a, b in itertools.pairwise(allocated)])
    new = {a: v for a, v in snapshots[last].items() if a not in snapshots[halfway]}
    size_by_stack: collections.Counter[str] = collections.Counter()
    count_by_stack: collections.Counter[str] = collections.Counter()
    for size, frames in new.values():
        stack = " <- ".join(f"{Path(f['filename']).name}:{f['line']}:{f['name']}" for f in frames[:6])
        size_by_stack[stack] += size
        count_by_stack[stack] += 1
    print(
        f"blocks alive after step {last} that were not after step {halfway}: {len(new)}, "
        f"{sum(size for size, _ in new.values())} bytes"
    )
    for stack, size in size_by_stack.most_common(8):
        print(f"  {size:>12} B in {count_by_stack[stack]:>4} blocks: {stack or '(no Python stack)'}")


if __name__ == "__main__":
    main()

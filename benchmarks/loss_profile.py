"""Benchmark: where the GPU time of our GRPO update goes, on grpo_vs_trl.py's h200 workload.

    python benchmarks/loss_profile.py --tokenizer DIR                      # a Qwen3-8B-shaped random model
    python benchmarks/loss_profile.py --tokenizer DIR --set lora.compute=float32
    python benchmarks/loss_profile.py --tokenizer DIR --shape qwen3-tiny --device cpu   # a dry run

Ours only (bf16, beta 0.04, 4 states x K=8, 1,024-token prompts, 128-token completions, gradient
checkpointing: `grpo_vs_trl.py --preset h200`'s run), steps 0-2 unprofiled, then step 3's update
(policy, reference and backward passes and the optimiser step, not the sampling) under
torch.profiler: kernel time by category (matrix products, attention, element-wise and
reductions, copies) and the 30 largest kernels. `--tokenizer` as for grpo_vs_trl.py. Results:
benchmarks/results/lean_forwards_h100/loss_profile_*.txt.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from grpo_vs_trl_presets import h200_work  # noqa: E402
from grpo_vs_trl_spec import Spec, base_overrides, sync, workload  # noqa: E402
from random_model import make_random_model  # noqa: E402

CATEGORIES = (
    ("attention", ("sdpa", "fmha", "flash", "attention")),
    ("matrix products", ("gemm", "nvjet", "xmma", "cutlass", "splitk")),
    ("copies", ("copy",)),
    ("element-wise and reductions", ("elementwise", "reduce")),
)


def category(kernel: str) -> str:
    name = kernel.lower()
    return next((c for c, words in CATEGORIES if any(w in name for w in words)), "other")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--shape", default="qwen3-8b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--model-dir", default="/tmp/models")
    parser.add_argument("--set", action="append", default=[], help="a config override for ours, repeatable")
    args = parser.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import get_scheduler

    from searchgrpo.config import load_config
    from searchgrpo.policy.model import load_policy
    from searchgrpo.seeding import derive_seed
    from searchgrpo.train.rollouts import collect_groups
    from searchgrpo.train.step import update
    from searchgrpo.world import make_env

    folder = make_random_model(Path(args.model_dir) / args.shape, Path(args.tokenizer), args.shape)
    spec = Spec("ours", str(folder), 0.04, **h200_work(args.device, warmup=3, steps=1))
    cfg = load_config(None, [*base_overrides(spec), *args.set])
    policy = load_policy(cfg)
    ds, states, prompts = workload(spec, cfg, policy.tokenizer)
    env = make_env(cfg, ds)
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=spec.lr, weight_decay=0.0)
    scheduler = get_scheduler("constant", optimizer)
    cuda = args.device.startswith("cuda")
    prof = profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU])
    for i, (chunk, ids) in enumerate(zip(states, prompts)):
        by_id = {s.state_id: p for s, p in zip(chunk, ids)}
        torch.manual_seed(derive_seed(0, "step", i))
        rollouts = collect_groups(
            cfg.grpo,
            policy,
            env,
            chunk,
            prompt_of=lambda s, by_id=by_id: by_id[s.state_id],
            seed_of=lambda s, r, i=i: derive_seed(0, "sample", i, s.state_id),
        )
        last = i == len(states) - 1
        sync(args.device)
        start = time.perf_counter()
        if last:
            prof.start()
        update(cfg, policy, optimizer, scheduler, rollouts)
        sync(args.device)
        if last:
            prof.stop()
        print(f"step {i}: update {time.perf_counter() - start:.3f} s{' (profiled)' if last else ''}", flush=True)
    kernels: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    for event in prof.events():
        if cuda and event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        kernels[event.name] += event.device_time_total if cuda else event.cpu_time_total
        calls[event.name] += 1
    by_category: collections.Counter[str] = collections.Counter()
    for name, us in kernels.items():
        by_category[category(name)] += us
    print(f"{'GPU' if cuda else 'CPU'} time of the profiled update's kernels: {sum(kernels.values()) / 1e3:.1f} ms")
    print(f"{'kernels launched' if cuda else 'operator calls'}: {sum(calls.values())}")
    for name, us in by_category.most_common():
        print(f"  {name:30s} {us / 1e3:9.1f} ms")
    for name, us in kernels.most_common(30):
        print(f"{us / 1e3:9.1f} ms {calls[name]:6d}  {name[:110]}")


if __name__ == "__main__":
    main()

"""Where a decode step's time goes on a GPU (issue #7): kernel time by kind, against the bound.

    python benchmarks/decode_profile.py --model /tmp/qwen3-8b [--load-in-4bit]

Builds the sampling setup of a GRPO step (states x K rows, prompts of --prompt-tokens tokens),
then for the static decoder with and without `DecodeShortcuts`: the wall time of one decode step
replayed as a CUDA graph, and, from torch.profiler over eager steps, the GPU kernel time per step
by kind (matmuls, attention, element-wise, copies, ...), with the number of kernels. Prints a
table and writes --out (JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.model import load_policy  # noqa: E402
from searchgrpo.rollout import StaticDecoder, left_pad  # noqa: E402


def kind(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("gemm", "gemv", "cutlass", "sm90_", "cublas", "matmul", "splitk")):
        return "matmul"
    if any(k in n for k in ("softmax", "attention", "fmha", "flash")):
        return "attention"
    if any(k in n for k in ("reduce", "norm")):
        return "reduction/norm"
    if any(k in n for k in ("copy", "cat", "index", "gather", "scatter", "fill")):
        return "copy/index"
    if any(k in n for k in ("elementwise", "vectorized", "unrolled", "pointwise")):
        return "element-wise"
    return "other"


def decoder(policy, prompts, k, new_tokens, *, graph, shortcuts):
    ids, mask = left_pad(prompts, policy.tokenizer.pad_token_id, policy.device)
    out = policy.model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(1) - 1).clamp(min=0),
                       use_cache=True, logits_to_keep=1)
    cache = getattr(out, "cache", None) or out.past_key_values
    return StaticDecoder(policy.model, cache, mask, k, new_tokens, graph=graph, shortcuts=shortcuts)


@torch.no_grad()
def measure(policy, prompts, k, shortcuts: bool) -> dict:
    rows = len(prompts) * k
    token = torch.randint(0, 1000, (rows,), device=policy.device)
    step = decoder(policy, prompts, k, 64, graph=True, shortcuts=shortcuts)
    for _ in range(3):
        step(token)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(40):
        step(token)
    torch.cuda.synchronize()
    graph_ms = (time.perf_counter() - start) / 40 * 1e3
    del step
    eager = decoder(policy, prompts, k, 16, graph=False, shortcuts=shortcuts)
    for _ in range(3):
        eager(token)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(5):
        eager(token)
    torch.cuda.synchronize()
    eager_ms = (time.perf_counter() - start) / 5 * 1e3
    steps = 3
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            eager(token)
        torch.cuda.synchronize()
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_name: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            us = e.device_time_total
            by_kind[kind(e.name)][0] += us / steps
            by_kind[kind(e.name)][1] += 1 / steps
            by_name[e.name][0] += us / steps
            by_name[e.name][1] += 1 / steps
    del eager
    torch.cuda.empty_cache()
    return {
        "shortcuts": shortcuts, "graph_step_ms": round(graph_ms, 3), "eager_step_ms": round(eager_ms, 3),
        "kernel_ms": round(sum(v[0] for v in by_kind.values()) / 1e3, 3),
        "kernels": round(sum(v[1] for v in by_kind.values())),
        "by_kind": {k: {"ms": round(v[0] / 1e3, 3), "kernels": round(v[1])} for k, v in
                    sorted(by_kind.items(), key=lambda kv: -kv[1][0])},
        "top": [{"name": n[:90], "ms": round(v[0] / 1e3, 3), "kernels": round(v[1])} for n, v in
                sorted(by_name.items(), key=lambda kv: -kv[1][0])[:12]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--load-in-4bit", action="store_true")
    parser.add_argument("--states", type=int, default=4)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "decode_profile.json"))
    args = parser.parse_args()
    cfg = load_config(None, [f"model.base={args.model}", "model.device=cuda", "model.gradient_checkpointing=true",
                             f"model.load_in_4bit={str(args.load_in_4bit).lower()}"])
    policy = load_policy(cfg)
    generator = torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 40000, (args.prompt_tokens,), generator=generator).tolist()
               for _ in range(args.states)]
    results = [measure(policy, prompts, args.k, s) for s in (True, False)]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    for r in results:
        print(f"shortcuts={r['shortcuts']}: graph {r['graph_step_ms']} ms/step, eager {r['eager_step_ms']} ms/step, "
              f"{r['kernels']} kernels, {r['kernel_ms']} ms of kernel time")
        for k, v in r["by_kind"].items():
            print(f"   {k:16s} {v['ms']:8.3f} ms  {v['kernels']:6d} kernels")
        for t in r["top"]:
            print(f"     {t['ms']:8.3f} ms {t['kernels']:5d}  {t['name']}")


if __name__ == "__main__":
    main()

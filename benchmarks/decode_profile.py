"""Where a decode step's time goes on a GPU (issue #7): per decoder, against the bandwidth bound.

    python benchmarks/decode_profile.py --model random:qwen3-8b     # built in memory, no files
    python benchmarks/decode_profile.py --model /tmp/qwen3-8b [--load-in-4bit]
    python benchmarks/decode_profile.py --decoders fused fused-whole fused-rows   # issue 18's run

Builds the sampling setup of a GRPO step (states x K rows, prompts of --prompt-tokens random
tokens, LoRA r=16 on all linear layers as `searchgrpo train` attaches it, its B matrices set to
small random values so that the adapters take part), then for each decoder in --decoders
(`fused`, `graph`, `static`, or a `fused` variant: `fused-whole`, attention not split into
chunks of the cache; `fused-eager`, the element-wise work not compiled; `fused-rows`, not
compiled and each sample's row holding a copy of its prompt, which is `fused` as it was before
issue 18):

- `replay_ms`: one decode step replayed as a CUDA graph (mean of 40, the cache ~1,050 deep, laid
  out for --new-tokens as in `generate`: a shared cache's length depends on it);
- `generate_step_ms`: what `generate` spends per decode step, sampling included: generate
  --new-tokens tokens and one token, and divide the difference by new-tokens - 1;
- from torch.profiler over eager steps, GPU kernel time per step by kind (matmuls, attention,
  element-wise, copies, ...) and the number of kernels.

The bound: the bytes a step must read (every weight but the embedding table, and each row's KV
cache at the mean depth of a generation) over the bandwidth measured in the same run. A decoder
that shares a prompt's keys and values among its samples reads fewer bytes than that: the
prompt once per group. `bound_shared_step_ms` is the bound for that work (weights, each prompt's
KV once, each row's generated tokens' KV), reported beside it. Last, how
far each decoder's logits are from the same steps in float32 (`agreement`). Prints a table and
writes --out.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from device_bandwidth import bandwidth  # noqa: E402
from random_model import random_config  # noqa: E402

import searchgrpo.policy.sampling as sampling  # noqa: E402
from searchgrpo.config import load_config  # noqa: E402
from searchgrpo.policy.model import attach_lora, load_policy  # noqa: E402
from searchgrpo.policy.replayed_decoders import FusedDecoder, StaticDecoder  # noqa: E402
from searchgrpo.policy.sampling import generate, left_pad, next_tokens  # noqa: E402

VARIANTS = {
    "fused": {},
    "fused-whole": {"chunk": 0},
    "fused-eager": {"compile": False},
    "fused-rows": {"compile": False, "share_prefix": False},
}
"""`fused` and the variants measured beside it: FusedDecoder's keyword arguments."""


@contextlib.contextmanager
def variant(name: str) -> Any:
    """`generate(decoder="fused")` builds the FusedDecoder of variant `name` while this lasts."""
    saved = sampling.FusedDecoder
    if name in VARIANTS:
        sampling.FusedDecoder = functools.partial(FusedDecoder, **VARIANTS[name])
    try:
        yield "fused" if name in VARIANTS else name
    finally:
        sampling.FusedDecoder = saved


def kind(name: str) -> str:
    n = name.lower()
    if n.startswith("triton"):
        return "compiled (triton)"
    if any(k in n for k in ("gemm", "gemv", "cutlass", "sm90_", "cublas", "matmul", "splitk")):
        return "matmul"
    if any(k in n for k in ("softmax", "attention", "fmha", "flash", "attn")):
        return "attention"
    if any(k in n for k in ("reduce", "norm")):
        return "reduction/norm"
    if any(k in n for k in ("copy", "cat", "index", "gather", "scatter", "fill")):
        return "copy/index"
    if any(k in n for k in ("elementwise", "vectorized", "unrolled", "pointwise")):
        return "element-wise"
    return "other"


def policy_for(args: argparse.Namespace) -> Any:
    """Model + LoRA (+ a tokenizer stand-in for a random model), adapters made non-zero."""
    overrides = ["model.device=cuda", f"model.load_in_4bit={str(args.load_in_4bit).lower()}"]
    if args.model.startswith("random:"):
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)
        config = random_config(args.model.split(":", 1)[1], bos=1, eos=2, pad=0)
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        model = attach_lora(load_config(None, overrides).lora, model)
        model.config.use_cache = False
        tokenizer = SimpleNamespace(eos_token_id=2, pad_token_id=0, decode=lambda ids, **_: "")
        policy = SimpleNamespace(model=model, tokenizer=tokenizer, device=torch.device("cuda"))
    else:
        policy = load_policy(load_config(None, [f"model.base={args.model}", *overrides]))
    with torch.no_grad():
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.01)
    policy.model.eval()
    return policy


def decoder(policy: Any, prompts: list[list[int]], k: int, new_tokens: int, name: str, graph: bool) -> Any:
    ids, mask = left_pad(prompts, policy.tokenizer.pad_token_id, policy.device)
    out = policy.model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=(mask.cumsum(1) - 1).clamp(min=0),
        use_cache=True,
        logits_to_keep=1,
    )
    cache = getattr(out, "cache", None) or out.past_key_values
    if name in VARIANTS:
        return FusedDecoder(policy.model, cache, mask, k, new_tokens, graph=graph, **VARIANTS[name])
    return StaticDecoder(policy.model, cache, mask, k, new_tokens, graph=graph)


def timed(fn: Any, repeat: int, *args: Any) -> float:
    """Seconds per call of fn(*args), after the work queued before it has finished."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeat


@torch.no_grad()
def measure(policy: Any, prompts: list[list[int]], args: argparse.Namespace, name: str) -> dict:
    rows = len(prompts) * args.k
    token = torch.randint(0, 1000, (rows,), device=policy.device)
    step = decoder(policy, prompts, args.k, args.new_tokens, name, graph=True)
    for _ in range(3):
        step(token)
    replay_s = timed(step, 40, token)
    del step

    def run(n: int) -> Any:
        with variant(name) as chosen:
            return generate(
                policy.model,
                policy.tokenizer,
                prompts,
                num_samples=args.k,
                max_new_tokens=n,
                device=policy.device,
                seeds=list(range(len(prompts))),
                decoder=chosen,
            )

    run(2)
    short = min(timed(run, 1, 1) for _ in range(2))
    full = min(timed(run, 1, args.new_tokens) for _ in range(2))
    generate_step_s = (full - short) / (args.new_tokens - 1)

    eager = decoder(policy, prompts, args.k, args.new_tokens, name, graph=False)
    for _ in range(3):
        eager(token)
    eager_s = timed(eager, 5, token)
    steps = 3
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    ) as prof:
        for _ in range(steps):
            eager(token)
        torch.cuda.synchronize()
    del eager
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    by_name: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            for table, key in ((by_kind, kind(e.name)), (by_name, e.name)):
                table[key][0] += e.device_time_total / steps
                table[key][1] += 1 / steps
    torch.cuda.empty_cache()
    return {
        "decoder": name,
        "replay_ms": round(replay_s * 1e3, 3),
        "generate_step_ms": round(generate_step_s * 1e3, 3),
        "eager_step_ms": round(eager_s * 1e3, 3),
        "kernel_ms": round(sum(v[0] for v in by_kind.values()) / 1e3, 3),
        "kernels": round(sum(v[1] for v in by_kind.values())),
        "by_kind": {
            k: {"ms": round(v[0] / 1e3, 3), "kernels": round(v[1])}
            for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1][0])
        },
        "top": [
            {"name": n[:90], "ms": round(v[0] / 1e3, 3), "kernels": round(v[1])}
            for n, v in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:15]
        ],
    }


@torch.no_grad()
def agreement(policy: Any, prompts: list[list[int]], args: argparse.Namespace) -> dict:
    """Each decoder's logits after the same 4 tokens, against the model's own modules in float32.

    Casts the model to float32 (run it last): the reference is the static decoder on the float32
    model, so the numbers say how far each bf16 decoder's rounding takes it from exact logits.
    """
    rows = len(prompts) * args.k
    generator = torch.Generator(device=policy.device).manual_seed(0)
    tokens = [torch.randint(0, 1000, (rows,), device=policy.device, generator=generator) for _ in range(4)]

    def logits(name: str, graph: bool) -> torch.Tensor:
        step = decoder(policy, prompts, args.k, 8, name, graph=graph)
        out = torch.stack([step(t).float() for t in tokens])
        del step
        torch.cuda.empty_cache()
        return out

    got = {name: logits(name, True) for name in args.decoders}
    policy.model.float()
    ref = logits("static", False)
    out: dict[str, Any] = {"reference_max_abs": round(float(ref.abs().max()), 3)}
    for name, value in got.items():
        out[name] = {
            "max_abs_diff": round(float((value - ref).abs().max()), 4),
            "mean_abs_diff": round(float((value - ref).abs().mean()), 5),
            "argmax_agree": round(float((value.argmax(-1) == ref.argmax(-1)).float().mean()), 3),
        }
    return out


def sampling_ms(policy: Any, rows: int, groups: int) -> float:
    """One `next_tokens` call on [rows, vocab] bf16 logits, seeded per group as `generate` samples."""
    vocab = policy.model.get_output_embeddings().weight.shape[0]
    logits = torch.randn(rows, vocab, device=policy.device, dtype=torch.bfloat16)
    generators = [torch.Generator(device=policy.device).manual_seed(g) for g in range(groups)]
    for _ in range(3):
        next_tokens(logits, temperature=1.0, top_p=1.0, greedy=False, generators=generators)
    return round(
        timed(lambda: next_tokens(logits, temperature=1.0, top_p=1.0, greedy=False, generators=generators), 20) * 1e3, 3
    )


def bound(policy: Any, args: argparse.Namespace) -> dict:
    """Bytes a decode step must read, and the least time that takes at the measured bandwidth."""
    model = policy.model
    cfg = model.config.get_text_config()
    kv_token = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * cfg.head_dim * 2  # bf16 keys and values
    embed = model.get_input_embeddings().weight
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) - embed.numel() * embed.element_size()
    kv = args.states * args.k * (args.prompt_tokens + args.new_tokens / 2) * kv_token
    shared = (args.states * args.prompt_tokens + args.states * args.k * args.new_tokens / 2) * kv_token
    bw = bandwidth()
    return {
        "weight_gb": round(weights / 1e9, 3),
        "kv_gb_mean": round(kv / 1e9, 3),
        "kv_shared_gb_mean": round(shared / 1e9, 3),
        "bound_step_ms": round((weights + kv) / bw["best_bytes_per_s"] * 1e3, 3),
        "bound_shared_step_ms": round((weights + shared) / bw["best_bytes_per_s"] * 1e3, 3),
        **bw,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model", default="random:qwen3-8b", help="a model folder, or random:SHAPE (random_model.SHAPES)"
    )
    parser.add_argument("--load-in-4bit", action="store_true")
    parser.add_argument("--decoders", nargs="+", default=["fused", "graph"], choices=[*VARIANTS, "graph", "static"])
    parser.add_argument("--states", type=int, default=4)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=1024)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "decode_profile.json"))
    args = parser.parse_args()
    policy = policy_for(args)
    generator = torch.Generator().manual_seed(0)
    prompts = [
        torch.randint(100, 40000, (args.prompt_tokens,), generator=generator).tolist() for _ in range(args.states)
    ]
    limit = bound(policy, args)
    results = []
    for name in args.decoders:
        torch.cuda.reset_peak_memory_stats()
        results.append(measure(policy, prompts, args, name))
        results[-1]["peak_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 2)
    for r in results:
        for key in ("replay", "generate_step"):
            r[f"{key}_of_bound"] = round(limit["bound_step_ms"] / r[f"{key}_ms"], 3)
            r[f"{key}_of_shared_bound"] = round(limit["bound_shared_step_ms"] / r[f"{key}_ms"], 3)
    report = {
        "args": vars(args),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "bound": limit,
        "sampling_ms": sampling_ms(policy, args.states * args.k, args.states),
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    report["float32_agreement"] = agreement(policy, prompts, args)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(
        f"bound {limit['bound_step_ms']} ms ({limit['weight_gb']} GB weights + {limit['kv_gb_mean']} GB KV at "
        f"{limit['best_bytes_per_s'] / 1e9:.0f} GB/s; {limit['bound_shared_step_ms']} ms with the prompts' KV "
        f"read once per group: {limit['kv_shared_gb_mean']} GB); sampling {report['sampling_ms']} ms; "
        f"against float32: {report['float32_agreement']}"
    )
    for r in results:
        print(
            f"{r['decoder']}: replay {r['replay_ms']} ms ({r['replay_of_bound']:.0%} of the bound), generate "
            f"{r['generate_step_ms']} ms/step ({r['generate_step_of_bound']:.0%}; "
            f"{r['generate_step_of_shared_bound']:.0%} of the shared bound), eager {r['eager_step_ms']} ms, "
            f"{r['kernels']} kernels, {r['kernel_ms']} ms of kernel time, peak {r['peak_gb']} GB"
        )
        for k, v in r["by_kind"].items():
            print(f"   {k:16s} {v['ms']:8.3f} ms  {v['kernels']:6d} kernels")
        for t in r["top"]:
            print(f"     {t['ms']:8.3f} ms {t['kernels']:5d}  {t['name']}")


if __name__ == "__main__":
    main()

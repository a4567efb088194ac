"""Benchmark: does the sampling decoder change how long the GRPO loss phase takes after it?

    python benchmarks/loss_after_decode.py --tokenizer DIR --collect --profile      # H200: Qwen3-8B shape
    python benchmarks/loss_after_decode.py --tokenizer DIR --sequence fused:0 fused:1 fused:2 fused:3
    python benchmarks/loss_after_decode.py --tokenizer DIR --shape qwen3-tiny --device cpu \
        --decoders static fused --blocks 1 --steps 1                                # a CPU dry run

One process, one model (random weights of `--shape`, built in memory, LoRA attached as `searchgrpo
train` attaches it), the `Trainer`'s states and prompts (8 states x K=8, 128 new tokens, beta
0.04, gradient checkpointing: `benchmarks/scaling.py`'s 1-process run). It runs `grpo_step` in
blocks that alternate the decoders (by default graph, fused, graph, fused), each block on the same
step indices, so the two decoders' loss phases see the same prompts. Per step it records the
phase times, the reference pass's time, and right before the loss: `memory_allocated`,
`memory_reserved`, and over the loss the allocator's cudaMalloc / cudaFree / retry counts, and
the global attention and matmul settings. `--collect` adds blocks that run `gc.collect()` and
`torch.cuda.empty_cache()` between sampling and the loss. `--profile` adds one profiled step per
decoder (kernel time by name). `--sequence` runs exactly the listed steps instead (as a fresh
`searchgrpo train` run with one decoder: `fused:0 fused:1 fused:2 fused:3`). `--tokenizer` is a
folder with a tokenizer and a config.json (e.g. the converted SmolLM2 folder under
~/.cache/searchgrpo/models, without its weights). Writes --out (JSON), one line per step.

Results: benchmarks/results/loss_after_decode*.json and .txt; README, "Data parallelism: 1 GPU
against 2".
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def settings() -> dict[str, Any]:
    import torch

    b = torch.backends
    return {
        "flash": b.cuda.flash_sdp_enabled(),
        "mem_efficient": b.cuda.mem_efficient_sdp_enabled(),
        "math": b.cuda.math_sdp_enabled(),
        "cudnn_sdp": b.cuda.cudnn_sdp_enabled(),
        "cudnn": b.cudnn.enabled,
        "cudnn_benchmark": b.cudnn.benchmark,
        "matmul_precision": torch.get_float32_matmul_precision(),
        "grad": torch.is_grad_enabled(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", required=True, help="a folder with a tokenizer and a config.json")
    parser.add_argument("--shape", default="qwen3-8b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--decoders", nargs="+", default=["graph", "fused"])
    parser.add_argument("--blocks", type=int, default=2, help="times each decoder's block runs, alternating")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per block (indices 1..steps)")
    parser.add_argument("--states", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument(
        "--sequence",
        nargs="+",
        default=None,
        metavar="DECODER:INDEX",
        help="run exactly these steps, in this order, instead of the blocks (no warm-up added)",
    )
    parser.add_argument("--collect", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", default="loss_after_decode.json")
    args = parser.parse_args()

    import torch
    from random_model import random_config
    from transformers import AutoModelForCausalLM

    import searchgrpo.policy.model as sm
    import searchgrpo.train.rollouts as rollouts
    import searchgrpo.train.step as gs
    from searchgrpo.config import load_config
    from searchgrpo.seeding import derive_seed
    from searchgrpo.train.trainer import Trainer

    cuda = args.device.startswith("cuda")

    def random_base(cfg: Any, base: Any, device: Any, dtype: Any) -> Any:
        tok = sm.load_tokenizer(base.path)
        config = random_config(args.shape, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)
        torch.manual_seed(0)
        with torch.device(device):
            return AutoModelForCausalLM.from_config(
                config, dtype=dtype, attn_implementation=cfg.model.attn_implementation
            )

    sm.load_base_model = random_base
    overrides = [
        f"model.base={args.tokenizer}",
        f"model.device={args.device}",
        "model.gradient_checkpointing=true",
        "grpo.num_generations=8",
        f"grpo.max_new_tokens={args.max_new_tokens}",
        "grpo.beta=0.04",
        f"train.states_per_step={args.states}",
        "train.micro_batch_size=8",
        "train.max_steps=100",
        "train.eval_every=0",
        "train.save_every=0",
        "train.seed=0",
        "train.output_dir=/tmp/loss_after_decode",
        "grpo.dynamic_sampling=false",
    ]
    if not cuda:
        overrides.append("model.dtype=bfloat16")
    cfg = load_config(None, overrides)
    trainer = Trainer(cfg)
    start = time.perf_counter()
    trainer.setup()
    print(f"setup {time.perf_counter() - start:.1f} s", flush=True)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def mem() -> dict[str, Any]:
        if not cuda:
            return {}
        s = torch.cuda.memory_stats()
        return {
            "allocated_gb": round(torch.cuda.memory_allocated() / 1e9, 3),
            "reserved_gb": round(torch.cuda.memory_reserved() / 1e9, 3),
            "device_alloc": s.get("num_device_alloc", 0),
            "device_free": s.get("num_device_free", 0),
            "alloc_retries": s.get("num_alloc_retries", 0),
        }

    probe: dict[str, Any] = {}
    original_generate, original_frozen = rollouts.generate, gs._frozen_logprobs

    def generate(*a: Any, **kw: Any) -> Any:
        sync()
        probe["before_generate"] = mem()
        out = original_generate(*a, **kw)
        sync()
        probe["after_generate"] = mem()
        probe["gc_counts"] = [g["collections"] for g in gc.get_stats()]
        if probe.get("collect"):
            gc.set_debug(gc.DEBUG_SAVEALL)
            probe["gc_collected"] = gc.collect()
            kinds: dict[str, int] = {}
            tensors: dict[str, float] = {}
            for o in gc.garbage:
                kinds[type(o).__name__] = kinds.get(type(o).__name__, 0) + 1
                if isinstance(o, torch.Tensor):
                    key = f"{o.device.type} {tuple(o.shape)}"
                    tensors[key] = tensors.get(key, 0.0) + o.untyped_storage().nbytes() / 1e9
            probe["gc_kinds"] = dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:15])
            probe["gc_tensor_gb"] = dict(sorted(tensors.items(), key=lambda kv: -kv[1])[:10])
            gc.garbage.clear()
            gc.set_debug(0)
            gc.collect()
            probe["after_gc"] = mem()
            if cuda:
                torch.cuda.empty_cache()
            probe["after_empty_cache"] = mem()
        probe["settings"] = settings()
        return out

    def frozen(*a: Any, **kw: Any) -> Any:
        sync()
        t = time.perf_counter()
        out = original_frozen(*a, **kw)
        sync()
        probe["ref_s"] = round(time.perf_counter() - t, 3)
        return out

    rollouts.generate, gs._frozen_logprobs = generate, frozen
    records: list[dict[str, Any]] = []

    def step(decoder: str, index: int, label: str, *, collect: bool = False, profile: bool = False) -> None:
        probe.clear()
        probe["collect"] = collect
        c = dataclasses.replace(cfg, grpo=dataclasses.replace(cfg.grpo, decoder=decoder))
        _, states = trainer.states_for_step(index)
        prompts = [trainer.prompts(s) for s in states]
        torch.manual_seed(derive_seed(0, "step", index))
        sync()
        t = time.perf_counter()
        prof = None
        if profile:
            activity = torch.profiler.ProfilerActivity.CUDA if cuda else torch.profiler.ProfilerActivity.CPU
            prof = torch.profiler.profile(activities=[activity])
            prof.__enter__()
        by_id = {s.state_id: p for s, p in zip(states, prompts)}
        outcome = gs.grpo_step(
            c,
            trainer.policy,
            trainer.env,
            trainer.optimizer,
            trainer.scheduler,
            states,
            prompt_of=lambda s: by_id[s.state_id],
            seed_of=lambda s, r: derive_seed(0, "sample", index, s.state_id),
        )
        sync()
        wall = time.perf_counter() - t
        after = mem()
        m = outcome.metrics
        rec = {
            "label": label,
            "decoder": decoder,
            "index": index,
            "wall_s": round(wall, 3),
            "generate_s": round(m["time/generate"], 3),
            "score_s": round(m["time/score"], 3),
            "loss_s": round(m["time/loss"], 3),
            "ref_s": probe.get("ref_s"),
            "completion_tokens": int(m["tokens/completion"]),
            "prompt_tokens": int(m["tokens/prompt"]),
            "frac_zero_std": m["reward/frac_zero_std"],
            "before_generate": probe.get("before_generate"),
            "before_loss": probe.get("after_generate"),
            "after_step": after,
            "settings": probe.get("settings"),
            "gc_collections": probe.get("gc_counts"),
        }
        if collect:
            rec.update(
                gc_collected=probe.get("gc_collected"),
                gc_kinds=probe.get("gc_kinds"),
                gc_tensor_gb=probe.get("gc_tensor_gb"),
                after_gc=probe.get("after_gc"),
                after_empty_cache=probe.get("after_empty_cache"),
            )
        if cuda and probe.get("after_generate"):
            b = probe["after_empty_cache"] if collect else probe["after_generate"]
            rec["loss_device_allocs"] = after["device_alloc"] - b["device_alloc"]
            rec["loss_device_frees"] = after["device_free"] - b["device_free"]
            rec["loss_alloc_retries"] = after["alloc_retries"] - b["alloc_retries"]
            rec["peak_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 3)
            torch.cuda.reset_peak_memory_stats()
        if prof is not None:
            prof.__exit__(None, None, None)
            rows = sorted(prof.key_averages(), key=lambda e: -(e.device_time_total if cuda else e.cpu_time_total))[:15]
            rec["kernels_ms"] = {
                e.key[:90]: round((e.device_time_total if cuda else e.cpu_time_total) / 1e3, 1) for e in rows
            }
        records.append(rec)
        bl = rec["before_loss"] or {}
        print(
            f"{label:10s} {decoder:6s} idx {index}  step {wall:6.2f}  gen {rec['generate_s']:5.2f}  "
            f"loss {rec['loss_s']:6.3f}  ref {rec['ref_s']}  tokens {rec['completion_tokens']}/"
            f"{rec['prompt_tokens']}  alloc {bl.get('allocated_gb')} res {bl.get('reserved_gb')} GB  "
            f"mallocs {rec.get('loss_device_allocs')} frees {rec.get('loss_device_frees')} "
            f"retries {rec.get('loss_alloc_retries')} peak {rec.get('peak_gb')} gc {rec['gc_collections']}",
            flush=True,
        )
        if collect:
            print(
                f"           gc collected {rec['gc_collected']}: alloc {rec['after_gc'].get('allocated_gb')}, "
                f"after empty_cache res {rec['after_empty_cache'].get('reserved_gb')}; {rec['gc_kinds']}; "
                f"tensors {rec['gc_tensor_gb']}",
                flush=True,
            )
        if "kernels_ms" in rec:
            for k, v in rec["kernels_ms"].items():
                print(f"           {v:9.1f} ms  {k}", flush=True)
        Path(args.out).write_text(
            json.dumps({"args": vars(args), "torch": torch.__version__, "steps": records}, indent=1)
        )

    print("settings at start:", settings(), flush=True)
    if args.sequence:
        for entry in args.sequence:
            decoder, index = entry.split(":")
            step(decoder, int(index), "sequence")
        print(f"written to {args.out}")
        return
    warm: set[str] = set()
    for block in range(args.blocks):
        for decoder in args.decoders:
            if decoder not in warm:  # a warm-up step before a decoder's first block: first-call costs
                step(decoder, 0, "warmup")
                warm.add(decoder)
            for index in range(1, args.steps + 1):
                step(decoder, index, f"block{block + 1}")
    if args.collect:
        for decoder in args.decoders:
            for index in range(1, args.steps + 1):
                step(decoder, index, "collect", collect=True)
    if args.profile:
        for decoder in args.decoders:
            step(decoder, 1, "profile", profile=True)
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

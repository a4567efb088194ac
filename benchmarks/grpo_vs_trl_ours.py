"""grpo_vs_trl.py's searchgrpo side: one run of our GRPO step on a Spec, timed per phase, with its
health per step and, on request, its decode speed against the memory-bandwidth bound."""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

BENCHMARKS = str(Path(__file__).resolve().parent)
if BENCHMARKS not in sys.path:  # siblings are imported by bare name, however this module was imported
    sys.path.insert(0, BENCHMARKS)

from device_bandwidth import bandwidth  # noqa: E402
from grpo_vs_trl_spec import Outcome, Spec, base_overrides, memory, sync, workload  # noqa: E402


def run_ours(spec: Spec) -> Outcome:
    import torch
    from trainer_health import adapter_finite, logits_finite
    from transformers import get_scheduler

    from searchgrpo.config import load_config
    from searchgrpo.policy.model import load_policy
    from searchgrpo.seeding import derive_seed
    from searchgrpo.train.step import grpo_step
    from searchgrpo.world import make_env

    cfg = load_config(None, base_overrides(spec))
    policy = load_policy(cfg)
    ds, states, prompts = workload(spec, cfg, policy.tokenizer)
    env = make_env(cfg, ds)
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=spec.lr, weight_decay=0.0)
    scheduler = get_scheduler("constant", optimizer)
    out = Outcome(asdict(spec), prompt_lengths=[len(p) for p in prompts[0]])
    out.start_finite = logits_finite(policy.model, prompts[0][0], policy.device)
    if spec.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    for i, (chunk, ids) in enumerate(zip(states, prompts)):
        torch.manual_seed(derive_seed(0, "step", i))
        sync(spec.device)
        start = time.perf_counter()
        by_id = {s.state_id: p for s, p in zip(chunk, ids)}
        result = grpo_step(
            cfg,
            policy,
            env,
            optimizer,
            scheduler,
            chunk,
            prompt_of=lambda s, by_id=by_id: by_id[s.state_id],
            seed_of=lambda s, r, i=i: derive_seed(0, "sample", i, s.state_id),
        )
        sync(spec.device)
        m = result.metrics
        # Ours skips a non-finite update (the adapter stays finite): recorded, so that a broken model
        # cannot pass for a fast one.
        out.health.append(
            {
                "step": i + 1,
                "grad_norm": m["grad/norm"],
                "loss": m["loss/total"],
                "skipped": bool(m["train/nonfinite_skipped"]),
                "reward": m["reward/mean"],
                "adapter_finite": adapter_finite(policy.model),
            }
        )
        if i < spec.warmup:
            continue
        out.step_s.append(time.perf_counter() - start)
        out.completion_tokens.append(int(m["tokens/completion"]))
        out.generate_s.append(m["time/generate"])
        out.score_s.append(m["time/score"])
        out.loss_s.append(m["time/loss"])
        out.frac_zero_std.append(m["reward/frac_zero_std"])
    memory(out, spec.device)
    if spec.decode_probe:
        out.decode = decode_probe(policy, prompts[-1], spec)
    return out


def decode_probe(policy: Any, prompts: list[list[int]], spec: Spec) -> dict[str, float]:
    """Decode speed against the memory-bandwidth bound: generate with 1 and with max_new_tokens
    tokens; the difference over (max_new_tokens - 1) is the time of one decode step (every row of
    the random model runs to max_new_tokens)."""
    from searchgrpo.policy.sampling import generate

    model, tok = policy.model, policy.tokenizer

    def timed(n: int) -> tuple[float, int]:
        times, produced = [], 0
        for r in range(2):
            sync(spec.device)
            start = time.perf_counter()
            groups = generate(
                model,
                tok,
                prompts,
                num_samples=spec.k,
                max_new_tokens=n,
                device=policy.device,
                seeds=[r] * len(prompts),
                decoder=spec.decoder,
            )
            sync(spec.device)
            times.append(time.perf_counter() - start)
            produced = min(len(c.token_ids) for g in groups for c in g)
        return min(times), produced

    prefill_s, _ = timed(1)
    full_s, produced = timed(spec.max_new_tokens)
    steps = produced - 1
    rows = len(prompts) * spec.k
    per_step = (full_s - prefill_s) / max(steps, 1)
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    kv_token = cfg.num_hidden_layers * 2 * cfg.num_key_value_heads * head_dim * 2  # bf16 keys and values
    embed = model.get_input_embeddings().weight
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) - embed.numel() * embed.element_size()
    mean_len = sum(len(p) for p in prompts) / len(prompts) + produced / 2
    kv = rows * mean_len * kv_token
    out = {
        "rows": rows,
        "decode_steps": steps,
        "prefill_s": round(prefill_s, 4),
        "generate_s": round(full_s, 4),
        "decode_step_ms": round(per_step * 1e3, 3),
        "decode_tokens_per_s": round(rows / per_step, 1),
        "weight_gb": round(weights / 1e9, 3),
        "kv_gb_mean": round(kv / 1e9, 3),
    }
    if spec.device.startswith("cuda"):
        bw = bandwidth()
        bound_s = (weights + kv) / bw["best_bytes_per_s"]
        out.update(bound_step_ms=round(bound_s * 1e3, 3), fraction_of_bound=round(bound_s / per_step, 3), **bw)
    return out

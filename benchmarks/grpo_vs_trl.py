"""Benchmark: one searchgrpo GRPO step against TRL's GRPOTrainer on the same work (issue #7, parts 1 and 3).

    python benchmarks/grpo_vs_trl.py --preset cpu     # SmolLM2-135M and the tiny model, beta 0 and 0.04
    python benchmarks/grpo_vs_trl.py --preset h200    # a Qwen3-8B-shaped random model on one GPU
    python benchmarks/grpo_vs_trl.py --preset quick   # the tiny model, a few steps: a smoke test

"The same work" for both trainers: the same base model and LoRA (peft, same rank, alpha, targets);
the same prompts, token for token (real Executor states of the demo world, rendered with our chat
template; TRL receives our prompt ids); the same K (`num_generations`), completion length,
temperature, top-p, `beta` with the same KL estimator (k3), loss aggregation (`grpo`: mean over a
sequence's tokens, then over sequences), group reward scaling, clip range, learning rate, and the
same reward function (`SearchRoundEnv.score_group`: BM25 + checker + reward, wrapped as a TRL
reward function). One step = one optimiser update on `states` states x K completions.

TRL is configured as fast as it allows here (no vLLM on these machines): generation batched over
the whole step (`generation_batch_size` = states x K), one optimiser step per generation, no
completion logging, logging only as TRL needs it, `shuffle_dataset=False`, the reference taken by
disabling the adapter (no second model), the same micro-batch size as ours.

Every run (trainer x model x beta x precision) is a fresh subprocess, so that memory peaks and
failures stay apart; on CPU the two trainers alternate, `--rounds` times, and the table gives
medians. Each run does `--warmup` steps that are not timed, then `--steps` timed steps. Results:
a table, and benchmarks/results/grpo_vs_trl_<preset>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"


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


# ----------------------------------------------------------------------------- shared set-up


def base_overrides(spec: Spec) -> list[str]:
    return [
        f"model.base={spec.model}",
        f"model.device={spec.device}",
        f"model.gradient_checkpointing={str(spec.gradient_checkpointing).lower()}",
        f"model.load_in_4bit={str(spec.load_in_4bit).lower()}",
        f"lora.r={spec.lora_r}",
        f"lora.alpha={spec.lora_alpha}",
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


def long_prompt(tokenizer: Any, state: Any, others: list[Any], n: int, cfg: Any) -> list[int]:
    """Exactly n prompt tokens from a real state: its tables extended with other states' rows until
    the rendered prompt is longer than n, then cut in the middle as `encode_prompt` cuts."""
    from searchgrpo.policy.sampling import encode_prompt

    before = state.before
    documents, context = list(before.documents), list(before.context)
    ids: list[int] = []
    for other in [None, *others]:
        if other is not None:
            documents += list(other.before.documents)
            context += list(other.before.context)
            state = dataclasses.replace(
                state, before=dataclasses.replace(before, documents=tuple(documents), context=tuple(context))
            )
        ids = encode_prompt(
            tokenizer, state, max_rows=10**6, max_tokens=10**9, min_clues=cfg.env.min_clues, max_clues=cfg.env.max_clues
        )
        if len(ids) >= n:
            break
    if len(ids) < n:
        raise ValueError(f"could not build a {n}-token prompt")
    head = n // 2
    return ids[:head] + ids[len(ids) - (n - head) :]


def workload(spec: Spec, cfg: Any, tokenizer: Any) -> tuple[Any, list[list[Any]], list[list[list[int]]]]:
    """(dataset, states per step, prompt ids per step) for warmup + steps steps."""
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


# ----------------------------------------------------------------------------- ours


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


def bandwidth() -> dict[str, float]:
    """Measured device bandwidth: a 4 GiB device-to-device copy (bytes read + written) and a read."""
    import torch

    a = torch.randn(2**31, dtype=torch.bfloat16, device="cuda")
    b = torch.empty_like(a)
    size = a.numel() * a.element_size()

    def best(fn: Any) -> float:
        for _ in range(3):
            fn()
        times = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) / 1e3)
        return statistics.median(times)

    copy = 2 * size / best(lambda: b.copy_(a))
    read = size / best(lambda: a.sum(dtype=torch.float32))
    a = b = torch.empty(0)
    torch.cuda.empty_cache()
    return {
        "copy_gb_per_s": round(copy / 1e9, 1),
        "read_gb_per_s": round(read / 1e9, 1),
        "best_bytes_per_s": max(copy, read),
    }


# ----------------------------------------------------------------------------- TRL


def run_trl(spec: Spec) -> Outcome:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trainer_health import adapter_finite, diagnose, first_bad_step, grad_norm, logits_finite
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from searchgrpo.config import load_config
    from searchgrpo.policy.model import load_tokenizer, resolve_base
    from searchgrpo.world import make_env

    cfg = load_config(None, base_overrides(spec))
    base = resolve_base(cfg)
    tokenizer = load_tokenizer(base.path)
    ds, states, prompts = workload(spec, cfg, tokenizer)
    env = make_env(cfg, ds)
    cuda = spec.device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    kwargs: dict[str, Any] = {"dtype": dtype, "attn_implementation": "sdpa"}
    if spec.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=dtype, bnb_4bit_use_double_quant=True
        )
        kwargs["device_map"] = {"": 0}
    model = AutoModelForCausalLM.from_pretrained(str(base.path), **kwargs)
    if not spec.load_in_4bit:
        model.to(spec.device)

    texts: dict[str, list[int]] = {}
    rows = []
    by_id = {}
    for chunk, ids in zip(states, prompts):
        for s, p in zip(chunk, ids):
            text = tokenizer.decode(p)
            texts.setdefault(text, p)
            by_id[s.state_id] = s
            rows.append({"prompt": text, "state_id": s.state_id})
    tally = {"tokens": 0, "score_s": 0.0}

    def searchgrpo_reward(
        prompts: list[str], completions: list[str], completion_ids: list[list[int]], state_id: list[str], **_: Any
    ) -> list[float]:
        start = time.perf_counter()
        order: dict[str, list[int]] = {}
        for i, sid in enumerate(state_id):
            order.setdefault(sid, []).append(i)
        rewards = [0.0] * len(completions)
        for sid, idx in order.items():
            for i, r in zip(idx, env.score_group(by_id[sid], [completions[i] for i in idx])):
                rewards[i] = r.reward.total
        tally["tokens"] += sum(len(c) for c in completion_ids)
        tally["score_s"] += time.perf_counter() - start
        return rewards

    class SameTokens(GRPOTrainer):
        """TRL, given our prompt token ids instead of re-tokenising their text."""

        def _tokenize_prompts(self, prompts: list) -> tuple[list[list[int]], None, dict]:
            return [texts[p] for p in prompts], None, {}

    out = Outcome(asdict(spec), prompt_lengths=[len(p) for p in prompts[0]])
    marks: list[float] = []
    phase = {"generate_s": 0.0}
    snapshots: list[tuple[float, float, int]] = []

    class Clock(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            sync(spec.device)
            marks.append(time.perf_counter())

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            out.health.append({"step": state.global_step + 1, "grad_norm": grad_norm(trainer.model)})  # clipped

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            sync(spec.device)
            marks.append(time.perf_counter())
            snapshots.append((phase["generate_s"], tally["score_s"], tally["tokens"]))
            if out.health:
                out.health[-1]["adapter_finite"] = adapter_finite(trainer.model)

    per_step = spec.states * spec.k
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-bench-"),
        per_device_train_batch_size=spec.micro_batch,
        gradient_accumulation_steps=per_step // spec.micro_batch,
        num_generations=spec.k,
        max_completion_length=spec.max_new_tokens,
        temperature=cfg.grpo.temperature,
        top_p=cfg.grpo.top_p,
        beta=spec.beta,
        loss_type="grpo",
        scale_rewards="group",
        epsilon=cfg.grpo.epsilon,
        num_iterations=1,
        learning_rate=spec.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=cfg.train.max_grad_norm,
        max_steps=spec.warmup + spec.steps,
        logging_steps=10**6,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        shuffle_dataset=False,
        remove_unused_columns=False,
        log_completions=False,
        use_cpu=not cuda,
        bf16=cuda,
        gradient_checkpointing=spec.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        dataloader_num_workers=0,
        seed=0,
    )
    peft_config = LoraConfig(
        r=spec.lora_r,
        lora_alpha=spec.lora_alpha,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
        bias="none",
    )
    trainer = SameTokens(
        model=model,
        reward_funcs=searchgrpo_reward,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[Clock()],
    )
    generate_one = trainer._generate_single_turn

    def timed_generate(*a: Any, **kw: Any) -> Any:
        sync(spec.device)
        start = time.perf_counter()
        result = generate_one(*a, **kw)
        sync(spec.device)
        phase["generate_s"] += time.perf_counter() - start
        return result

    trainer._generate_single_turn = timed_generate
    first_prompt = prompts[0][0]
    out.start_finite = logits_finite(trainer.model, first_prompt, trainer.model.device)
    try:
        trainer.train()
    except Exception as exc:  # kept with its diagnosis: the run's result says where the values went bad
        import traceback

        out.error = f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exc().splitlines(True)[-12:])
        out.diagnosis = diagnose(trainer.model, first_prompt, trainer.model.device)
        out.diagnosis["first_nonfinite_update"] = first_bad_step(out.health)
        return out
    previous = (0.0, 0.0, 0)
    for i, (t0, t1, snap) in enumerate(zip(marks, marks[1:], snapshots)):
        gen, score, tokens = snap[0] - previous[0], snap[1] - previous[1], snap[2] - previous[2]
        previous = snap
        if i < spec.warmup:
            continue
        out.step_s.append(t1 - t0)
        out.completion_tokens.append(tokens)
        out.generate_s.append(gen)
        out.score_s.append(score)
        out.loss_s.append(t1 - t0 - gen - score)
    memory(out, spec.device)
    return out


# ----------------------------------------------------------------------------- driver


def run_one(spec: Spec) -> Outcome:
    if spec.threads:
        import torch

        torch.set_num_threads(spec.threads)
    return run_ours(spec) if spec.trainer == "ours" else run_trl(spec)


def spawn(spec: Spec, log: Path | None) -> Outcome:
    """Run `spec` in a fresh interpreter; a failure becomes an Outcome with `error`."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        result_path = Path(fh.name)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--run-one",
        json.dumps(asdict(spec)),
        "--result",
        str(result_path),
    ]
    print(
        f"  {spec.trainer:4s} {Path(spec.model).name} beta={spec.beta} 4bit={spec.load_in_4bit} ...", end="", flush=True
    )
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log is not None:
        with log.open("a") as fh:
            fh.write(f"\n===== {' '.join(cmd[3:4])}\n{proc.stdout}")
    if proc.returncode != 0 or not result_path.exists() or result_path.stat().st_size == 0:
        tail = proc.stdout.strip().splitlines()[-3:]
        print(f" FAILED ({time.perf_counter() - start:.0f} s): {' | '.join(tail)}", flush=True)
        return Outcome(asdict(spec), error="\n".join(proc.stdout.strip().splitlines()[-30:]))
    out = Outcome(**json.loads(result_path.read_text()))
    result_path.unlink()
    took = time.perf_counter() - start
    if out.error:  # the run ended early but kept what it knew (TRL: its health and a diagnosis)
        print(f" FAILED ({took:.0f} s): {out.error.splitlines()[0][:200]}; diagnosis {out.diagnosis}", flush=True)
        return out
    skipped = [h["step"] for h in out.health if h.get("skipped") or h.get("adapter_finite") is False]
    warn = f"; NON-FINITE updates at steps {skipped}" if skipped else ""
    print(f" {statistics.median(out.step_s):.2f} s/step ({took:.0f} s){warn}", flush=True)
    return out


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarise(outs: list[Outcome]) -> dict[str, Any]:
    ok = [o for o in outs if not o.error and o.step_s]
    steps = [s for o in ok for s in o.step_s]
    tokens = [t / s for o in ok for t, s in zip(o.completion_tokens, o.step_s)]
    row: dict[str, Any] = {
        "runs": len(ok),
        "failed": len(outs) - len(ok),
        "s_per_step": round(med(steps), 3),
        "s_per_step_by_run": [round(med(o.step_s), 3) for o in ok],
        "completion_tokens_per_s": round(med(tokens), 1),
        "completion_tokens_per_step": round(med([t for o in ok for t in o.completion_tokens]), 1),
        "generate_s": round(med([x for o in ok for x in o.generate_s]), 3),
        "score_s": round(med([x for o in ok for x in o.score_s]), 3),
        "loss_s": round(med([x for o in ok for x in o.loss_s]), 3),
        "frac_zero_std": round(med([x for o in ok for x in o.frac_zero_std]), 3)
        if ok and ok[0].frac_zero_std
        else None,
        "peak_gb": max((o.peak_gb for o in ok if o.peak_gb is not None), default=None),
        "prompt_tokens": ok[0].prompt_lengths if ok else None,
        # A time is a measurement only when the run's numbers were finite (trainer_health.py).
        "start_finite": [o.start_finite for o in outs],
        "nonfinite_updates": sum(
            1 for o in outs for h in o.health if h.get("skipped") or h.get("adapter_finite") is False
        ),
    }
    decode = [o.decode for o in ok if o.decode]
    if decode:
        row["decode"] = decode[0]
    if len(ok) < len(outs):
        row["errors"] = [o.error for o in outs if o.error]
        row["diagnoses"] = [o.diagnosis for o in outs if o.diagnosis]
    return row


SHAPES = {
    "qwen3-8b": dict(
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
    ),
    "qwen3-1.7b": dict(
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
    ),
    "qwen3-tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
    ),
}


def random_config(shape: str, bos: int | None, eos: int | None, pad: int | None) -> Any:
    """The `Qwen3Config` of a model shape in SHAPES (Qwen3's vocabulary and rotary settings)."""
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=151936,
        max_position_embeddings=40960,
        rope_theta=1000000.0,
        tie_word_embeddings=False,
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=pad,
        **SHAPES[shape],
    )


def make_random_model(target: Path, tokenizer_dir: Path, shape: str) -> Path:
    """A Qwen3-shaped model with random weights (no download) and our tokenizer, saved once."""
    if (target / "config.json").is_file():
        return target
    import shutil

    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    from searchgrpo.policy.model import load_tokenizer

    tok = load_tokenizer(tokenizer_dir)
    config = random_config(shape, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id
    )
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    del model
    tmp.rename(target)
    return target


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
        common = dict(
            device=args.device or "cuda",
            states=4,
            k=8,
            max_new_tokens=128,
            micro_batch=8,
            prompt_tokens=1024,
            gradient_checkpointing=True,
            warmup=1,
            steps=args.steps or 3,
        )
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


def write(path: Path, meta: dict[str, Any], results: dict[str, dict[str, list[Outcome]]]) -> list[dict[str, Any]]:
    table = []
    for label, by_trainer in results.items():
        if not by_trainer:
            continue
        row = {"workload": label, **{t: summarise(o) for t, o in by_trainer.items()}}
        if "ours" in row and "trl" in row and row["ours"]["runs"] and row["trl"]["runs"]:
            row["speedup"] = round(row["trl"]["s_per_step"] / row["ours"]["s_per_step"], 2)
            row["tokens_per_s_ratio"] = round(
                row["ours"]["completion_tokens_per_s"] / row["trl"]["completion_tokens_per_s"], 2
            )
        table.append(row)
    path.write_text(json.dumps({"meta": meta, "results": table}, indent=1))
    return table


def metadata(preset: str, rounds: int, loads: list[Any]) -> dict[str, Any]:
    import importlib.metadata

    import torch

    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "preset": preset,
        "rounds": rounds,
        "python": platform.python_version(),
        "torch": torch.__version__,
        # Every package either trainer's numbers depend on: a fresh machine resolves the unpinned ones anew.
        **{name: version(name) for name in ("transformers", "trl", "peft", "accelerate", "datasets", "bitsandbytes")},
        "triton": version("triton") or version("pytorch-triton"),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": loads,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="cpu", help="cpu | quick | h200 | h200-quick")
    parser.add_argument("--rounds", type=int, default=None, help="alternations of the two trainers (cpu: 3)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per run")
    parser.add_argument("--threads", type=int, default=None, help="torch threads on CPU")
    parser.add_argument("--device", default=None, help="h200 presets: run them on this device instead (a dry run)")
    parser.add_argument("--betas", type=float, nargs="+", default=[0.04, 0.0])
    parser.add_argument("--trainers", nargs="+", default=["ours", "trl"], help="run only these trainers")
    parser.add_argument("--four-bit", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--trl-four-bit", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--dynamic",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="h200: also time our decode on transformers' dynamic cache",
    )
    parser.add_argument("--model-dir", default=tempfile.gettempdir(), help="where the random model is saved")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder for the random model (default: SmolLM2's)")
    parser.add_argument("--out", default=None, help="JSON path (default benchmarks/results/grpo_vs_trl_<preset>.json)")
    parser.add_argument("--log", default=None, help="append every run's output to this file")
    parser.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.run_one:
        out = run_one(Spec(**json.loads(args.run_one)))
        Path(args.result).write_text(json.dumps(asdict(out)))
        return

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.tokenizer is None and args.preset.startswith("h200"):
        from searchgrpo.config import load_config
        from searchgrpo.policy.model import resolve_base

        args.tokenizer = str(resolve_base(load_config(None, [])).path)
    from searchgrpo.config import load_config
    from searchgrpo.world import load_dataset

    load_dataset(load_config(None, []))  # build the demo world once, before the runs share it
    rounds = args.rounds or (3 if args.preset == "cpu" else 1)
    groups = [(label, [s for s in specs if s.trainer in args.trainers]) for label, specs in presets(args.preset, args)]
    groups = [(label, specs) for label, specs in groups if specs]
    log = Path(args.log) if args.log else None
    results: dict[str, dict[str, list[Outcome]]] = {label: {} for label, _ in groups}
    loads = [load_average()]
    meta = metadata(args.preset, rounds, loads)
    path = Path(args.out) if args.out else RESULTS / f"grpo_vs_trl_{args.preset}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    for r in range(rounds):
        print(f"round {r + 1}/{rounds} (load average {load_average()})", flush=True)
        for label, specs in groups:
            print(f" {label}", flush=True)
            for spec in specs:
                outcome = spawn(spec, log)
                # On CUDA, should a decoder fail (a graph capture, say), fall back to the next one.
                fallbacks = ["static", "dynamic"] if spec.trainer == "ours" and spec.decoder == "auto" else []
                while outcome.error and fallbacks and spec.device.startswith("cuda"):
                    spec = dataclasses.replace(spec, decoder=fallbacks.pop(0))
                    retry = spawn(spec, log)
                    retry.spec["fallback_from"] = outcome.error[-500:]
                    outcome = retry
                results[label].setdefault(spec.trainer, []).append(outcome)
                write(path, meta, results)  # what has run so far survives an interruption
        loads.append(load_average())
    table = write(path, meta, results)

    print(
        f"\n{'workload':34s} {'trainer':6s} {'s/step':>8s} {'tok/s':>8s} {'gen s':>7s} {'score s':>8s} "
        f"{'loss s':>7s} {'peak GB':>8s}"
    )
    for row in table:
        for t in ("ours", "trl"):
            if t not in row:
                continue
            r = row[t]
            print(
                f"{row['workload']:34s} {t:6s} {r['s_per_step']:8.3f} {r['completion_tokens_per_s']:8.1f} "
                f"{r['generate_s']:7.3f} {r['score_s']:8.3f} {r['loss_s']:7.3f} {r['peak_gb']!s:>8s}"
            )
        if "speedup" in row:
            print(
                f"{'':34s} ratio: TRL s/step / ours = {row['speedup']}x, tokens/s ours / TRL = "
                f"{row['tokens_per_s_ratio']}x"
            )
        decode = row.get("ours", {}).get("decode")
        if decode and "bound_step_ms" in decode:
            print(
                f"{'':34s} decode: {decode['decode_tokens_per_s']} tok/s, {decode['decode_step_ms']} ms/step, "
                f"bound {decode['bound_step_ms']} ms ({decode['weight_gb']} GB weights + {decode['kv_gb_mean']} GB KV"
                f" at {decode['best_bytes_per_s'] / 1e9:.0f} GB/s): {decode['fraction_of_bound']:.0%} of the bound"
            )
    print(f"\nload average: {loads}\nwritten to {path}")


if __name__ == "__main__":
    main()

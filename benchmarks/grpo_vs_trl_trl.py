"""grpo_vs_trl.py's TRL side: one run of TRL's GRPOTrainer on a Spec, on our prompt ids and reward,
timed per phase, with its health per step and a diagnosis should it fail."""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

BENCHMARKS = str(Path(__file__).resolve().parent)
if BENCHMARKS not in sys.path:  # siblings are imported by bare name, however this module was imported
    sys.path.insert(0, BENCHMARKS)

from grpo_vs_trl_spec import Outcome, Spec, base_overrides, memory, sync, workload  # noqa: E402


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

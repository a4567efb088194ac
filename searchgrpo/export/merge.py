"""`searchgrpo merge`: LoRA checkpoints merged into full models that transformers and vLLM load.

For each checkpoint: load the base unquantised on the CPU (never 4-bit: merging into 4-bit weights
is lossy), in the output dtype (16-bit by default), attach the adapter in float32, and record a
reference: log-probs of a probe batch and greedy clues on a few states. Then merge
(W + scale * B @ A, computed in float32 and rounded once to the output dtype), save safetensors,
config, generation config and tokenizer into a temporary folder, reload that folder with
`AutoModelForCausalLM.from_pretrained`, and check parity against the reference. Only a folder that
passes is renamed to `{output_dir}/{base_name}-grpo-step{N}/`; a failure deletes it and says why,
so an interrupted or failed merge never leaves a folder that looks complete.

Each merged folder also holds the prompt its checkpoint was trained with (`prompt_template.jinja`
and `prompt.json`, also under "prompt" in `searchgrpo_merge.json`; see `export.merged_prompt`), so
the model is served with the prompt it learned on.

Before any weight loads, `run_merge` checks the output folder (it must be a folder this process can
write: not a file, not on a read-only file system), removes the temporaries of merges that were
killed (their writer's pid is gone), and checks that each adapter fits the base: every adapted
layer exists in the base with the shapes its LoRA matrices need, read from the safetensors
headers alone (`policy.model_files.adapter_fit`, which eval uses too).

Parity tolerances (log-probs of the probe completion tokens, float32 compute): the merged model
may differ from base + adapter only by rounding W + BA to the output dtype. Allowed: max |delta|
of 1e-3 (float32), 0.05 (float16) or 0.25 (bfloat16), mean |delta| a tenth of that. On
SmolLM2-135M with a strongly perturbed adapter the measured max |delta| was 2.4e-2 in bfloat16 and
4.4e-3 in float16 (9.5e-6 in float32). Greedy clues must be identical, except where the
reference's own top-two margin at the first differing token is within the max tolerance (a near
tie that rounding may flip), which is reported, not failed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgrpo.config import Config
from searchgrpo.env.prompt_record import write_prompt_record
from searchgrpo.env.prompt_template import load_template
from searchgrpo.errors import UserError
from searchgrpo.events import EventSink, LogMessage, MergeFinished, MergeProgress, MergeStarted
from searchgrpo.export.merged_prompt import MergePrompt, merge_prompt
from searchgrpo.fileio import OutputKind, atomic_dir, claim_output, remove_stale_temporaries
from searchgrpo.policy.model_files import adapter_fit, load_pretrained_checked
from searchgrpo.train.checkpoints import STATE_FILE, checkpoint_adapter, list_checkpoints

TOLERANCE = {"float32": 1e-3, "float16": 0.05, "bfloat16": 0.25}
"""Max |delta log-prob| allowed per probe token, by output dtype (mean: a tenth of it)."""
PROBE_STATES = 3
PROBE_NEW_TOKENS = 24
STAGES = ("load", "reference", "merge", "save", "parity")
MERGE_INFO = "searchgrpo_merge.json"
"""Written into every merged model folder: how it was merged and its parity figures."""
MERGED_MODEL = OutputKind("merged model folder", "--output-dir", folder=True, ours=lambda p: (p / MERGE_INFO).is_file())
"""A merged model folder: one of ours is replaced only with --overwrite; any other folder never."""
MERGED_MODELS_ROOT = OutputKind(
    "folder for merged models", "--output-dir", folder=True, ours=lambda p: True, reused=True
)
"""The folder the merged models go into (it may hold anything else: only our own folders in it are replaced)."""


class OutputExists(UserError):
    """Merged folders already exist; `paths` names them. Pass overwrite=True to replace them."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)
        super().__init__(
            f"{self.paths[0]} already exists{' (and ' + str(len(paths) - 1) + ' more)' if len(paths) > 1 else ''}; "
            "pass --overwrite to replace it"
        )


class ParityError(UserError):
    """The merged model does not reproduce base + adapter."""


@dataclass(frozen=True)
class MergeRequest:
    """What to merge and where: the one request type of `searchgrpo merge` and the console's Merge tab."""

    checkpoints: list[str] = field(default_factory=list)
    """Checkpoint folders (`runs/<id>/checkpoints/step-N`); empty: every checkpoint of run_dir."""
    output_dir: str = "merged"
    """Where the `{base_name}-grpo-step{N}/` folders go."""
    overwrite: bool = False
    """Replace merged model folders of ours that are already there (never any other folder)."""
    run_dir: str | None = None
    """The run whose checkpoints are discovered when `checkpoints` is empty (default: the newest run)."""
    device: str = "cpu"
    """Where to merge; the CPU avoids running out of GPU memory on large models."""
    dtype: str = "bfloat16"
    """Output dtype: bfloat16 or float16 (16-bit, as vLLM serves), or float32."""


@dataclass(frozen=True)
class MergeJob:
    checkpoint: Path
    step: int
    output: Path


def _step_of(path: Path) -> int:
    state = path / STATE_FILE
    if state.is_file():
        try:
            return int(json.loads(state.read_text())["step"])
        except (ValueError, KeyError, TypeError, OverflowError):  # OverflowError: "step": 1e999
            pass
    m = re.search(r"(\d+)$", path.name)
    if not m:
        raise UserError(f"{path}: cannot tell the step of this checkpoint (no trainer_state.json, no step-N name)")
    return int(m.group(1))


def plan(cfg: Config, request: MergeRequest, base_name: str) -> list[MergeJob]:
    """The checkpoints to merge and their output folders; refuses existing outputs unless overwrite."""
    if request.dtype not in TOLERANCE:
        raise UserError(f"--dtype {request.dtype}: expected one of {', '.join(TOLERANCE)}")
    if request.checkpoints:
        paths = [Path(p) for p in request.checkpoints]
    else:
        if not request.run_dir:
            raise UserError("nothing to merge: give --checkpoint or --run-dir")
        run_dir = Path(request.run_dir)
        paths = [c.path for c in list_checkpoints(run_dir)]
        if not paths:
            raise UserError(f"{run_dir}: no complete checkpoints to merge")
    jobs = []
    for p in paths:
        checkpoint_adapter(p, cfg.model.base, flag="merge")
        step = _step_of(p)
        jobs.append(MergeJob(p, step, Path(request.output_dir) / f"{base_name}-grpo-step{step}"))
    for job in jobs:  # what is there and is not a merged model is refused, whatever --overwrite says
        if os.path.lexists(job.output):
            claim_output(job.output, MERGED_MODEL, overwrite=True)
    existing = [str(j.output) for j in jobs if j.output.exists()]
    if existing and not request.overwrite:
        raise OutputExists(existing)
    return jobs


def run_merge(
    cfg: Config, request: MergeRequest, sink: EventSink | None = None, stop: threading.Event | None = None
) -> list[Path]:
    """Merge every planned checkpoint (see the module docstring); returns the output folders."""
    from searchgrpo.policy.model import load_tokenizer, resolve_base

    sink = sink or (lambda e: None)
    output_dir = writable_output(Path(request.output_dir))
    for leftover in remove_stale_temporaries(output_dir, only_dead=True):
        sink(LogMessage("warning", f"removed {leftover}, left by a merge that was killed"))
    base = resolve_base(cfg)
    jobs = plan(cfg, request, base.name)
    for job in jobs:
        adapter_fit(job.checkpoint / "adapter", base.path)
    sink(MergeStarted([str(j.checkpoint) for j in jobs], request.output_dir))
    prompts = {job.checkpoint: merge_prompt(cfg, job.checkpoint) for job in jobs}
    for note in dict.fromkeys(p.note for p in prompts.values() if p.note):
        sink(LogMessage("warning", note))
    tokenizer = load_tokenizer(base.path)
    probe = _probe_prompts(cfg, tokenizer)
    outputs, parity = [], []
    for job in jobs:
        if stop is not None and stop.is_set():
            raise UserError("merge stopped; the folders finished so far are complete")
        figures = merge_one(base.path, tokenizer, job, probe, request, sink, prompts[job.checkpoint])
        outputs.append(job.output)
        parity.append({"output": str(job.output), **figures})
    sink(MergeFinished([str(p) for p in outputs], parity))
    return outputs


def writable_output(folder: Path) -> Path:
    """`folder`, created if missing, once a probe shows this process can write into it; else one
    line naming it and why (a file in the way, a read-only file system, no permission)."""
    claim_output(folder, MERGED_MODELS_ROOT)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tempfile.mkdtemp(prefix=".write-probe-", dir=folder))
    except OSError as exc:
        raise UserError(
            f"--output-dir {folder}: cannot write there ({exc.strerror or exc}); give a writable folder"
        ) from None
    return folder


def _probe_prompts(cfg: Config, tokenizer: Any) -> list[list[int]]:
    """A few real Executor prompts from the data (the parity probe)."""
    from searchgrpo.policy.sampling import encode_prompt
    from searchgrpo.world import load_dataset

    ds = load_dataset(cfg)
    states = (ds.eval or ds.train)[:PROBE_STATES]
    template = load_template(cfg.prompt.template, cfg.prompt.clue_format)
    return [
        encode_prompt(
            tokenizer,
            s,
            max_rows=min(cfg.data.max_table_rows, 6),
            max_tokens=512,
            min_clues=cfg.env.min_clues,
            max_clues=cfg.env.max_clues,
            template=template,
        )
        for s in states
    ]


def merge_one(
    base_path: Path,
    tokenizer: Any,
    job: MergeJob,
    probe: list[list[int]],
    request: MergeRequest,
    sink: EventSink,
    prompt: MergePrompt | None = None,
) -> dict[str, Any]:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    name = str(job.checkpoint)

    def progress(stage: str) -> None:
        sink(MergeProgress(name, stage, STAGES.index(stage), len(STAGES)))

    dtype = getattr(torch, request.dtype)
    progress("load")
    # The base rounded to the output dtype, computed in float32: what a server of base + adapter
    # in that dtype computes, so that the only difference left is rounding W + BA once.
    model = load_pretrained_checked(base_path, "model.base", dtype=dtype).float().to(request.device)
    model = PeftModel.from_pretrained(model, str(job.checkpoint / "adapter"))
    model.eval()
    progress("reference")
    ref_logp, completions = _probe_logprobs_and_greedy(model, tokenizer, probe, None)
    progress("merge")
    merged = model.merge_and_unload()
    merged = merged.to(dtype).to("cpu")
    with atomic_dir(job.output, overwrite=request.overwrite) as tmp:
        progress("save")
        merged.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        # The prompt the checkpoint was trained with, so the model is served with it (`merged_prompt`).
        prompt_json = write_prompt_record(tmp, prompt.template, prompt.sizes, prompt.source) if prompt else None
        progress("parity")
        reloaded = AutoModelForCausalLM.from_pretrained(str(tmp), dtype=torch.float32).to(request.device)
        reloaded.eval()
        got_logp, got_completions = _probe_logprobs_and_greedy(reloaded, tokenizer, probe, completions)
        figures = parity_figures(ref_logp, got_logp, completions, got_completions, request.dtype)
        (tmp / MERGE_INFO).write_text(
            json.dumps(
                {
                    "checkpoint": str(job.checkpoint),
                    "step": job.step,
                    "base": str(base_path),
                    "dtype": request.dtype,
                    "parity": figures,
                    "prompt": prompt_json,
                },
                indent=2,
            )
        )
        if not figures["passed"]:
            raise ParityError(f"{job.output}: parity check failed ({figures['reason']}); nothing was written")
    return figures


def _probe_logprobs_and_greedy(
    model: Any, tokenizer: Any, probe: list[list[int]], completions: list[_Greedy] | None
) -> tuple[Any, list[_Greedy]]:
    """Greedy continuations of the probe prompts (with each step's top-two margin), and the
    log-probs of the reference continuations (`completions`, or these if None) under `model`."""
    import torch

    from searchgrpo.policy.decoders import cache_argument
    from searchgrpo.policy.logprobs import group_logprobs, make_group_batch
    from searchgrpo.policy.sampling import stop_token_ids

    stops = set(stop_token_ids(model, tokenizer))
    cache_arg = cache_argument(model)
    own: list[_Greedy] = []
    with torch.no_grad():
        for prompt in probe:
            ids = torch.tensor([prompt])
            tokens: list[int] = []
            margins: list[float] = []
            out = model(input_ids=ids, use_cache=True)
            cache = getattr(out, "cache", None) or out.past_key_values
            for _ in range(PROBE_NEW_TOKENS):
                logits = out.logits[0, -1].float()
                top2 = torch.topk(logits, 2)
                token = int(top2.indices[0])
                tokens.append(token)
                margins.append(float(top2.values[0] - top2.values[1]))
                if token in stops:
                    break
                out = model(input_ids=torch.tensor([[token]]), use_cache=True, **{cache_arg: cache})
            own.append(_Greedy(tokens, margins))
        scored = completions if completions is not None else own
        batch = make_group_batch(probe, [c.tokens for c in scored], 1, tokenizer.pad_token_id, "cpu")
        logp = group_logprobs(model, batch)
        mask = batch.completion_mask.bool()
    return logp[mask], own


@dataclass(frozen=True)
class _Greedy:
    tokens: list[int]
    margins: list[float]


def parity_figures(
    ref_logp: Any, got_logp: Any, ref: Sequence[_Greedy], got: Sequence[_Greedy], dtype: str
) -> dict[str, Any]:
    """Compare merged with base + adapter; `passed` and a `reason` when not."""
    tol = TOLERANCE[dtype]
    delta = (ref_logp - got_logp).abs()
    max_delta, mean_delta = float(delta.max()), float(delta.mean())
    identical, near_ties, reason = 0, 0, ""
    for i, (r, g) in enumerate(zip(ref, got)):
        if r.tokens == g.tokens:
            identical += 1
            continue
        at = next((j for j, (a, b) in enumerate(zip(r.tokens, g.tokens)) if a != b), min(len(r.tokens), len(g.tokens)))
        if at < len(r.margins) and r.margins[at] <= tol:
            near_ties += 1
        elif not reason:
            reason = (
                f"greedy clues of probe {i} differ at token {at}, where the reference's margin is {r.margins[at]:.3f}"
            )
    if max_delta > tol or mean_delta > tol / 10:
        reason = (
            reason
            or f"log-probs differ by up to {max_delta:.4g} (mean {mean_delta:.4g}); allowed {tol} ({tol / 10} mean)"
        )
    return {
        "passed": not reason,
        "reason": reason,
        "dtype": dtype,
        "max_abs_logprob_delta": max_delta,
        "mean_abs_logprob_delta": mean_delta,
        "tolerance": tol,
        "probes": len(ref),
        "greedy_identical": identical,
        "greedy_near_ties": near_ties,
    }
